"""The loopback provider server against the raw SDKs in strict mode, plus its default agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from tests.fakes.provider_agent import answer_labels, protocol_agent, task_of, vote_target
from tests.fakes.provider_server import ProviderRequest, ProviderServer, Reply, WireMessage, scripted

TOOL = {"type": "object", "properties": {"city": {"type": "string"}}}
REPLIES = {
    "text": Reply(text="Hello from the fake server."),
    "tools": Reply(text="Calling.", tool_calls=[("get_weather", {"city": "Paris"}), ("noop", {})]),
}


@pytest.fixture
async def server() -> AsyncIterator[ProviderServer]:
    async with ProviderServer(lambda req: REPLIES[req.model]) as s:
        yield s


@pytest.fixture
async def oai(server: ProviderServer) -> AsyncIterator[AsyncOpenAI]:
    async with strict_openai(server) as client:
        yield client


@pytest.fixture
async def anth(server: ProviderServer) -> AsyncIterator[AsyncAnthropic]:
    async with strict_anthropic(server) as client:
        yield client


def strict_openai(server: ProviderServer) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.openai_base_url, api_key="k", max_retries=0, _strict_response_validation=True
    )


def strict_anthropic(server: ProviderServer) -> AsyncAnthropic:
    return AsyncAnthropic(
        base_url=server.anthropic_base_url, api_key="k", max_retries=0, _strict_response_validation=True
    )


async def chat(client: AsyncOpenAI, model: str, stream: bool) -> tuple[str, list[tuple[str, str]]]:
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": TOOL}}],
    }
    if stream:
        async with client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as s:
            done = await s.get_final_completion()
        assert done.usage is not None
    else:
        done = await client.chat.completions.create(**kwargs)
    message = done.choices[0].message
    calls = [
        (c.function.name, c.function.arguments) for c in message.tool_calls or [] if c.type == "function"
    ]
    return message.content or "", calls


async def responses(client: AsyncOpenAI, model: str, stream: bool) -> tuple[str, list[tuple[str, str]]]:
    tools: Any = [{"type": "function", "name": "get_weather", "parameters": TOOL, "strict": False}]
    done: Any
    if stream:
        async with client.responses.stream(model=model, input="weather?", tools=tools) as s:
            done = await s.get_final_response()
    else:
        done = await client.responses.create(model=model, input="weather?", tools=tools)
    assert done.usage is not None
    calls = [(o.name, o.arguments) for o in done.output if o.type == "function_call"]
    return done.output_text, calls


async def messages(client: AsyncAnthropic, model: str, stream: bool) -> tuple[str, list[tuple[str, str]]]:
    kwargs: Any = {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [{"name": "get_weather", "input_schema": TOOL}],
    }
    if stream:
        async with client.messages.stream(**kwargs) as s:
            done = await s.get_final_message()
    else:
        done = await client.messages.create(**kwargs)
    text = "".join(b.text for b in done.content if b.type == "text")
    calls = [(b.name, json.dumps(b.input)) for b in done.content if b.type == "tool_use"]
    return text, calls


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
@pytest.mark.parametrize("model", ["text", "tools"])
@pytest.mark.parametrize("call", [chat, responses, messages])
async def test_sdk_helpers_accept_every_reply_in_strict_mode(
    server: ProviderServer, oai: AsyncOpenAI, anth: AsyncAnthropic, call: Any, model: str, stream: bool
) -> None:
    text, calls = await call(anth if call is messages else oai, model, stream)
    expected = REPLIES[model]
    assert text == expected.text
    assert [(n, json.loads(a)) for n, a in calls] == expected.tool_calls
    assert server.requests[-1].stream is stream
    assert server.requests[-1].tools == ["get_weather"]


CONVERSATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/chat/completions",
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": '{"x": 1}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            ]
        },
    ),
    "responses": (
        "/responses",
        {
            "instructions": "be brief",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "function_call", "call_id": "c1", "name": "sh", "arguments": '{"x": 1}'},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
        },
    ),
    "messages": (
        "/messages",
        {
            "system": [{"type": "text", "text": "be brief"}],
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "c1", "name": "sh", "input": {"x": 1}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
            ],
        },
    ),
}


@pytest.mark.parametrize("api", list(CONVERSATIONS))
async def test_requests_are_normalised_the_same_across_apis(api: str) -> None:
    path, body = CONVERSATIONS[api]
    async with ProviderServer(scripted(Reply(text="done"))) as server:
        if api == "messages":
            async with strict_anthropic(server) as anth:
                await anth.post("/v1/messages", body=body | {"model": "m"}, cast_to=object)
        else:
            async with strict_openai(server) as oai:
                await oai.post(path, body=body | {"model": "m"}, cast_to=object)
    [request] = server.requests
    assert (request.api, request.system) == (api, "be brief")
    assert request.messages == [
        WireMessage(role="user", text="go"),
        WireMessage(role="assistant", tool_calls=[("sh", {"x": 1})]),
        WireMessage(role="tool", text="ok", call_id="c1"),
    ]


async def test_scripted_per_model_and_exhaustion_is_a_clear_400() -> None:
    handler = scripted({"a": [Reply(text="a1"), Reply(text="a2")], "b": [Reply(text="b1")]})
    async with ProviderServer(handler) as server, strict_openai(server) as client:
        got = []
        for model in ["a", "b", "a"]:
            done = await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "x"}]
            )
            got.append(done.choices[0].message.content)
        assert got == ["a1", "b1", "a2"]
        with pytest.raises(Exception, match="script exhausted for model 'b'") as info:
            await client.chat.completions.create(model="b", messages=[{"role": "user", "content": "x"}])
        assert getattr(info.value, "status_code", None) == 400


def request(text: str, tools: list[str], *, history: list[WireMessage] | None = None, raw: Any = None) -> Any:
    messages = [*(history or []), WireMessage(role="user", text=text)]
    return ProviderRequest(
        api="chat", model="gpt-x", system="", messages=messages, tools=tools, raw=raw or {}, stream=True
    )


TASK = "<ORIGINAL MESSAGE> fix the flaky test <END OF ORIGINAL MESSAGE>\n<CURRENT ANSWERS from the agents>\n"


BOTH = ["new_answer", "vote"]
ANSWERED = [WireMessage(role="assistant", tool_calls=[("new_answer", {"content": "earlier"})])]
FIRST = ("new_answer", {"content": "Answer from gpt-x: fix the flaky test"})


@pytest.mark.parametrize(
    ("text", "tools", "history", "expected"),
    [
        (TASK + "(none)", BOTH, [], FIRST),
        (TASK + "<agent2.1> x <end of agent2.1> <agent1.1> y", BOTH, ANSWERED, ("vote", "agent2")),
        (TASK + "<agent3.1> Answer from gpt-x: fix <end of agent3.1>", BOTH, [], ("vote", "agent3")),
        (TASK + "no labels at all", ["vote"], [], ("vote", "agent1")),
        ("present it", ["shell"], [], "Final answer: gpt-x presents: present it"),
    ],
    ids=["first-answer", "vote-first-label", "answered-after-restart", "vote-fallback", "final"],
)
def test_protocol_agent_answers_votes_then_presents(
    text: str, tools: list[str], history: list[WireMessage], expected: Any
) -> None:
    reply = protocol_agent(request(text, tools, history=history))
    if isinstance(expected, str):
        assert (reply.text, reply.tool_calls) == (expected, [])
    elif expected[0] == "vote":
        [(name, args)] = reply.tool_calls
        assert (name, args["agent_id"]) == expected  # type: ignore[index]
    else:
        assert reply.tool_calls == [expected]


def test_vote_target_respects_the_schema_enum() -> None:
    agent_id = {"type": "string", "enum": ["agent2", "agent3"]}
    schema = {"type": "object", "properties": {"agent_id": agent_id}}
    raw = {"tools": [{"type": "function", "function": {"name": "vote", "parameters": schema}}]}
    assert vote_target(request("<agent1.1> a <agent3.2> b", ["vote"], raw=raw)) == "agent3"
    assert vote_target(request("nothing", ["vote"], raw=raw)) == "agent2"
    assert answer_labels("<agent2.1> <agent1> <agent2.3>") == ["agent2", "agent1"]
    assert task_of(request("  many   words\nhere ", [])) == "many words here"


def test_protocol_agent_follows_our_engines_prompts() -> None:
    """The shapes orchestrator/prompts produce: <task>, then answers in a tool result."""
    first = WireMessage(role="user", text="<task>\nfix the flaky test\n</task>\nNo answers yet.")
    answered = WireMessage(role="assistant", tool_calls=[("new_answer", {"content": "mine"})])
    update = WireMessage(
        role="tool",
        call_id="c1",
        text="Recorded as agent1.1.\n\nCurrent answers:\n"
        '<answer agent="agent3" label="agent3.2">\nA\n</answer>\n'
        '<answer agent="agent1" label="agent1.1">\nB\n</answer>\nVote for the best one.',
    )
    opening = ProviderRequest(
        api="chat", model="gpt-x", system="", messages=[first], tools=BOTH, raw={}, stream=True
    )
    assert protocol_agent(opening).tool_calls == [FIRST]
    later = ProviderRequest(
        api="chat",
        model="gpt-x",
        system="",
        messages=[first, answered, update],
        tools=BOTH,
        raw={},
        stream=True,
    )
    assert protocol_agent(later).tool_calls == [
        ("vote", {"agent_id": "agent3", "reason": "agent3 answers the task."})
    ]
