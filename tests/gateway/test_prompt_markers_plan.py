"""gateway/upstream/prompt_markers.py on bodies alone: where the marks go, what is left as it came."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.config.models_config import ModelConfig
from gateway.config.settings import TeamConfig
from gateway.core.context import Principal
from gateway.upstream.prompt_markers import CachePlan, detect_style

TEAM = Principal(team_id="team_1", team_name="one", key_id="key_1")
LONG = "stable instructions " * 400  # ~2,000 of the quick count's tokens


def plan(shared: bool = True, **model: Any) -> CachePlan:
    config = ModelConfig.model_validate(
        {"name": "m", "provider": "litellm", "model": "anthropic/claude-sonnet-4-5", **model}
    )
    return CachePlan.of(config, {"one": TeamConfig.model_validate({})}, shared)


@pytest.mark.parametrize(
    "config, style",
    [
        ({"provider": "litellm", "model": "anthropic/claude-sonnet-4-5"}, "anthropic"),
        ({"provider": "litellm", "model": "bedrock/anthropic.claude-3-haiku"}, "anthropic"),
        ({"provider": "openai", "model": "x", "api_base": "http://h/v1", "apis": ["chat", "messages"]}, "anthropic"),
        ({"provider": "openai", "model": "gpt-4o", "api_base": "https://api.openai.com/v1"}, "openai"),
        ({"provider": "openai", "model": "llama", "api_base": "http://vllm:8000/v1"}, "none"),  # vLLM: leave it be
        ({"provider": "litellm", "model": "gemini/gemini-2.5-pro"}, "none"),
        (
            {"provider": "openai", "model": "x", "api_base": "http://h/v1", "prompt_cache": {"style": "openai"}},
            "openai",
        ),
    ],
)
def test_style_from_the_provider(config: dict[str, Any], style: str) -> None:
    assert detect_style(ModelConfig.model_validate({"name": "m", **config})) == style


def test_the_clients_body_is_never_changed_in_place() -> None:
    body = {"system": LONG, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    before = copy.deepcopy(body)
    sent = plan().messages(body, TEAM)
    assert body == before
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize(
    "api, body, marked",
    [
        (  # the stable prefix ends at the last tool
            "messages",
            {
                "tools": [{"name": "f", "description": LONG}],
                "messages": [{"role": "user", "content": [{"text": "hi"}]}],
            },
            (("tools", -1), ("messages", -1, "content", -1)),
        ),
        (
            "messages",
            {"system": [{"type": "text", "text": LONG}], "messages": [{"role": "user", "content": [{"text": "hi"}]}]},
            (("system", -1), ("messages", -1, "content", -1)),
        ),
        (
            "chat",
            {
                "tools": [{"function": {"name": "f", "description": LONG}}],
                "messages": [{"role": "user", "content": "x"}],
            },
            (("tools", -1), ("messages", -1, "content", -1)),
        ),
        (
            "chat",
            {
                "messages": [
                    {"role": "system", "content": [{"text": LONG}]},
                    {"role": "user", "content": [{"text": "x"}]},
                ]
            },
            (("messages", 1, "content", -1), ("messages", -1, "content", -1)),  # 0: the scope
        ),
    ],
)
def test_no_block_of_the_clients_body_is_changed_in_place(
    api: str, body: dict[str, Any], marked: tuple[tuple[Any, ...], ...]
) -> None:
    """Tools, system blocks and content parts in lists: the marks land on copies of them."""
    before = copy.deepcopy(body)
    sent = getattr(plan(shared=False), api)(body, TEAM)
    assert body == before
    for path in marked:
        block: Any = sent
        for step in path:
            block = block[step]
        assert block["cache_control"] == {"type": "ephemeral"}


def test_after_a_clients_five_minute_breakpoint_the_gateways_are_five_minute() -> None:
    """Anthropic refuses a 1-hour breakpoint after a 5-minute one."""
    body = {
        "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi " * 10}],
    }
    sent = plan(prompt_cache={"ttl": "1h"}).messages(body, TEAM)
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}  # the client's, as it was
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    fresh = plan(prompt_cache={"ttl": "1h"}).messages({"system": LONG, "messages": body["messages"]}, TEAM)
    assert fresh["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_isolated_teams_get_their_scope_first_and_shared_ones_do_not() -> None:
    body = {"system": LONG, "messages": [{"role": "user", "content": "hi"}]}
    isolated = plan(shared=False).messages(body, TEAM)
    assert isolated["system"][0]["text"].startswith("cache scope ") and "cache_control" not in isolated["system"][0]
    assert not plan(shared=True).messages(body, TEAM)["system"][0]["text"].startswith("cache scope ")


def test_chat_marks_tool_results_on_the_message_and_text_on_its_part() -> None:
    body = {
        "messages": [
            {"role": "system", "content": LONG},
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "result"},
        ]
    }
    sent = plan().chat(body, TEAM)
    assert sent["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][-1]["cache_control"] == {"type": "ephemeral"}  # litellm reads a tool result's here


def test_off_leaves_every_body_alone() -> None:
    body = {"system": LONG, "messages": [{"role": "user", "content": "hi"}]}
    assert plan(prompt_cache={"mode": "off"}).messages(body, TEAM) is body


def test_responses_get_openais_key() -> None:
    config = ModelConfig.model_validate(
        {"name": "m", "model": "gpt-5", "api_base": "https://api.openai.com/v1", "apis": ["chat", "responses"]}
    )
    p = CachePlan.of(config, {}, False)
    body = {"instructions": LONG, "input": "hi"}
    assert p.responses(body, TEAM)["prompt_cache_key"].startswith("cg-")
    assert p.responses(dict(body, prompt_cache_key="own"), TEAM)["prompt_cache_key"] == "own"
