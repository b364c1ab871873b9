"""Prices and spend: turn provider-reported token usage into US dollars.

Unknown models are priced, not ignored: a free guess would let the spend cap leak. A model with no
entry in the team file's `prices:` or the built-in table costs `prices.default` when the team file
gives one, else `UNKNOWN_MODEL_PRICE` (priced like the dearest common model, so `budget_usd` still
bounds spend); local servers (ollama, vllm, lmstudio presets) cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.llm.base import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None  # None: cached tokens cost the full input price


FREE = Price(input_per_mtok=0.0, output_per_mtok=0.0)
UNKNOWN_MODEL_PRICE = Price(input_per_mtok=15.0, output_per_mtok=75.0)

# Public list prices (USD per Mtok) of common models; a team file's `prices:` overrides any of them.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.60, cached_input_per_mtok=0.075),
    "gpt-4o": Price(input_per_mtok=2.50, output_per_mtok=10.0, cached_input_per_mtok=1.25),
    "gpt-4.1": Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5),
    "gpt-4.1-mini": Price(input_per_mtok=0.40, output_per_mtok=1.60, cached_input_per_mtok=0.10),
    "gpt-4.1-nano": Price(input_per_mtok=0.10, output_per_mtok=0.40, cached_input_per_mtok=0.025),
    "gpt-5": Price(input_per_mtok=1.25, output_per_mtok=10.0, cached_input_per_mtok=0.125),
    "gpt-5-mini": Price(input_per_mtok=0.25, output_per_mtok=2.0, cached_input_per_mtok=0.025),
    "gpt-5-nano": Price(input_per_mtok=0.05, output_per_mtok=0.40, cached_input_per_mtok=0.005),
    "o4-mini": Price(input_per_mtok=1.10, output_per_mtok=4.40, cached_input_per_mtok=0.275),
    "claude-sonnet-4-6": Price(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.30),
    "claude-sonnet-4-5": Price(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.30),
    "claude-sonnet-4-0": Price(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.30),
    "claude-opus-4-1": Price(input_per_mtok=15.0, output_per_mtok=75.0, cached_input_per_mtok=1.50),
    "claude-haiku-4-5": Price(input_per_mtok=1.0, output_per_mtok=5.0, cached_input_per_mtok=0.10),
    "claude-3-5-haiku-latest": Price(input_per_mtok=0.80, output_per_mtok=4.0, cached_input_per_mtok=0.08),
    "gemini-2.5-flash": Price(input_per_mtok=0.30, output_per_mtok=2.50),
    "gemini-2.5-pro": Price(input_per_mtok=1.25, output_per_mtok=10.0),
    "grok-4": Price(input_per_mtok=3.0, output_per_mtok=15.0),
    "grok-3-mini": Price(input_per_mtok=0.30, output_per_mtok=0.50),
}


def resolve_price(model: str, overrides: dict[str, Price], *, local: bool = False) -> tuple[Price, bool]:
    """The price of `model` and whether it was known (team file, built-in table or a local server)."""
    if model in overrides:
        return overrides[model], True
    if model in DEFAULT_PRICES:
        return DEFAULT_PRICES[model], True
    if local:
        return FREE, True
    return overrides.get("default", UNKNOWN_MODEL_PRICE), "default" in overrides


def cost_usd(usage: Usage, price: Price) -> float:
    """Dollars for one call's usage; cached input tokens are part of `input_tokens` (as providers report)."""
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    cached_rate = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    dollars = (
        (usage.input_tokens - cached) * price.input_per_mtok
        + cached * cached_rate
        + usage.output_tokens * price.output_per_mtok
    )
    return dollars / 1_000_000
