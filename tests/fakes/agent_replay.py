"""An agent-style replay (issue 26): conversations that resend a long system prompt, the tools
and the whole history every turn, each turn a tool call and its result, and no cache markers
from the client. Written in Chat Completions' and in Anthropic Messages' shapes; the test and
bench/prompt_cache_replay.py both send it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

WORDS = (
    "ledger budget cascade token latency replica invoice provider cache prefix breakpoint team "
    "request answer stream batch window model price record audit policy schema key route"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


@dataclass(frozen=True)
class Agent:
    system: str
    tools: list[dict[str, Any]]  # name, description, JSON schema

    @classmethod
    def make(cls, seed: int = 26, system_words: int = 2500, tools: int = 6) -> Agent:
        rng = random.Random(seed)
        specs = [
            {
                "name": f"tool_{i}",
                "description": _text(rng, 60),
                "schema": {"type": "object", "properties": {"q": {"type": "string", "description": _text(rng, 20)}}},
            }
            for i in range(tools)
        ]
        return cls("You are an operations agent. " + _text(rng, system_words), specs)


@dataclass(frozen=True)
class Turn:
    """One turn: the user's words, then the tool the agent called and what it returned."""

    user: str
    tool: str
    call_id: str
    result: str


def conversations(count: int = 12, turns: int = 8, seed: int = 7) -> Iterator[list[Turn]]:
    rng = random.Random(seed)
    for c in range(count):
        yield [Turn(_text(rng, 40), f"tool_{rng.randrange(6)}", f"call_{c}_{t}", _text(rng, 120)) for t in range(turns)]


def chat_request(agent: Agent, done: list[Turn], now: Turn) -> dict[str, Any]:
    """The Chat Completions body of a turn: every earlier turn resent, then this turn's result."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": agent.system}]
    for turn in [*done, now]:
        messages += [
            {"role": "user", "content": turn.user},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": turn.call_id, "type": "function", "function": {"name": turn.tool, "arguments": '{"q":"x"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": turn.call_id, "content": turn.result},
        ]
    tools = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["schema"]},
        }
        for t in agent.tools
    ]
    return {"messages": messages, "tools": tools, "max_tokens": 64}


def messages_request(agent: Agent, done: list[Turn], now: Turn) -> dict[str, Any]:
    """The same turn in Anthropic's Messages shape."""
    messages: list[dict[str, Any]] = []
    for turn in [*done, now]:
        messages += [
            {"role": "user", "content": turn.user},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": turn.call_id, "name": turn.tool, "input": {"q": "x"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": turn.call_id, "content": turn.result}]},
        ]
    tools = [{"name": t["name"], "description": t["description"], "input_schema": t["schema"]} for t in agent.tools]
    return {"system": agent.system, "messages": messages, "tools": tools, "max_tokens": 64}
