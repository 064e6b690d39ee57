"""Responses requests -> Chat Completions bodies: each parameter's translation, and the 400s
for what cannot be translated, each naming its parameter."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.apis.responses.responses_request import parse_request
from gateway.apis.responses.responses_to_chat import to_chat_request
from gateway.core.errors import InvalidRequest
from gateway.core.wire import ChatRequest

FN = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
CHAT_FN = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
IMAGE = "data:image/png;base64,iVBORw0KGgo="


def chat(**body: Any) -> dict[str, Any]:
    translated = to_chat_request(parse_request({"model": "small", **body}))
    ChatRequest.model_validate(translated)  # what costgate's own chat route would accept
    return translated


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"input": "hi"}, {"messages": [{"role": "user", "content": "hi"}]}),
        (
            {"input": "hi", "instructions": "Be terse."},
            {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]},
        ),
        (
            {"input": [{"role": "developer", "content": "Rules."}, {"role": "user", "content": "q"}]},
            {"messages": [{"role": "system", "content": "Rules."}, {"role": "user", "content": "q"}]},
        ),
        (
            {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one part"}]}]},
            {"messages": [{"role": "user", "content": "one part"}]},
        ),
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "what is this?"},
                            {"type": "input_image", "image_url": IMAGE, "detail": "low"},
                        ],
                    }
                ]
            },
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "what is this?"},
                            {"type": "image_url", "image_url": {"url": IMAGE, "detail": "low"}},
                        ],
                    }
                ]
            },
        ),
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "input_file",
                                "filename": "a.pdf",
                                "file_data": "data:application/pdf;base64,JVBER",
                            }
                        ],
                    }
                ]
            },
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "file",
                                "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "a.pdf"},
                            }
                        ],
                    }
                ]
            },
        ),
        # An earlier output message and its function call make one assistant turn.
        (
            {
                "input": [
                    {"role": "user", "content": "q"},
                    {
                        "type": "message",
                        "id": "msg_1",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
                    },
                    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                    {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "lookup", "arguments": '{"a":1}'},
                    {"type": "function_call_output", "call_id": "c1", "output": "one"},
                    {
                        "type": "function_call_output",
                        "call_id": "c2",
                        "output": [{"type": "input_text", "text": "two"}],
                    },
                ]
            },
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": "Let me look.",
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                            {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"a":1}'}},
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "one"},
                    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "two"}]},
                ]
            },
        ),
        (
            {"input": [{"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}]},
            {"messages": [{"role": "assistant", "content": None, "refusal": "No."}]},
        ),
    ],
)
def test_input_translation(body: dict[str, Any], expected: dict[str, Any]) -> None:
    assert chat(**body) == {"model": "small", **expected}


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"max_output_tokens": 64}, {"max_completion_tokens": 64}),
        ({"temperature": 0.5, "top_p": 0.9}, {"temperature": 0.5, "top_p": 0.9}),
        ({"user": "u-1", "metadata": {"project": "x"}}, {"user": "u-1", "metadata": {"project": "x"}}),
        (
            {"prompt_cache_key": "k", "safety_identifier": "s", "service_tier": "flex"},
            {"prompt_cache_key": "k", "safety_identifier": "s", "service_tier": "flex"},
        ),
        ({"reasoning": {"effort": "low"}}, {"reasoning_effort": "low"}),
        ({"text": {"format": {"type": "text"}, "verbosity": "low"}}, {"verbosity": "low"}),
        ({"text": {"format": {"type": "json_object"}}}, {"response_format": {"type": "json_object"}}),
        (
            {"text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}, "strict": True}}},
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "r", "schema": {"type": "object"}, "strict": True},
                }
            },
        ),
        ({"stream": True}, {"stream": True, "stream_options": {"include_usage": True}}),
        (
            {
                "store": False,
                "max_tool_calls": 3,
                "truncation": "disabled",
                "stream_options": {"include_obfuscation": False},
            },
            {},
        ),
        # Without tools, chat would refuse tool_choice and parallel_tool_calls: they are not sent.
        ({"tool_choice": "auto", "parallel_tool_calls": False}, {}),
        (
            {"tools": [FN], "tool_choice": "required", "parallel_tool_calls": False},
            {"tools": [CHAT_FN], "tool_choice": "required", "parallel_tool_calls": False},
        ),
        (
            {"tools": [FN], "tool_choice": {"type": "function", "name": "lookup"}},
            {"tools": [CHAT_FN], "tool_choice": {"type": "function", "function": {"name": "lookup"}}},
        ),
        (
            {
                "tools": [FN],
                "tool_choice": {
                    "type": "allowed_tools",
                    "mode": "auto",
                    "tools": [{"type": "function", "name": "lookup"}],
                },
            },
            {
                "tools": [CHAT_FN],
                "tool_choice": {
                    "type": "allowed_tools",
                    "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "lookup"}}]},
                },
            },
        ),
    ],
)
def test_parameter_translation(body: dict[str, Any], expected: dict[str, Any]) -> None:
    translated = chat(input="x", **body)
    assert {k: v for k, v in translated.items() if k not in ("model", "messages")} == expected


def test_previous_conversation_comes_first_and_old_instructions_do_not() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "reply", "annotations": [], "logprobs": []}],
        },
    ]
    req = parse_request(
        {"model": "small", "previous_response_id": "resp_1", "input": "second", "instructions": "New rules."}
    )
    assert to_chat_request(req, history)["messages"] == [
        {"role": "system", "content": "New rules."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "second"},
    ]


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": "x", "tools": [FN], "tool_choice": {"type": "web_search_preview"}}, "tool_choice"),
        ({"input": "x", "tools": [{"type": "mcp", "server_label": "m", "server_url": "https://m"}]}, "tools[0].type"),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": "x", "prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"input": "x", "truncation": "auto"}, "truncation"),
        ({"input": "x", "text": {"format": {"type": "grammar"}}}, "text.format.type"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
            "input[0].content[0].file_id",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
            "input[0].content[0].type",
        ),
        (
            {
                "input": [
                    {
                        "type": "function_call_output",
                        "call_id": "c",
                        "output": [{"type": "input_image", "image_url": IMAGE}],
                    }
                ]
            },
            "input[0].output[0].type",
        ),
    ],
)
def test_untranslatable_parameters_are_refused(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        to_chat_request(parse_request({"model": "small", **body}))
    assert err.value.param == param and err.value.status == 400
    assert param.split("[")[0].split(".")[0] in err.value.message


@pytest.mark.parametrize(
    "body, dropped",
    [
        ({"input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["vs"]}]}, ["tools[].file_search"]),
        ({"input": "x", "tools": [FN, {"type": "custom", "name": "apply_patch"}]}, ["tools[].custom"]),
        ({"input": "x", "tools": [FN | {"defer_loading": True}]}, ["tools[].defer_loading"]),
        ({"input": "x", "top_logprobs": 3}, ["top_logprobs"]),
        ({"input": "x", "context_management": [{"type": "compaction"}]}, ["context_management"]),
        ({"input": "x", "reasoning": {"effort": "low", "generate_summary": "concise"}}, ["reasoning.generate_summary"]),
        ({"input": "x", "client_metadata": {"session_id": "s"}}, ["client_metadata"]),
        ({"input": "x", "include": ["reasoning.encrypted_content"]}, ["include"]),
        ({"input": "x", "frobnicate": 1}, ["frobnicate"]),
        ({"input": [{"type": "web_search_call", "id": "ws_1", "status": "completed"}]}, ["input[].web_search_call"]),
        (
            {"input": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}]},
            ["input[].reasoning"],
        ),
    ],
)
def test_fields_without_a_chat_equivalent_are_dropped_and_named(body: dict[str, Any], dropped: list[str]) -> None:
    """What Codex sends by default is never a 400 (issue 29): left out and named."""
    names: list[str] = []
    to_chat_request(parse_request({"model": "small", **body}), (), names)
    assert sorted(set(names)) == dropped


def test_a_custom_tool_call_in_the_history_is_a_tool_call_and_its_output() -> None:
    body = {
        "input": [
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
        ]
    }
    messages = to_chat_request(parse_request({"model": "small", **body}))["messages"]
    assert messages[0]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": '{"input":"*** Begin Patch"}',
    }
    assert messages[1] == {"role": "tool", "tool_call_id": "c1", "content": "Done"}


@pytest.mark.parametrize(
    "body, param, words",
    [
        ({}, "input", "Missing required parameter"),
        ({"input": 5}, "input", "Invalid 'input'"),
        ({"input": "x", "temperature": 3}, "temperature", "less than or equal to 2"),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id", "Field required"),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role", "Invalid"),
        ({"model": "bad model", "input": "x"}, "model", "Invalid 'model'"),
    ],
)
def test_malformed_requests_name_the_parameter(body: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        to_chat_request(parse_request({"model": "small", **body}))
    assert err.value.param == param and words in err.value.message
