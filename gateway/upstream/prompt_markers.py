"""Prompt caching placed by the gateway (issue 26): the body a deployment is sent, with the marks
its provider's prompt cache needs, where the client set none.

- Anthropic (`style: anthropic`): `cache_control` breakpoints at the end of the stable prefix
  (tools and system) and at the end of the conversation so far (policies/prompt_cache.py
  decides where), on a native Messages body and on a Chat Completions body litellm translates
  for an Anthropic model (it carries `cache_control` on tools, content parts and tool messages).
- OpenAI (`style: openai`): a `prompt_cache_key` from the team and the stable prefix, unless the
  client set one: OpenAI caches prefixes by itself and routes by that key.

The client's body is never changed in place, and a breakpoint it set is never moved. When teams
do not share provider cache entries (the default), a body that carries any breakpoint starts its
system prompt with the team's scope text, so another team's identical prompt is another prefix.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlparse

import orjson

from gateway.config.models_config import ModelConfig, PromptCacheConfig
from gateway.config.settings import TeamConfig
from gateway.core.context import Principal
from policies.prompt_cache import Block, Section, breakpoints, cache_key, min_cacheable_tokens, scope_salt

Style = Literal["anthropic", "openai", "none"]
SHARED_SCOPE = "shared"


def _tokens(value: Any) -> int:
    """A quick count (4 bytes a token): where a breakpoint pays is a threshold, not a bill."""
    return max(1, len(orjson.dumps(value)) // 4)


def detect_style(config: ModelConfig) -> Style:
    if config.prompt_cache.style is not None:
        return config.prompt_cache.style
    model = config.upstream_model.lower()
    if "messages" in config.apis or (config.provider == "litellm" and ("anthropic" in model or "claude" in model)):
        return "anthropic"
    if config.provider == "openai" and urlparse(config.api_base or "").hostname == "api.openai.com":
        return "openai"
    return "none"


def _auto() -> PromptCacheConfig:
    """The defaults: breakpoints placed, with a 5-minute TTL."""
    return PromptCacheConfig(mode="auto", ttl="5m")


def _resolved(own: PromptCacheConfig, fallback: PromptCacheConfig) -> PromptCacheConfig:
    """`own`'s mode and TTL where it sets them, else `fallback`'s."""
    return PromptCacheConfig(mode=own.mode or fallback.mode, ttl=own.ttl or fallback.ttl)


@dataclass(frozen=True, slots=True)
class CachePlan:
    """What one deployment does for a team's request. Each team's setting (its own over the
    model's, over the defaults) is resolved once, when the deployment is built."""

    style: Style = "none"
    default: PromptCacheConfig = field(default_factory=_auto)  # the model's setting, for a team that sets none
    teams: Mapping[str, PromptCacheConfig] = field(default_factory=dict)  # by team name or id
    shared: bool = False
    min_tokens: int = 1024
    chat_markers: bool = False  # a chat body reaches Anthropic through litellm, which carries the marks

    @classmethod
    def of(cls, config: ModelConfig, teams: Mapping[str, TeamConfig], shared: bool) -> CachePlan:
        default = _resolved(config.prompt_cache, _auto())
        own = {name: _resolved(team.prompt_cache, default) for name, team in teams.items()}
        minimum = config.prompt_cache.min_tokens or min_cacheable_tokens(config.upstream_model)
        return cls(detect_style(config), default, own, shared, minimum, config.provider == "litellm")

    def setting(self, principal: Principal | None) -> PromptCacheConfig:
        if principal is None:
            return self.default
        return self.teams.get(principal.team_name or "") or self.teams.get(principal.team_id) or self.default

    def scope(self, principal: Principal | None) -> str | None:
        return None if self.shared or principal is None else principal.team_id

    def chat(self, body: dict[str, Any], principal: Principal | None) -> dict[str, Any]:
        """A Chat Completions body as this deployment is to be sent it."""
        if self.style == "none":
            return body
        setting = self.setting(principal)
        if setting.mode == "off":
            return body
        if self.style == "openai":
            return _with_key(body, self.scope(principal), _chat_prefix(body))
        if not self.chat_markers:
            return body
        return _ChatMarks(body, self.min_tokens).placed(setting, self.scope(principal))

    def messages(self, body: dict[str, Any], principal: Principal | None) -> dict[str, Any]:
        """A native Messages body as this deployment is to be sent it."""
        if self.style != "anthropic":
            return body
        setting = self.setting(principal)
        if setting.mode == "off":
            return body
        return _MessagesMarks(body, self.min_tokens).placed(setting, self.scope(principal))

    def responses(self, body: dict[str, Any], principal: Principal | None) -> dict[str, Any]:
        """A native Responses body: OpenAI's key (its cache needs no breakpoints)."""
        if self.style != "openai" or self.setting(principal).mode == "off":
            return body
        prefix = orjson.dumps([body.get("instructions"), body.get("tools")])
        return _with_key(body, self.scope(principal), prefix)


def _with_key(body: dict[str, Any], scope: str | None, prefix: bytes) -> dict[str, Any]:
    if body.get("prompt_cache_key") is not None:
        return body
    return dict(body, prompt_cache_key=cache_key(scope or SHARED_SCOPE, prefix))


def _chat_prefix(body: dict[str, Any]) -> bytes:
    messages = body.get("messages") or []
    system = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer"):
            break
        system.append(m.get("content"))
    return orjson.dumps([body.get("tools"), system])


def _marker(setting: PromptCacheConfig, earlier_client_ttls: list[str]) -> dict[str, Any]:
    """Anthropic wants longer TTLs before shorter ones: after a client's 5-minute breakpoint, 5m."""
    ttl = "5m" if "5m" in earlier_client_ttls else setting.ttl or "5m"
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}


