"""Messages requests -> Chat Completions bodies: each parameter's and block's translation, and
the 400s for what cannot be translated, each naming its parameter."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.apis.anthropic.headers import ApiVersion
from gateway.apis.anthropic.messages_request import parse_count_tokens, parse_request
from gateway.apis.anthropic.messages_to_chat import conversation_body, to_chat_request
from gateway.core.errors import InvalidRequest
from gateway.core.wire import ChatRequest

TOOL = {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
CHAT_TOOL = {"type": "function", "function": {"name": "lookup", "parameters": TOOL["input_schema"]}}
HI = [{"role": "user", "content": "hi"}]
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def chat(**body: Any) -> dict[str, Any]:
    translated = to_chat_request(parse_request({"model": "small", "max_tokens": 64, "messages": HI, **body}))
    ChatRequest.model_validate(translated)  # what costgate's own chat route would accept
    return translated


@pytest.mark.parametrize(
    "body, messages",
    [
        ({}, [{"role": "user", "content": "hi"}]),
        ({"system": "Be brief."}, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]),
        (
            {
                "system": [
                    {"type": "text", "text": "A.", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "B."},
                ]
            },
            [
                {"role": "system", "content": [{"type": "text", "text": "A."}, {"type": "text", "text": "B."}]},
                {"role": "user", "content": "hi"},
            ],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                            {"type": "image", "source": PNG},
                        ],
                    }
                ]
            },
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                    ],
                }
            ],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}],
                    }
                ]
            },
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}],
        ),
        # A turn's tool results come first (chat wants them right after the call), then its text.
        (
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Looking."},
                            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "a"}},
                            {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {}},
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "thanks"},
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
                            {
                                "type": "tool_result",
                                "tool_use_id": "toolu_2",
                                "is_error": True,
                                "content": [{"type": "text", "text": "B failed"}],
                            },
                        ],
                    },
                ]
            },
            [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": "Looking.",
                    "tool_calls": [
                        {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"a"}'}},
                        {"id": "toolu_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_1", "content": "A"},
                {"role": "tool", "tool_call_id": "toolu_2", "content": "B failed"},
                {"role": "user", "content": "thanks"},
            ],
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
            [{"role": "tool", "tool_call_id": "t", "content": ""}],
        ),
        (
            {"messages": [{"role": "system", "content": "Mid-conversation rule."}, *HI]},
            [{"role": "system", "content": "Mid-conversation rule."}, {"role": "user", "content": "hi"}],
        ),
    ],
)
def test_message_translation(body: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    assert chat(**body)["messages"] == messages


@pytest.mark.parametrize(
    "body, expected",
    [
        ({}, {}),
        ({"stop_sequences": ["END", "STOP"]}, {"stop": ["END", "STOP"]}),
        ({"temperature": 0.2, "top_p": 0.8, "top_k": 20}, {"temperature": 0.2, "top_p": 0.8, "top_k": 20}),
        ({"metadata": {"user_id": "u-7"}}, {"user": "u-7"}),
        ({"stream": True}, {"stream": True, "stream_options": {"include_usage": True}}),
        (
            {
                "service_tier": "standard_only",
                "cache_control": {"type": "ephemeral"},
                "thinking": {"type": "disabled"},
                "speed": "standard",
            },
            {},
        ),
        ({"tools": [TOOL]}, {"tools": [CHAT_TOOL]}),
        (
            {
                "tools": [
                    TOOL | {"description": "Search.", "strict": True, "type": "custom", "eager_input_streaming": True}
                ]
            },
            {
                "tools": [
                    {"type": "function", "function": CHAT_TOOL["function"] | {"description": "Search.", "strict": True}}
                ]
            },
        ),
        ({"tools": [TOOL], "tool_choice": {"type": "auto"}}, {"tools": [CHAT_TOOL], "tool_choice": "auto"}),
        ({"tools": [TOOL], "tool_choice": {"type": "any"}}, {"tools": [CHAT_TOOL], "tool_choice": "required"}),
        ({"tools": [TOOL], "tool_choice": {"type": "none"}}, {"tools": [CHAT_TOOL], "tool_choice": "none"}),
        (
            {"tools": [TOOL], "tool_choice": {"type": "tool", "name": "lookup", "disable_parallel_tool_use": True}},
            {
                "tools": [CHAT_TOOL],
                "tool_choice": {"type": "function", "function": {"name": "lookup"}},
                "parallel_tool_calls": False,
            },
        ),
        (
            {"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": {"type": "object"}, "strict": True},
                }
            },
        ),
    ],
)
def test_parameter_translation(body: dict[str, Any], expected: dict[str, Any]) -> None:
    translated = chat(**body)
    assert translated.pop("max_completion_tokens") == 64
    assert {k: v for k, v in translated.items() if k not in ("model", "messages")} == expected


def test_count_tokens_needs_no_max_tokens() -> None:
    body = conversation_body(parse_count_tokens({"model": "small", "messages": HI, "system": "s", "tools": [TOOL]}))
    assert body == {"model": "small", "messages": [{"role": "system", "content": "s"}, *HI], "tools": [CHAT_TOOL]}


@pytest.mark.parametrize(
    "body, param",
    [
        ({"tools": [TOOL], "tool_choice": {"type": "whatever"}}, "tool_choice"),
        ({"mcp_servers": [{"type": "url", "url": "https://m", "name": "m"}]}, "mcp_servers"),
        ({"output_config": {"format": {"type": "regex", "pattern": "x"}}}, "output_config.format"),
        ({"max_tokens": 0}, "max_tokens"),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": PNG}]}]},
            "messages[0].content[0].type",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}
                ]
            },
            "messages[0].content[0].source",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image", "source": PNG}]}
                        ],
                    }
                ]
            },
            "messages[0].content[0].content[0].type",
        ),
    ],
)
def test_untranslatable_parameters_are_refused(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        to_chat_request(parse_request({"model": "small", "max_tokens": 64, "messages": HI, **body}))
    assert err.value.param == param and param in err.value.message


@pytest.mark.parametrize(
    "body, dropped, effort",
    [
        ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, ["tools[].bash_20250124"], None),
        ({"tools": [TOOL | {"input_examples": [{"q": "x"}]}]}, ["tools[].input_examples"], None),
        ({"tools": [TOOL | {"defer_loading": True}]}, ["tools[].defer_loading"], None),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, [], "low"),
        ({"thinking": {"type": "enabled", "budget_tokens": 8000}}, [], "medium"),
        ({"thinking": {"type": "enabled", "budget_tokens": 32000}}, [], "high"),
        ({"thinking": {"type": "adaptive", "display": "omitted"}}, [], None),
        ({"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}, [], "medium"),
        ({"output_config": {"effort": "max"}}, [], "high"),
        ({"speed": "fast"}, ["speed"], None),
        ({"container": "cntr_1"}, ["container"], None),
        ({"inference_geo": "us"}, ["inference_geo"], None),
        ({"frobnicate": True}, ["frobnicate"], None),
        (
            {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
            ["context_management"],
            None,
        ),
        (
            {
                "messages": [
                    *HI,
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": "hm", "signature": "s"},
                            {"type": "redacted_thinking", "data": "xyz"},
                            {"type": "text", "text": "hello"},
                        ],
                    },
                    *HI,
                ]
            },
            ["messages[].content[].redacted_thinking", "messages[].content[].thinking"],
            None,
        ),
    ],
)
def test_fields_without_a_chat_equivalent_are_mapped_or_dropped_and_named(
    body: dict[str, Any], dropped: list[str], effort: str | None
) -> None:
    """What Claude Code sends by default is never a 400 (issue 29): mapped where chat has an
    equivalent, else dropped and named for x-costgate-dropped-params."""
    names: list[str] = []
    chat = to_chat_request(parse_request({"model": "small", "max_tokens": 64, "messages": HI, **body}), names)
    assert sorted(set(names)) == dropped
    assert chat.get("reasoning_effort") == effort
    assert "thinking" not in str(chat["messages"]) or "hm" not in str(chat["messages"])


@pytest.mark.parametrize(
    "body, param, words",
    [
        ({"model": "small", "messages": HI}, "max_tokens", "Field required"),
        ({"model": "small", "max_tokens": 5}, "messages", "Field required"),
        ({"model": "small", "max_tokens": 5, "messages": []}, "messages", "at least 1"),
        ({"model": "small", "max_tokens": 5, "messages": HI, "temperature": 1.5}, "temperature", "less than or equal"),
        (
            {"model": "small", "max_tokens": 5, "messages": [{"role": "human", "content": "x"}]},
            "messages[0].role",
            "Input",
        ),
        (
            {
                "model": "small",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "not an object"}],
                    }
                ],
            },
            "messages[0].content[0].input",
            "dictionary",
        ),
    ],
)
def test_malformed_requests_name_the_parameter(body: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        to_chat_request(parse_request(body))
    assert err.value.param == param and words in err.value.message


@pytest.mark.parametrize(
    "body, param",
    [
        ({"temperature": 1.0}, "temperature"),
        ({"top_p": 0.5}, "top_p"),
        ({"top_k": 3}, "top_k"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "text",
                                "text": "x",
                                "citations": [
                                    {
                                        "type": "char_location",
                                        "cited_text": "x",
                                        "document_index": 0,
                                        "start_char_index": 0,
                                        "end_char_index": 1,
                                    }
                                ],
                            }
                        ],
                    }
                ]
            },
            "messages[0].content[0].citations",
        ),
    ],
)
def test_version_2026_10_21_refuses_what_it_removed(body: dict[str, Any], param: str) -> None:
    full = {"model": "small", "max_tokens": 5, "messages": HI, **body}
    parse_request(full, ApiVersion.V2023_06_01)
    with pytest.raises(InvalidRequest) as err:
        parse_request(full, ApiVersion.V2026_10_21)
    assert err.value.param == param
