"""The allow-list of request fields (gateway/core/request_fields.py): OpenAI's fields per endpoint,
a model's listed extras, and config validation that refuses any extra able to steer a call."""

from __future__ import annotations

import pytest
from openai.types import completion_create_params, embedding_create_params
from openai.types.chat import completion_create_params as chat_create_params
from pydantic import ValidationError

from gateway.config.models_config import ModelConfig
from gateway.core.context import Endpoint
from gateway.core.request_fields import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    EMBEDDING_FIELDS,
    LITELLM_READS,
    OPENAI_FIELDS,
    PRICED_APART,
    VLLM_SAMPLING,
    FieldPolicy,
    dropped_header,
    for_provider,
    refusal,
    without_billed_tools,
)
from gateway.providers.base import UpstreamCall
from gateway.providers.litellm import LiteLLMProvider
from tests.litellm_kwargs import hostile_value, litellm_kwargs

# litellm keyword arguments that config validation lets a model list in `extra_params`, each
# reviewed by hand: none names a host, a key, a model list or a callback (they shape prompts,
# name litellm's call types, or tune its price multipliers). A litellm release that adds a
# name config validation does not refuse fails test_extras_never_name_what_steers_a_call
# until it is reviewed here.
REVIEWED_HARMLESS = frozenset(
    {
        "acompletion",
        "acreate_batch",
        "acreate_fine_tuning_job",
        "aembedding",
        "aimg_generation",
        "amoderation",
        "arerank",
        "aresponses",
        "aspeech",
        "assistant_continue_message",
        "atext_completion",
        "atranscription",
        "batch_failed_requests",
        "batch_successful_requests",
        "batch_usage",
        "bos_token",
        "call_type",
        "combined_usage_object",
        "completion_start_time",
        "contents",
        "custom_prompt_dict",
        "daily_reset_time",
        "disable_add_transform_inline_image_block",
        "document",
        "enable_json_schema_validation",
        "ensure_alternating_roles",
        "eos_token",
        "exception",
        "fedramp_uplift_multiplier",
        "final_prompt_value",
        "initial_prompt_value",
        "merge_reasoning_content_in_choices",
        "query",
        "regional_processing_uplift_multiplier_eu",
        "regional_processing_uplift_multiplier_us",
        "roles",
        "stream_chunk_size",
        "supports_system_message",
        "system",
        "text_completion",
        "thinking",
        "top_k",
        "top_n_tokens",
        "user_continue_message",
    }
)


