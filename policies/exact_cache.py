"""The exact cache's policy: which requests may be cached, what identifies one, what is kept.

A request is identified by a hash of everything that can change its answer — the team, the
endpoint, the model, the messages and every sampling field — with fields that cannot
(`stream`, `stream_options`, `user`, `metadata`) dropped, and fields set to OpenAI's defaults
treated as absent. Its *namespace* is the same hash without the last user message: the
semantic cache only compares questions asked in one namespace, so an answer never crosses
teams, models, system prompts, earlier turns or sampling settings.

Pure functions; the stores and stages live elsewhere.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

NOT_IN_KEY = frozenset({"stream", "stream_options", "user", "metadata", "model", "messages", "prompt"})
DEFAULTS: dict[str, Any] = {
    "temperature": 1,
    "top_p": 1,
    "n": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logit_bias": {},
    "stop": [],
    "parallel_tool_calls": True,
}


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """What one team's requests may do with the cache (settings, with per-team overrides)."""

    exact: bool = True
    semantic: bool = False
    max_false_hit_rate: float = 0.05  # certified on hand-judged pairs: docs/caching.md
    max_temperature: float = 0.0  # hotter sampling is not cached: a cached sample never varies
    ttl_s: float = 7 * 86400.0
    verifier: str | None = None  # a verifier file of the team's own; None: the gateway's


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """One answer, as much of it as a replay needs (non-streamed or streamed alike)."""

    text: str
    finish_reason: str
    model: str  # the upstream's model name, as its answer reported it
    served_model: str  # the deployment that answered (its price values a later hit)
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class RequestKeys:
    key: str  # the exact request
    namespace: str  # everything but the question
    question: str  # the last user message's text: what the semantic cache compares


def refusal(body: dict[str, Any], policy: CachePolicy) -> str | None:
    """Why this request must not be cached, or None when it may be.

    Only an explicit temperature above the team's limit refuses: a client that asks for one is
    asking for variety, which a cached answer never has. A request that sets none asked for
    nothing in particular (most applications never set it), so it is cached, as in other
    gateways, although the upstream samples it at its default."""
    temperature = body.get("temperature")
    if temperature is not None and float(temperature) > policy.max_temperature:
        return f"temperature {temperature} is above the cache's limit {policy.max_temperature}"
    if (body.get("n") or 1) != 1:
        return "n > 1"
    if body.get("logprobs") or body.get("echo") or body.get("best_of"):
        return "logprobs, echo or best_of asked"
    return None


# Earlier messages (system and developer ones aside) a request may carry and still be answered by
# meaning: past that, the answer depends on a conversation the verifier never compares.
MAX_SEMANTIC_HISTORY = 4


def semantic_refusal(body: dict[str, Any]) -> str | None:
    """Why this request must not be answered (or kept) by meaning, or None when it may be.

    An agent's turn (Claude Code, Codex: issue 29) offers tools and carries a long history. With
    tools the answer may be a tool call that acts on the exact words asked (which file, which
    command), and a similar question is not the same act; with a long history the answer is about
    the conversation, while the semantic cache compares only the last question. Both still use the
    exact cache, whose key is the whole request."""
    if body.get("tools") or body.get("functions"):
        return "tools offered: an answer may be a tool call for these exact words"
    messages = body.get("messages")
    history = (
        [m for m in messages[:-1] if m.get("role") not in ("system", "developer")] if isinstance(messages, list) else []
    )
    if len(history) > MAX_SEMANTIC_HISTORY:
        return f"a history of {len(history)} messages (more than {MAX_SEMANTIC_HISTORY})"
    return None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return None  # images, audio: never compared semantically


def _canonical(body: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in sorted(body.items())
        if k not in NOT_IN_KEY and v is not None and DEFAULTS.get(k, object()) != v
    }


def _hash(*parts: Any) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()


def request_keys(team_id: str, endpoint: str, body: dict[str, Any]) -> RequestKeys:
    settings = _canonical(body)
    context: list[Any]
    if "messages" in body:
        messages = [{k: v for k, v in sorted(m.items()) if v is not None} for m in body["messages"]]
        last = messages[-1]
        question = _text(last.get("content")) if last.get("role") == "user" else None
        context = messages[:-1] if question is not None else messages
    else:
        prompt = body.get("prompt")
        question = prompt if isinstance(prompt, str) else None
        context = [] if question is not None else [prompt]
    namespace = _hash(team_id, endpoint, body.get("model"), settings, context)
    key = _hash(namespace, question if question is not None else "")
    return RequestKeys(key, namespace, question or "")


def answer_of(body: dict[str, Any] | None, served_model: str) -> CachedAnswer | None:
    """The answer to keep from an upstream's non-streamed response; None for anything that
    must not be replayed (tool or function calls, several choices, no text: a model that spent
    its tokens reasoning, as a streamed answer without text is not kept either)."""
    if not body or not isinstance(body.get("choices"), list) or len(body["choices"]) != 1:
        return None
    choice = body["choices"][0]
    message = choice.get("message")
    if isinstance(message, dict):
        if message.get("tool_calls") or message.get("function_call") or message.get("refusal"):
            return None
        text = message.get("content")
    else:
        text = choice.get("text")
    if (
        not isinstance(text, str)
        or not text
        or choice.get("finish_reason") in ("tool_calls", "function_call", "content_filter")
    ):
        return None
    usage = body.get("usage") or {}
    return CachedAnswer(
        text,
        choice.get("finish_reason") or "stop",
        str(body.get("model") or served_model),
        served_model,
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
    )
