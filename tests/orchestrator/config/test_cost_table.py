"""Prices: team overrides, the built-in table, local servers, unknown models; dollars from usage."""

from __future__ import annotations

import pytest

from orchestrator.config.cost import DEFAULT_PRICES, FREE, UNKNOWN_MODEL_PRICE, Price, cost_usd, resolve_price
from orchestrator.llm.base import Usage

CHEAP = Price(input_per_mtok=1.0, output_per_mtok=2.0)


@pytest.mark.parametrize(
    ("model", "overrides", "local", "expected", "known"),
    [
        ("gpt-4o-mini", {}, False, DEFAULT_PRICES["gpt-4o-mini"], True),
        ("gpt-4o-mini", {"gpt-4o-mini": CHEAP}, False, CHEAP, True),  # the team file wins
        ("llama3", {}, True, FREE, True),  # a local server costs nothing
        ("mystery", {}, False, UNKNOWN_MODEL_PRICE, False),  # priced high so the cap still holds
        ("mystery", {"default": CHEAP}, False, CHEAP, True),
    ],
)
def test_resolve_price(
    model: str, overrides: dict[str, Price], local: bool, expected: Price, known: bool
) -> None:
    assert resolve_price(model, overrides, local=local) == (expected, known)


@pytest.mark.parametrize(
    ("usage", "price", "dollars"),
    [
        (Usage(input_tokens=1_000_000, output_tokens=0), CHEAP, 1.0),
        (Usage(input_tokens=0, output_tokens=500_000), CHEAP, 1.0),
        # Cached input is part of input_tokens and billed at the cached rate.
        (
            Usage(input_tokens=1_000_000, output_tokens=0, cached_input_tokens=400_000),
            Price(input_per_mtok=1.0, output_per_mtok=0.0, cached_input_per_mtok=0.25),
            0.6 + 0.1,
        ),
        # Without a cached rate, cached tokens cost the full input price.
        (Usage(input_tokens=1_000_000, output_tokens=0, cached_input_tokens=400_000), CHEAP, 1.0),
        (Usage(input_tokens=123, output_tokens=45), FREE, 0.0),
    ],
)
def test_cost_usd(usage: Usage, price: Price, dollars: float) -> None:
    assert cost_usd(usage, price) == pytest.approx(dollars)
