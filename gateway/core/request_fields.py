"""Which fields of a client's body go upstream: an allow-list per endpoint, never a block-list.

A client's body asks a model for an answer; it never tells the gateway where to connect or
with what. litellm takes the host, the key, fallback models, model lists and callbacks as
keyword arguments, the same way it takes `temperature` (hundreds of names: issue 16 found
`fallbacks` with an `api_base` and `"api_key": null` sending the provider key to a host of the
client's choosing). No block-list of such names can be complete, so only these go upstream,
for every provider:

- the fields OpenAI's API reference defines for the endpoint (openai-python's
  `chat/completion_create_params`, `completion_create_params`, `embedding_create_params`; for
  litellm's Messages passthrough, the Messages fields it knows), except those that buy something
  a model's token price does not cover (`PRICED_APART`);
- vendor fields a model's config lists (`extra_params`: vLLM's `top_k`, say); config
  validation refuses any name that could choose a host, a key, models or a callback;
- minus fields the model's config says its provider lacks (`drop_params`), and, for litellm,
  the OpenAI fields litellm reads as its own (`LITELLM_READS`).

Whatever else a client sends is dropped, and the answer names it in the header
`x-costgate-dropped-params`. One exception (issue 29): an upstream that serves the client's
Responses or Messages API over HTTP is sent the client's body as it came (`FieldPolicy.native`),
less what is priced apart: there a body field is JSON to the provider's own API and cannot
choose the host or the key, and the provider, not a table here, judges the newest fields the
coding agents send. What names hosts or credentials there (`mcp_servers`, `mcp` tools) is
refused by gateway/apis before any call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

DROPPED_HEADER = "x-costgate-dropped-params"
MAX_NAMED = 50  # dropped names listed in the header; more are counted, not named

CHAT_FIELDS = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "moderation",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
COMPLETION_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "best_of",
        "echo",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_tokens",
        "n",
        "presence_penalty",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "suffix",
        "temperature",
        "top_p",
        "user",
    }
)
EMBEDDING_FIELDS = frozenset({"model", "input", "dimensions", "encoding_format", "user"})
# The native APIs' fields (gateway/apis: openai-python's `response_create_params`, anthropic's
# `message_create_params`) that a litellm passthrough is sent: litellm takes body fields as
# keyword arguments, so they stay allow-listed there. An upstream that serves the API over HTTP
# judges the client's body itself (`FieldPolicy.native`): only what names hosts or credentials
# is refused (gateway/apis' parsers) and what is priced apart is dropped.
RESPONSES_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_tool_calls",
        "text",
        "reasoning",
        "max_output_tokens",
        "temperature",
        "top_p",
        "user",
        "metadata",
        "store",
        "stream",
        "truncation",
        "include",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "service_tier",
    }
)
MESSAGES_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "stream",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "output_format",
        "context_management",
        "cache_control",
        "service_tier",
    }
)
# Keyed by `gateway.core.context.Endpoint`'s values (config validates model settings against them).
OPENAI_FIELDS: Mapping[str, frozenset[str]] = {
    "chat.completions": CHAT_FIELDS,
    "completions": COMPLETION_FIELDS,
    "embeddings": EMBEDDING_FIELDS,
    "responses": RESPONSES_FIELDS,
    "messages": MESSAGES_FIELDS,
}
# OpenAI fields that buy what a model's token price does not cover — another service tier, web
# searches, audio tokens, a moderation pass, longer prompt-cache retention — so a budget could
# not bound them: forwarded only to models whose config lists them in `extra_params`.
PRICED_APART = frozenset(
    {"audio", "modalities", "moderation", "prompt_cache_options", "service_tier", "web_search_options"}
)
# Native-API fields that buy what the token price does not cover (Anthropic's fast mode and
# regional inference cost a multiple of it; a service tier another rate): forwarded only to
# models whose config lists them in `extra_params`, as PRICED_APART.
NATIVE_PRICED_APART = frozenset({"speed", "inference_geo", "service_tier", "prompt_cache_options", "background"})
# Tools a provider runs itself and bills per use, apart from the tokens: on OpenAI's Responses
# API web search, file search, the code interpreter and image generation; on Anthropic's Messages
# API web search and code execution. No usage the gateway prices counts those uses and no hold
# bounds how often a model makes them, so a native call leaves these tools out and names them
# (`without_billed_tools`), as PRICED_APART fields are left out and as the translated APIs leave
# every provider-run tool out. Matched on the tool's type, its date suffix included
# (`web_search_preview_2025_03_11`, `web_search_20250305`); Anthropic's web fetch, tool search
# and memory, and the client-run tools, cost only their tokens and go through.
BILLED_TOOLS: Mapping[str, tuple[str, ...]] = {
    "responses": ("web_search", "file_search", "code_interpreter", "image_generation"),
    "messages": ("web_search_", "code_execution_"),
}
# OpenAI fields that litellm also reads as its own keyword arguments (`metadata` feeds its
# logging callbacks): never passed to a litellm model.
LITELLM_READS = frozenset({"metadata"})
# vLLM's documented sampling parameters (its OpenAI server's "extra parameters"); the bundled
# `local` engine takes them unless its config lists others. Not chat templates, logits
# processors, KV-transfer parameters (which name hosts) or beam search (which it cannot meter).
VLLM_SAMPLING = frozenset(
    {
        "top_k",
        "min_p",
        "repetition_penalty",
        "length_penalty",
        "stop_token_ids",
        "include_stop_str_in_output",
        "ignore_eos",
        "min_tokens",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "truncate_prompt_tokens",
        "allowed_token_ids",
        "bad_words",
        "structured_outputs",
    }
)
# Fields the gateway itself sets or relies on: a config may neither add nor drop them.
MANAGED = frozenset({"model", "messages", "prompt", "input", "stream", "stream_options"})

FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# Words in a field's name that may choose where a call goes, with what credentials, to which
# models, or what runs around it (litellm's own keyword arguments are made of these words).
FORBIDDEN_WORDS = frozenset(
    """
    api base url urls uri host hostname endpoint endpoints server servers proxy proxies port region residency
    domain address addr site bucket path dir file files s3 gcs aws azure vertex bedrock gcp cloud ssl tls verify
    dns discovery kubernetes network
    key keys secret secrets password passwd credential credentials auth oauth access bearer jwt identity signing
    cert account tenant project organization org workspace issuer federation exchange scope audience
    model models engine fallback fallbacks deployment deployments router routing route provider providers alias
    group tag tags order weight rpm tpm rpd tpd itpm otpm cooldown parallel hugging replicate together
    callback callbacks hook hooks webhook logger logging handler plugin processor processors template
    integration guardrail guardrails mcp langfuse langsmith arize id variables version label environment
    client session headers header cookie transfer litellm mock cost price pricing budget extra cache caching
    retry retries timeout keepalive async forward drop params config fastest attempted targets vector
    function original search agentic rust ttl response pass through verbose log
