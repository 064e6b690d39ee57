"""The INT8 quantizer's numerics: pure tensor math, no vLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from engine.quantize import (  # noqa: E402
    QMAX,
    dequantize,
    pack_int8_to_int32,
    quantization_config,
    quantize_checkpoint,
    quantize_symmetric,
    quantize_with_scale,
    unpack_int32_to_int8,
)


@pytest.mark.parametrize("group_size", [None, 8, 32])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_round_trip_is_within_half_a_step_per_group(group_size: int | None, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(16, 64, generator=gen) * torch.logspace(-3, 1, 16).unsqueeze(1)).to(dtype)
    q = quantize_symmetric(weight, group_size)
    groups = 1 if group_size is None else 64 // group_size
    assert q.codes.dtype == torch.int8 and q.scales.shape == (16, groups)
    error = (dequantize(q) - weight.float()).abs().reshape(16, groups, -1)
    step = q.scales.unsqueeze(-1)
    assert torch.all(error <= step / 2 * (1 + 1e-5))
    # The largest value of each group maps to +-127: the full range is used.
    assert torch.all(q.codes.reshape(16, groups, -1).abs().amax(-1) == QMAX)


def test_per_group_scales_follow_each_group() -> None:
    weight = torch.cat([torch.full((2, 4), 0.01), torch.full((2, 4), 100.0)], dim=1)
    q = quantize_symmetric(weight, group_size=4)
    assert torch.allclose(q.scales, torch.tensor([[0.01 / 127, 100 / 127]] * 2))
    assert torch.allclose(dequantize(q), weight, rtol=1e-6)


@pytest.mark.parametrize("value", [0.5, -3.25, 1e-6, 7.0])
def test_a_group_of_equal_values_round_trips_exactly(value: float) -> None:
    weight = torch.full((3, 16), value)
    q = quantize_symmetric(weight, group_size=8)
    assert torch.all(q.codes == (QMAX if value > 0 else -QMAX))
    assert torch.allclose(dequantize(q), weight, rtol=1e-6, atol=0)


def test_an_all_zero_group_gets_a_finite_scale_and_zero_codes() -> None:
    weight = torch.zeros(4, 16)
    weight[0, 8:] = 2.0  # one group with values, the rest all zero
    q = quantize_symmetric(weight, group_size=8)
    assert torch.all(torch.isfinite(q.scales)) and torch.all(q.scales > 0)
    assert torch.all(q.codes[1:] == 0) and torch.all(q.codes[0, :8] == 0)
    assert torch.equal(dequantize(q), weight)


@pytest.mark.parametrize(
    ("value", "scale", "code"),
    [
        (1000.0, 1.0, 127),  # far outside the range: clipped, not wrapped around to a negative code
        (-1000.0, 1.0, -127),
        (128.0, 1.0, 127),  # just outside: an int8 cast before clipping would give -128
        (-128.4, 1.0, -127),  # symmetric range: -128 is never used
        (126.6, 1.0, 127),  # rounds to nearest
        (0.49, 1.0, 0),
    ],
)
def test_values_are_clipped_before_the_cast(value: float, scale: float, code: int) -> None:
    assert quantize_with_scale(torch.tensor([value]), torch.tensor(scale)).item() == code


def test_rejects_shapes_it_cannot_group() -> None:
    with pytest.raises(ValueError):
        quantize_symmetric(torch.ones(4, 10), group_size=4)
    with pytest.raises(ValueError):
        quantize_symmetric(torch.ones(4))


@pytest.mark.slow  # takes seconds in process: out of the fast lane
def test_packing_round_trips_and_matches_compressed_tensors() -> None:
    codes = torch.randint(-127, 128, (6, 32), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    packed = pack_int8_to_int32(codes)
    assert packed.dtype == torch.int32 and packed.shape == (6, 8)
    assert torch.equal(unpack_int32_to_int8(packed), codes)
    helpers = pytest.importorskip("compressed_tensors.compressors.pack_quantized.helpers")
    assert torch.equal(packed, helpers.pack_to_int32(codes, 8))


def test_the_config_names_the_scheme_vllm_expects() -> None:
    w8a8 = quantization_config("w8a8")
    group = w8a8["config_groups"]["group_0"]
    assert w8a8["format"] == "int-quantized" and w8a8["quant_method"] == "compressed-tensors"
    assert group["weights"]["strategy"] == "channel" and not group["weights"]["dynamic"]
    assert group["input_activations"]["strategy"] == "token" and group["input_activations"]["dynamic"]
    w8a16 = quantization_config("w8a16", 32)
    assert w8a16["format"] == "pack-quantized"
    assert w8a16["config_groups"]["group_0"]["weights"]["group_size"] == 32


def test_quantize_checkpoint_writes_int8_linears_and_keeps_the_rest(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    tensors = {
        "model.layers.0.self_attn.q_proj.weight": torch.randn(8, 16, dtype=torch.bfloat16),
        "model.layers.0.input_layernorm.weight": torch.ones(16, dtype=torch.bfloat16),
        "model.embed_tokens.weight": torch.randn(32, 16, dtype=torch.bfloat16),
    }
    save_file(tensors, src / "model.safetensors")
    (src / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (src / "tokenizer.json").write_text("{}")
    report = quantize_checkpoint(src, dst)
    out = load_file(dst / "model.safetensors")
    assert report.quantized_layers == 1
    assert out["model.layers.0.self_attn.q_proj.weight"].dtype == torch.int8
    assert out["model.layers.0.self_attn.q_proj.weight_scale"].shape == (8, 1)
    assert torch.equal(out["model.embed_tokens.weight"], tensors["model.embed_tokens.weight"])
    assert json.loads((dst / "config.json").read_text())["quantization_config"]["format"] == "int-quantized"
    assert (dst / "tokenizer.json").exists()
