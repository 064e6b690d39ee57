"""A Chat Completions answer, whole or as stream chunks, read into typed values.

One shape serves both: a whole answer fills `choices[0].message`, a chunk `choices[0].delta`.
Only the first choice is read (neither translated API has `n`); unknown fields are ignored,
so vendor extras (vLLM's `reasoning_content`, litellm's `provider_specific_fields`) pass.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.core.errors import UnreadableAnswer
from policies.pricing import Usage


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PromptTokensDetails(_Read):
    cached_tokens: int | None = None


class CompletionTokensDetails(_Read):
    reasoning_tokens: int | None = None


class ChatUsage(_Read):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None
    completion_tokens_details: CompletionTokensDetails | None = None

    @classmethod
    def of(cls, usage: Usage) -> ChatUsage:
        """The usage costgate charged (counted when the upstream sent none), for a stream's end."""
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens),
            completion_tokens_details=CompletionTokensDetails(reasoning_tokens=usage.reasoning_tokens),
        )

    @property
    def cached_tokens(self) -> int:
        details = self.prompt_tokens_details
        return (details.cached_tokens or 0) if details else 0

    @property
    def reasoning_tokens(self) -> int:
        details = self.completion_tokens_details
        return (details.reasoning_tokens or 0) if details else 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class FunctionCall(_Read):
    name: str | None = None  # a stream sends it once, on a call's first delta
    arguments: str | None = None


class ToolCall(_Read):
    index: int = 0  # a stream's key for the call; a whole answer lists calls in order instead
    id: str | None = None
    function: FunctionCall = FunctionCall()


class Message(_Read):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None


class Choice(_Read):
    message: Message = Message()
    delta: Message = Message()
    finish_reason: str | None = None
    # vLLM (the bundled engine) names the stop string that ended the answer here.
    stop_reason: str | int | None = None


class ChatCompletion(_Read):
    """A whole answer or one stream chunk."""

    id: str = ""
    model: str = ""
    choices: list[Choice] = []
    usage: ChatUsage | None = None
    service_tier: str | None = None

    @property
    def choice(self) -> Choice | None:
        return self.choices[0] if self.choices else None


def function_tool(
    name: str, parameters: dict[str, Any] | None, description: str | None = None, strict: bool | None = None
) -> dict[str, Any]:
    """A Chat Completions function tool; unset settings are left out, not sent as null."""
    function: dict[str, Any] = {"name": name}
    for key, value in (("description", description), ("parameters", parameters), ("strict", strict)):
        if value is not None:
            function[key] = value
    return {"type": "function", "function": function}


def stands_for(
    native: dict[str, Any], content: str | None, calls: list[dict[str, Any]], finish: str, usage: Usage | None
) -> dict[str, Any]:
    """The Chat Completions answer a natively served answer stands for (its id and model, the
    text, the tool calls, the finish and the usage): what the response cache keeps, to replay in
    any API."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": native.get("id", ""),
        "object": "chat.completion",
        "model": native.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": None
        if usage is None
        else {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
    }


def read_chat(data: Any) -> ChatCompletion:
    """An upstream's chat answer or chunk; a malformed one is the upstream's fault (502)."""
    try:
        return ChatCompletion.model_validate(data)
    except ValidationError as err:
        raise UnreadableAnswer(f"upstream sent a malformed chat answer: {err.errors()[0]['msg']}") from None