def _client_ttl(item: Any) -> str | None:
    mark = item.get("cache_control") if isinstance(item, dict) else None
    return (mark.get("ttl") or "5m") if isinstance(mark, dict) else None


def _copied(holder: Any, key: str | int) -> Any:
    """`holder[key]` replaced by a shallow copy of itself, and returned: a mark changes copies of
    the containers on its path, never the client's, without copying the whole body."""
    holder[key] = copy.copy(holder[key])
    return holder[key]


class _Marks:
    """Blocks of a body in cache order, where each is, and how to mark one."""

    def __init__(self, body: dict[str, Any], min_tokens: int) -> None:
        self.body, self.min_tokens = body, min_tokens
        self.blocks: list[Block] = []
        self.ttls: list[str | None] = []  # the client's marker's TTL per block, None: unmarked
        self.read()

    def add(self, section: Section, item: Any) -> None:
        ttl = _client_ttl(item)
        self.blocks.append(Block(section, _tokens(item), ttl is not None))
        self.ttls.append(ttl)

    def read(self) -> None:
        raise NotImplementedError

    def mark(self, body: dict[str, Any], index: int, marker: dict[str, Any]) -> None:
        raise NotImplementedError

    def salt(self, body: dict[str, Any], text: str) -> None:
        raise NotImplementedError

    def placed(self, setting: PromptCacheConfig, scope: str | None) -> dict[str, Any]:
        """The body with the chosen breakpoints; salted with `scope` (a team) when it has any."""
        chosen = breakpoints(self.blocks, self.min_tokens)
        if not chosen and not any(b.marked for b in self.blocks):
            return self.body
        body = dict(self.body)  # the client's body stays as it came: `mark` copies what it changes
        for index in chosen:
            self.mark(body, index, _marker(setting, [t for t in self.ttls[:index] if t]))
        if scope is not None:
            self.salt(body, scope_salt(scope))
        return body


class _MessagesMarks(_Marks):
    """Anthropic's own body: tools, system (a string or text blocks), messages' content blocks."""

    def read(self) -> None:
        self.where: list[tuple[str, int, int]] = []  # (section, item, block within it)
        for i, tool in enumerate(self.body.get("tools") or ()):
            self.add(Section.TOOLS, tool)
            self.where.append(("tools", i, 0))
        system = self.body.get("system")
        for k, block in enumerate([system] if isinstance(system, str) else system or ()):
            self.add(Section.SYSTEM, block)
            self.where.append(("system", 0, k))
        for i, message in enumerate(self.body.get("messages") or ()):
            content = message.get("content") if isinstance(message, dict) else None
            for k, block in enumerate([content] if isinstance(content, str) else content or ()):
                self.add(Section.MESSAGES, block)
                self.where.append(("messages", i, k))

    def mark(self, body: dict[str, Any], index: int, marker: dict[str, Any]) -> None:
        section, i, k = self.where[index]
        if section == "tools":
            _copied(_copied(body, "tools"), i)["cache_control"] = marker
            return
        holder = body if section == "system" else _copied(_copied(body, "messages"), i)
        name = "system" if section == "system" else "content"
        if isinstance(holder[name], str):
            holder[name] = [{"type": "text", "text": holder[name]}]
        _copied(_copied(holder, name), k)["cache_control"] = marker

    def salt(self, body: dict[str, Any], text: str) -> None:
        system = body.get("system")
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system or ())
        body["system"] = [{"type": "text", "text": text}, *blocks]


class _ChatMarks(_Marks):
    """A Chat Completions body for litellm's Anthropic models: tools, the leading system
    messages (each part a block), then one block a message."""

    def read(self) -> None:
        self.where: list[tuple[str, int]] = []
        for i, tool in enumerate(self.body.get("tools") or ()):
            self.add(Section.TOOLS, tool)
            self.where.append(("tools", i))
        leading = True
        for i, message in enumerate(self.body.get("messages") or ()):
            if not isinstance(message, dict):
                continue
            leading = leading and message.get("role") in ("system", "developer")
            content = message.get("content")
            parts = content if isinstance(content, list) else []
            marked = next((p for p in [message, *parts] if _client_ttl(p)), message)  # any marker counts
            self.add(Section.SYSTEM if leading else Section.MESSAGES, marked)
            self.where.append(("messages", i))

    def mark(self, body: dict[str, Any], index: int, marker: dict[str, Any]) -> None:
        section, i = self.where[index]
        if section == "tools":
            _copied(_copied(body, "tools"), i)["cache_control"] = marker
            return
        message = _copied(_copied(body, "messages"), i)
        content = message.get("content")
        if message.get("role") == "tool" or not content:  # litellm reads a tool result's marker here
            message["cache_control"] = marker
        elif isinstance(content, str):
            message["content"] = [{"type": "text", "text": content, "cache_control": marker}]
        else:
            _copied(_copied(message, "content"), -1)["cache_control"] = marker

    def salt(self, body: dict[str, Any], text: str) -> None:
        body["messages"] = [{"role": "system", "content": text}, *body.get("messages", [])]
