"""What a local model says about itself, read from its files before vLLM starts: its own
context length and its chat template (whether it can call tools, and in which format).

The gateway needs both at start, not at the engine's first start: a configured
`max_model_len` above the model's own length is a config error (vLLM would refuse to start and
the client would only see a 503), and a request with `tools` to a model whose template has no
place for them is refused with a 400 that says so, instead of vLLM's advice about its flags.

Sources: a Hugging Face checkpoint directory (`config.json`, `tokenizer_config.json`,
`chat_template.jinja`), or a GGUF file's metadata (`<arch>.context_length`,
`tokenizer.chat_template`; the default model is shipped as one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.gguf_header import read_metadata

# The keys vLLM 0.32 derives a model's length from (vllm/transformers_utils/
# model_arch_config_convertor.py, derive_max_model_len_and_key): the smallest one present wins.
LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# RoPE scalings whose max_position_embeddings is already the scaled length (vllm/config/model.py).
PRESCALED_ROPE = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})
# A tokenizer with no real limit says so with a huge number (transformers' VERY_LARGE_INTEGER).
NO_TOKENIZER_LIMIT = 10**12


@dataclass(frozen=True, slots=True)
class ModelFacts:
    context_length: int | None  # the model's own maximum (prompt + output); None: its files do not say
    chat_template: str | None  # None: no chat template (vLLM would refuse chats)
    source: str  # where the facts came from, for messages

    @property
    def tool_format(self) -> str | None:
        """vLLM's tool-call parser for the template's format, or None when it renders no tools."""
        return tool_format(self.chat_template)


def tool_format(template: str | None) -> str | None:
    """A template that renders the request's `tools` and asks for `<tool_call>` blocks is the
    Hermes format (Qwen 2.5, Hermes 2/3, SmolLM3): vLLM's `hermes` parser reads its answers.
    A template that never mentions `tools` (SmolLM2-135M-Instruct's) drops them: the model
    would answer as if none were given, so no parser can make it call one."""
    if not template or "tools" not in template:
        return None
    return "hermes" if "<tool_call>" in template else None


def context_length(config: dict[str, Any], tokenizer_limit: int | None = None) -> int | None:
    """The model's own length from its config.json, as vLLM derives it."""
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else config
    lengths = [v for k in LENGTH_KEYS if isinstance(v := text.get(k), int) and v > 0]
    if not lengths:
        return None
    length = min(lengths)
    if isinstance(text.get("model_max_length"), int):  # Command-R's key overrides the others in vLLM
        length = text["model_max_length"]
    rope = text.get("rope_scaling") or text.get("rope_parameters")
    if isinstance(rope, dict):
        kind = rope.get("rope_type") or rope.get("type")
        factor = rope.get("factor")
        if kind not in PRESCALED_ROPE and isinstance(factor, (int, float)) and factor > 0:
            length = int(length * factor)
    if tokenizer_limit is not None and 0 < tokenizer_limit < NO_TOKENIZER_LIMIT:
        length = min(length, tokenizer_limit)
    return length


def read_checkpoint(path: Path) -> ModelFacts:
    """Facts of a Hugging Face checkpoint directory (missing files: facts unknown)."""
    config = _json(path / "config.json")
    tokenizer = _json(path / "tokenizer_config.json")
    limit = tokenizer.get("model_max_length")
    template_file = path / "chat_template.jinja"
    template = template_file.read_text() if template_file.is_file() else _template(tokenizer.get("chat_template"))
    return ModelFacts(
        context_length(config, limit if isinstance(limit, int) else None), template, str(path / "config.json")
    )


def read_gguf(path: Path) -> ModelFacts:
    """Facts of a GGUF file's metadata."""
    meta = read_metadata(path)
    length = meta.get(f"{meta.get('general.architecture')}.context_length")
    template = meta.get("tokenizer.chat_template")
    return ModelFacts(
        length if isinstance(length, int) and length > 0 else None,
        template if isinstance(template, str) else None,
        str(path),
    )


def check_max_model_len(configured: int | None, facts: ModelFacts) -> None:
    """A configured length above the model's own is a config error (vLLM refuses to start on it)."""
    own = facts.context_length
    if configured is not None and own is not None and configured > own:
        raise ValueError(
            f"engine.max_model_len {configured} is above the model's own context length {own} "
            f"({facts.source}); leave it unset to use the model's own"
        )


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _template(value: Any) -> str | None:
    """tokenizer_config.json's chat_template: one string, or a list of named ones ("default")."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        chosen = named.get("default") or next(iter(named.values()), None)
        return chosen if isinstance(chosen, str) else None
    return None