def keys(typed_dict: type) -> frozenset[str]:
    return frozenset(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def test_the_allow_lists_are_exactly_openais_request_fields() -> None:
    """Pinned in the module, checked against the installed official SDK's request types."""
    assert CHAT_FIELDS == keys(chat_create_params.CompletionCreateParamsNonStreaming)
    assert COMPLETION_FIELDS == keys(completion_create_params.CompletionCreateParamsNonStreaming)
    assert EMBEDDING_FIELDS == keys(embedding_create_params.EmbeddingCreateParams)
    assert PRICED_APART <= CHAT_FIELDS


def test_litellm_reads_of_openai_fields_are_pinned() -> None:
    """The OpenAI fields litellm declares as its own are exactly those never passed to it."""
    from litellm.types.utils import all_litellm_params

    assert set().union(*OPENAI_FIELDS.values()) & set(all_litellm_params) == LITELLM_READS


def test_split_keeps_openai_fields_and_names_the_rest() -> None:
    body = {
        "model": "m",
        "messages": [],
        "temperature": 0,
        "api_base": "http://x",
        "fallbacks": [],
        "service_tier": "priority",
        "top_k": 5,
    }
    kept, dropped = FieldPolicy().split("chat.completions", body)
    assert kept == {"model": "m", "messages": [], "temperature": 0}
    assert dropped == ("api_base", "fallbacks", "service_tier", "top_k")
    kept, dropped = FieldPolicy(extra=frozenset({"top_k", "service_tier"}), drop=frozenset({"temperature"})).split(
        "chat.completions", body
    )
    assert kept == {"model": "m", "messages": [], "service_tier": "priority", "top_k": 5}
    assert dropped == ("api_base", "fallbacks", "temperature")
    assert FieldPolicy().split("embeddings", {"model": "m", "input": "x", "n": 2}) == (
        {"model": "m", "input": "x"},
        ("n",),
    )


@pytest.mark.parametrize(
    ("provider", "extra", "drop", "takes", "lacks"),
    [
        ("openai", None, [], {"seed", "metadata"}, {"top_k", "service_tier"}),
        ("local", None, [], VLLM_SAMPLING, {"chat_template", "kv_transfer_params"}),
        ("local", ["top_k"], [], {"top_k"}, {"min_p"}),
        ("litellm", None, ["seed", "logprobs"], {"temperature"}, {"seed", "logprobs", "metadata"}),
    ],
)
def test_provider_defaults(
    provider: str, extra: list[str] | None, drop: list[str], takes: set[str], lacks: set[str]
) -> None:
    allowed = for_provider(provider, extra, drop).allowed("chat.completions")
    assert takes <= allowed and not (lacks & allowed)


def test_every_default_vllm_extra_passes_config_validation() -> None:
    assert [name for name in VLLM_SAMPLING if refusal(name)] == []


def test_extras_never_name_what_steers_a_call() -> None:
    """Every keyword argument litellm reads is refused as an extra, unless it is an OpenAI field
    or was reviewed as harmless above."""
    # the endpoints litellm serves (a native Responses or Messages body goes to an HTTP upstream only)
    openai_fields = set().union(*(OPENAI_FIELDS[e] for e in ("chat.completions", "completions", "embeddings")))
    let_through = {n for n in litellm_kwargs() if refusal(n) is None and n not in openai_fields}
    assert let_through == REVIEWED_HARMLESS
    for name in (
        "api_base",
        "base_url",
        "api_key",
        "fallbacks",
        "model_list",
        "callbacks",
        "success_callback",
        "langfuse_host",
        "s3_endpoint_url",
        "extra_headers",
        "mock_response",
        "client",
        "kv_transfer_params",
        "chat_template",
        "logits_processors",
        "API_BASE",
        "apiBase",
        "api-base",
        "x" * 65,
    ):
        assert refusal(name) is not None, name


def test_model_config_refuses_dangerous_extras_and_needed_drops() -> None:
    assert ModelConfig(name="m", extra_params=["top_k", "service_tier"]).extra_params == ["top_k", "service_tier"]
    for bad in (["fallbacks"], ["api_base"], ["success_callback"], ["model_list"], ["custom_llm_provider"]):
        with pytest.raises(ValidationError, match="extra_params may not list"):
            ModelConfig(name="m", extra_params=bad)
    assert ModelConfig(name="m", drop_params=["seed", "n", "stream_options"]).drop_params == [
        "seed",
        "n",
        "stream_options",
    ]
    for bad in (["messages"], ["model"], ["Seed!"]):
        with pytest.raises(ValidationError, match="drop_params may not list"):
            ModelConfig(name="m", drop_params=bad)


def test_dropped_header_is_encoded_and_bounded() -> None:
    assert dropped_header(["b", "a", "a"]) == "a,b"
    assert dropped_header(["caf\u00e9", "x\r\ny"]) == "caf%C3%A9,x%0D%0Ay"
    many = dropped_header(f"f{i:03d}" for i in range(120))
    assert many.endswith(",+70 more") and many.count(",") == 50


@pytest.mark.parametrize("endpoint", list(Endpoint))
def test_litellm_gets_no_keyword_argument_a_client_chose(endpoint: Endpoint) -> None:
    """Whatever path built the body, the provider passes litellm only allowed fields, plus where
    to connect and with what key from the config."""
    provider = LiteLLMProvider(
        "m", "openai/x", "sk-config", "http://config.example/v1", fields=for_provider("litellm", None, [])
    )
    body = {name: hostile_value(name, "http://attacker.example/v1") for name in litellm_kwargs()}
    kwargs = provider.kwargs_for(UpstreamCall(endpoint, body))
    client_chosen = set(kwargs) - {"model", "api_key", "api_base", "timeout", "num_retries"}
    assert client_chosen <= OPENAI_FIELDS[endpoint.value] - PRICED_APART - LITELLM_READS
    assert (kwargs["model"], kwargs["api_key"], kwargs["api_base"], kwargs["num_retries"]) == (
        "openai/x",
        "sk-config",
        "http://config.example/v1",
        0,
    )


def test_a_native_apis_body_goes_through_its_own_allow_list() -> None:
    from gateway.core.request_fields import FieldPolicy

    body = {
        "model": "m",
        "input": "hi",
        "store": True,
        "service_tier": "priority",
        "api_base": "http://evil",
        "stream_options": {"include_obfuscation": False},
    }
    sent, dropped = FieldPolicy().split("responses", body)
    assert sent == {"model": "m", "input": "hi", "store": True}
    assert dropped == ("api_base", "service_tier", "stream_options")
    sent, dropped = FieldPolicy().split("messages", {"model": "m", "messages": [], "max_tokens": 5, "fallbacks": []})
    assert sent == {"model": "m", "messages": [], "max_tokens": 5} and dropped == ("fallbacks",)


def test_an_http_native_upstream_judges_the_body_itself() -> None:
    """Issue 29: an upstream that serves the client's API over HTTP gets every field the client
    sent (its newest ones included), but what is priced apart, unless the config lists it, and
    what the config drops. No field can move the call: the host and key are the config's."""
    from gateway.core.request_fields import FieldPolicy

    body = {
        "model": "m",
        "messages": [],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": []},
        "future_field": 1,
        "speed": "fast",
        "inference_geo": "us",
        "service_tier": "auto",
        "metadata": {"user_id": "u"},
    }
    sent, dropped = FieldPolicy().native(body)
    assert set(sent) == {"model", "messages", "thinking", "context_management", "future_field", "metadata"}
    assert dropped == ("inference_geo", "service_tier", "speed")
    sent, dropped = FieldPolicy(extra=frozenset({"speed"}), drop=frozenset({"metadata"})).native(body)
    assert "speed" in sent and "metadata" not in sent and dropped == ("inference_geo", "metadata", "service_tier")


FN = {"type": "function", "name": "exec_command", "parameters": {}}
CLAUDE_FN = {"name": "Bash", "input_schema": {"type": "object"}}


@pytest.mark.parametrize(
    "api, tools, choice, kept, choice_kept, dropped",
    [
        # Codex's defaults: the function tools go, web search is left out; `auto` stays
        ("responses", [FN, {"type": "web_search"}], "auto", [FN], True, ["tools[].web_search"]),
        (
            "responses",
            [{"type": "web_search_preview_2025_03_11"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}, FN],
            None,
            [FN],
            False,
            ["tools[].file_search", "tools[].web_search_preview_2025_03_11"],
        ),
        # a choice that forces a tool left out would be refused upstream
        ("responses", [FN, {"type": "code_interpreter"}], {"type": "code_interpreter"}, [FN], False,
         ["tool_choice", "tools[].code_interpreter"]),
        ("responses", [FN, {"type": "image_generation"}],
         {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "image_generation"}]}, [FN], False,
         ["tool_choice", "tools[].image_generation"]),
        ("responses", [FN, {"type": "web_search"}], {"type": "function", "name": "exec_command"}, [FN], True,
         ["tools[].web_search"]),
        # nothing left to choose from: tools and tool_choice both go
        ("responses", [{"type": "web_search"}], "required", None, False, ["tool_choice", "tools[].web_search"]),
        # tools that cost only their tokens go through
        ("responses", [FN, {"type": "custom", "name": "apply_patch"}, {"type": "tool_search"}, {"type": "local_shell"}],
         "auto", [FN, {"type": "custom", "name": "apply_patch"}, {"type": "tool_search"}, {"type": "local_shell"}],
         True, []),
        # Anthropic: web search and code execution are billed per use; web fetch, memory and the client tools are not
        ("messages", [CLAUDE_FN, {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}], None,
         [CLAUDE_FN], False, ["tools[].web_search_20250305"]),
        ("messages", [CLAUDE_FN, {"type": "code_execution_20250825", "name": "code_execution"}],
         {"type": "tool", "name": "code_execution"}, [CLAUDE_FN], False,
         ["tool_choice", "tools[].code_execution_20250825"]),
        ("messages", [CLAUDE_FN, {"type": "web_search_20250305", "name": "web_search"}],
         {"type": "tool", "name": "Bash"}, [CLAUDE_FN], True, ["tools[].web_search_20250305"]),
        ("messages", [CLAUDE_FN, {"type": "web_fetch_20250910", "name": "web_fetch"}, {"type": "memory_20250818",
          "name": "memory"}, {"type": "bash_20250124", "name": "bash"}], {"type": "any"},
         [CLAUDE_FN, {"type": "web_fetch_20250910", "name": "web_fetch"}, {"type": "memory_20250818", "name": "memory"},
          {"type": "bash_20250124", "name": "bash"}], True, []),
    ],
)  # fmt: skip
def test_tools_a_provider_bills_per_use_are_left_out_of_a_native_call(
    api: str, tools: list, choice: object, kept: list | None, choice_kept: bool, dropped: list[str]
) -> None:
    """Provider-run tools billed per use (a web search, a code container) are priced apart from the
    tokens: the ledger could not count them nor a hold bound them, so a native call leaves them out."""
    body = {"model": "m", "input": "hi", "tools": tools} | ({"tool_choice": choice} if choice is not None else {})
    sent, names = without_billed_tools(api, body)
    assert sent.get("tools") == kept and list(names) == dropped
    assert ("tool_choice" in sent) == choice_kept and (not choice_kept or sent["tool_choice"] == choice)
    assert sent["input"] == "hi" and body["tools"] == tools  # the client's body is not changed


def test_a_body_without_tools_is_sent_as_it_came() -> None:
    body = {"model": "m", "messages": [], "tool_choice": {"type": "auto"}}
    assert without_billed_tools("messages", body) == (body, ())
    assert without_billed_tools("messages", body | {"tools": "not a list"}) == (body | {"tools": "not a list"}, ())