""".split()
)


def refusal(name: str) -> str | None:
    """Why a config may not list `name` in a model's `extra_params`; None when it may."""
    if not FIELD_NAME.match(name):
        return "a field name is lower-case letters, digits and underscores"
    if name in MANAGED:
        return "the gateway sets this field itself"
    words = set(name.split("_")) & FORBIDDEN_WORDS
    if words:
        return (
            f"{min(words)!r} may name a host, a key, models or a callback; a client's request must never choose those"
        )
    return None


@dataclass(frozen=True, slots=True)
class FieldPolicy:
    """The fields one deployment takes beyond OpenAI's (`extra`), and those it lacks (`drop`)."""

    extra: frozenset[str] = frozenset()
    drop: frozenset[str] = frozenset()

    def allowed(self, endpoint: str) -> frozenset[str]:
        return ((OPENAI_FIELDS[endpoint] - PRICED_APART) | self.extra) - self.drop

    def split(self, endpoint: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The fields this deployment takes, and the names of those left out (sorted)."""
        allowed = self.allowed(endpoint)
        kept = {k: v for k, v in body.items() if k in allowed}
        dropped = () if len(kept) == len(body) else tuple(sorted(k for k in body if k not in allowed))
        return kept, dropped

    def native(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The client's body for an upstream that serves its API over HTTP (config `apis`): every
        field but those priced apart or the config drops; the upstream judges the rest."""
        left_out = (NATIVE_PRICED_APART - self.extra) | self.drop
        kept = {k: v for k, v in body.items() if k not in left_out}
        return kept, tuple(sorted(k for k in body if k in left_out))

    def upstream(
        self, endpoint: str, body: Mapping[str, Any], model: str, stream: bool
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The body this deployment is sent (under its own model name), and the fields left out."""
        sent, dropped = self.split(endpoint, body)
        sent["model"] = model
        if "stream_options" in sent:
            sent["stream_options"] = stream_options(sent["stream_options"])
        if stream and "stream_options" in self.allowed(endpoint):
            # Always ask for usage, so the stream is charged exactly; the client gets the usage
            # chunk only if it asked for it.
            sent["stream_options"] = {**sent.get("stream_options", {}), "include_usage": True}
        return sent, dropped


def billed_kind(api: str, tool: Any) -> str | None:
    """The BILLED_TOOLS kind of one of `api`'s tools, without its date (`web_search`,
    `code_execution`...); None: the tool costs only its tokens."""
    kind = str(tool.get("type", "")) if isinstance(tool, dict) else ""
    return next((billed.rstrip("_") for billed in BILLED_TOOLS.get(api, ()) if kind.startswith(billed)), None)


def without_billed_tools(
    api: str, body: Mapping[str, Any], priced: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`body` for a native `api` call without the tools its provider bills per use (BILLED_TOOLS)
    but those of a kind the model's config prices (`priced`: gateway/upstream/server_tools.py),
    and the names of those left out (`tools[].<type>`). A `tool_choice` that names a tool left
    out, or that is left with no tool to choose, is left out too: the provider would refuse it."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not BILLED_TOOLS.get(api):
        return dict(body), ()
    kept: list[Any] = []
    out: list[dict[str, Any]] = []
    for tool in tools:
        kind = billed_kind(api, tool)
        (out if kind is not None and kind not in priced else kept).append(tool)
    if not out:
        return dict(body), ()
    sent = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    if kept:
        sent["tools"] = kept
    dropped = {f"tools[].{t['type']}" for t in out}
    if "tool_choice" in body:
        if kept and not _chooses(body["tool_choice"], out):
            sent["tool_choice"] = body["tool_choice"]
        else:
            dropped.add("tool_choice")
    return sent, tuple(sorted(dropped))


def _chooses(choice: Any, tools: list[dict[str, Any]]) -> bool:
    """Does `tool_choice` name one of `tools` (by type, Responses; by name, Messages), or list one
    among its allowed tools (Responses' `allowed_tools`)?"""
    if not isinstance(choice, dict):
        return False
    types = {t.get("type") for t in tools}
    names = {t.get("name") for t in tools if t.get("name")}
    if choice.get("type") == "allowed_tools":
        return any(_chooses(allowed, tools) for allowed in choice.get("tools") or ())
    return choice.get("type") in types or (choice.get("type") == "tool" and choice.get("name") in names)


def stream_options(value: Any) -> dict[str, Any]:
    """OpenAI's stream options, and nothing else a client put in the object."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if k in ("include_usage", "include_obfuscation")}


def for_provider(provider: str, extra: Iterable[str] | None, drop: Iterable[str]) -> FieldPolicy:
    """A deployment's policy from its config (`extra` None: the provider's default extras)."""
    extras = frozenset(VLLM_SAMPLING if extra is None and provider == "local" else extra or ())
    drops = frozenset(drop) | (LITELLM_READS if provider == "litellm" else frozenset())
    return FieldPolicy(extras, drops)


def dropped_header(names: Iterable[str]) -> str:
    """The header's value: the names percent-encoded (a client may send any characters), at
    most MAX_NAMED of them, then how many more."""
    ordered = sorted(set(names))
    shown = ",".join(quote(n, safe="") for n in ordered[:MAX_NAMED])
    more = len(ordered) - MAX_NAMED
    return shown if more <= 0 else f"{shown},+{more} more"
