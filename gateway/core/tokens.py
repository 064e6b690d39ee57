"""Token counts with tiktoken, from the encoding files litellm ships (never downloaded).

`count_prompt` estimates the prompt tokens a provider reports (what a call is charged when it
reports no usage); `billed_prompt_tokens` bounds what it may bill (what a budget holds): exactly,
with tiktoken, for OpenAI's models; for any other (whose tokenizer costgate does not run) by the
prompt's UTF-8 bytes, which no byte-level tokenizer can exceed (docs/budgets.md).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import orjson
import tiktoken

from gateway.core.images import TileRule, data_url_size, rule_for

# Per-message framing OpenAI adds around each chat message.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3
# OpenAI reads at most 100 PDF pages per request, each as text and as an image: a file part
# counts at that many worst-case page images (its bytes count as text too).
FILE_PAGES = 100
# tiktoken's o200k pattern backtracks over a whole run of whitespace and gives up past a million
# steps (a Rust panic, raised as a BaseException: a run of ~1M tabs, spaces, \x0b or \x0c); its
# BPE also slows with the length of one piece. So no text reaches it longer than SAFE_SPAN
# characters: a longer one is counted in spans, cut where tiktoken's own pieces meet.
SAFE_SPAN = 4096
# The last place in a span where a word ends and whitespace begins ("hello| world"): tiktoken
# never merges across it, so a cut there leaves the count as it was.
LAST_WORD_END = re.compile(r".*\S(?=\s)", re.DOTALL)


def _point_tiktoken_at_litellm() -> None:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        os.environ["TIKTOKEN_CACHE_DIR"] = str(root / "litellm_core_utils" / "tokenizers")


# Upstream model names whose tokenizer is tiktoken's (OpenAI's own models, also through litellm).
OPENAI_MODELS = ("gpt-", "chatgpt-", "o1", "o3", "o4", "text-embedding-", "davinci", "babbage", "ft:gpt-")


def runs_tiktoken(model: str) -> bool:
    """Whether `model` is OpenAI's, so tiktoken counts its tokens exactly."""
    return model.removeprefix("openai/").removeprefix("azure/").startswith(OPENAI_MODELS)


@cache
def encoding_for(model: str) -> tiktoken.Encoding:
    _point_tiktoken_at_litellm()
    name = "o200k_base" if model.startswith(("gpt-4o", "o1", "o3", "o4", "gpt-4.1", "gpt-5")) else "cl100k_base"
    return tiktoken.get_encoding(name)


def spans(text: str) -> Iterator[str]:
    """`text` in spans of at most SAFE_SPAN characters, cut at a word's end where there is one in
    the span's second half; else (one long run of whitespace or of one word) at SAFE_SPAN, which
    costs at most one token more than the count of the whole."""
    start = 0
    while len(text) - start > SAFE_SPAN:
        end = start + SAFE_SPAN
        found = LAST_WORD_END.match(text, start + SAFE_SPAN // 2, end)
        cut = found.end() if found else end
        yield text[start:cut]
        start = cut
    yield text[start:]


def encoded_length(enc: tiktoken.Encoding, text: str) -> int:
    """How many tokens `text` is (special tokens' text counted as ordinary text). Every count in
    costgate goes through here: no text, however hostile, makes tiktoken fail."""
    if len(text) <= SAFE_SPAN:
        return len(enc.encode_ordinary(text))
    return sum(len(enc.encode_ordinary(span)) for span in spans(text))


def count_text(text: str, model: str = "") -> int:
    return encoded_length(encoding_for(model), text)


@lru_cache(maxsize=16_384)
def _count_piece(text: str, model: str) -> int:
    return encoded_length(encoding_for(model), text)


def count_delta(text: str, model: str = "") -> int:
    """`count_text` of a stream delta (a token or a few, mostly the same ones again), memoized:
    the stream meter counts every delta of a metered stream."""
    return _count_piece(text, model) if len(text) <= 32 else count_text(text, model)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: count the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def count_messages(messages: list[dict[str, Any]], model: str = "") -> int:
    enc = encoding_for(model)
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE
        total += encoded_length(enc, _content_text(message.get("content")))
        if message.get("name"):
            total += 1
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            total += encoded_length(enc, str(fn.get("name", "")) + str(fn.get("arguments", "")))
    return total


def count_conversation(chat: dict[str, Any], model: str = "") -> int:
    """The input tokens of a chat body's messages and tools: what the count-tokens endpoints
    (Messages' count_tokens, Responses' input_tokens) answer."""
    tokens = count_messages(chat["messages"], model)
    if chat.get("tools"):
        tokens += count_text(orjson.dumps(chat["tools"]).decode(), model)
    return tokens


def count_prompt(body: dict[str, Any], model: str = "") -> int:
    """Prompt tokens of a chat, completion or embedding request body."""
    if "messages" in body:
        return count_messages(body["messages"], model)
    value = body.get("prompt", body.get("input", ""))
    items = value if isinstance(value, list) else [value]
    enc = encoding_for(model)
    total = 0
    for item in items:
        if isinstance(item, str):
            total += encoded_length(enc, item)
        elif isinstance(item, list):  # already tokens
            total += len(item)
    return total


def billed_prompt_tokens(body: dict[str, Any], model: str = "", exact: bool | None = None) -> int:
    """The most prompt tokens a provider can bill for `body`: every byte of text it is sent, as an
    upstream that counts the whole body would (messages and their framing, every prompt of a list,
    token arrays, tools, functions, response_format schemas, stop words, metadata…), plus each
    image by the tile rule instead of its bytes, and each file part at FILE_PAGES page images.
    `exact`: whether the provider's tokenizer is tiktoken's (unset: whether `model` is OpenAI's);
    if not, the text counts as its UTF-8 bytes."""
    rule = rule_for(model)
    text_body, media = _media_apart(body, rule)
    text = orjson.dumps(text_body)
    # A tokenizer costgate does not run may make a token of every byte (emoji, CJK and long runs
    # bill 1.5-3x a tiktoken count): the JSON's bytes bound it, escapes included.
    exact = runs_tiktoken(model) if exact is None else exact
    tokens = count_text(text.decode(), model) if exact else len(text)
    return tokens + media + TOKENS_PER_REPLY


def _media_apart(body: dict[str, Any], rule: TileRule) -> tuple[dict[str, Any], int]:
    """The body with image URLs blanked (their data is not text to a provider), and the tokens
    its images and files bill."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and isinstance(m.get("content"), list) for m in messages
    ):
        return body, 0
    tokens, stripped, files = 0, [], False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            stripped.append(message)
            continue
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url":
                tokens += _image_tokens(part.get("image_url"), rule)
                parts.append({"type": "image_url"})
                continue
            files = files or kind == "file"
            parts.append(part)
        stripped.append({**message, "content": parts})
    return {**body, "messages": stripped}, tokens + (FILE_PAGES * rule.tokens(None, "high") if files else 0)


def _image_tokens(image: Any, rule: TileRule) -> int:
    url = image.get("url") if isinstance(image, dict) else image
    detail = image.get("detail") if isinstance(image, dict) else None
    size = data_url_size(url) if isinstance(url, str) else None
    return rule.tokens(size, detail if isinstance(detail, str) else None)


def predicted_tokens(body: dict[str, Any], model: str = "") -> int:
    """A chat request's predicted output: what a provider rejects of it is billed as output."""
    prediction = body.get("prediction")
    if not isinstance(prediction, dict) or "content" not in prediction:
        return 0
    content = prediction["content"]
    return count_text(content if isinstance(content, str) else orjson.dumps(content).decode(), model)
