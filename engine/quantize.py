"""INT8 weights, offline: a Hugging Face checkpoint in, a compressed-tensors checkpoint out.

Two steps, as in gpt-fast: `quantize_symmetric` turns one weight matrix into int8 values and
float32 scales (pure tensor math, tested on its own), and `quantize_checkpoint` walks a
checkpoint's safetensors files, quantizes every linear layer's weight and writes the result
with the `quantization_config` vLLM reads natively (`quant_method: compressed-tensors`).

Schemes written (both symmetric, both with the zero point fixed at 0, so no zero point is
stored and none can overflow):

- `w8a8` (default): int8 weights with one scale per output channel, activations quantized
  dynamically per token at run time (format `int-quantized`; vLLM's
  `CompressedTensorsW8A8Int8`, which has a CPU kernel too). The `weight` tensor is int8
  `[out, in]`, `weight_scale` float32 `[out, 1]`.
- `w8a16`: int8 weights (per channel, or per group of `group_size` input columns), bf16/fp16
  activations (format `pack-quantized`: four int8 values, offset to 0..255, packed little-end
  first into each int32; vLLM's `CompressedTensorsWNA16`). Tensors `weight_packed` int32
  `[out, in / 4]`, `weight_scale` `[out, groups]`, `weight_shape` int64 `[2]`.

Invariants of the quantizer (tested in tests/engine/test_quantize.py): values are rounded,
then clipped to [-127, 127] and only then cast to int8 (so nothing wraps around); a group
whose values are all zero gets scale 1 and all-zero codes (no division by zero); each value
round-trips within half a scale step; a group of equal values round-trips exactly (up to
float rounding).

Only torch and safetensors are imported: no vLLM, so this runs where vLLM is not installed.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

QMAX = 127  # symmetric: -127..127, so negating a code never overflows int8
Scheme = Literal["w8a8", "w8a16"]
# Linear layers of Llama-style decoders (and most others). Embeddings, norms and the output head
# stay in the source precision: they are small, and the head is sensitive.
LINEAR_SUFFIXES = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
    "qkv_proj",
    "gate_up_proj",
    "fc1",
    "fc2",
    "dense",
    "query_key_value",
    "dense_h_to_4h",
    "dense_4h_to_h",
    "c_attn",
    "c_proj",
    "c_fc",
)


@dataclass(frozen=True, slots=True)
class QuantizedWeight:
    codes: torch.Tensor  # int8, same shape as the weight
    scales: torch.Tensor  # float32, [out, groups]: one per output channel and group of inputs


def quantize_with_scale(weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """int8 codes of `weight` at a given scale (broadcast): round, clip, then cast."""
    scaled = weight.to(torch.float32) / scale
    return torch.clamp(torch.round(scaled), -QMAX, QMAX).to(torch.int8)


def quantize_symmetric(weight: torch.Tensor, group_size: int | None = None) -> QuantizedWeight:
    """Per-output-channel (group_size None) or per-group symmetric int8 quantization of [out, in]."""
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D weight, got shape {tuple(weight.shape)}")
    out_features, in_features = weight.shape
    size = in_features if group_size is None else group_size
    if in_features % size:
        raise ValueError(f"input size {in_features} is not a multiple of group size {size}")
    groups = weight.to(torch.float32).reshape(out_features, in_features // size, size)
    absmax = groups.abs().amax(dim=-1, keepdim=True)
    # An all-zero group has no range: any positive scale gives all-zero codes; 1 keeps it finite.
    scale = torch.where(absmax > 0, absmax / QMAX, torch.ones_like(absmax))
    codes = quantize_with_scale(groups, scale).reshape(out_features, in_features)
    return QuantizedWeight(codes, scale.reshape(out_features, in_features // size))


def dequantize(q: QuantizedWeight) -> torch.Tensor:
    out_features, in_features = q.codes.shape
    groups = q.scales.shape[1]
    codes = q.codes.to(torch.float32).reshape(out_features, groups, in_features // groups)
    return (codes * q.scales.unsqueeze(-1)).reshape(out_features, in_features)


def pack_int8_to_int32(codes: torch.Tensor) -> torch.Tensor:
    """compressed-tensors' pack-quantized layout for 8 bits: offset to unsigned 0..255, then four
    values per int32 along the input dimension, the first in the lowest byte."""
    out_features, in_features = codes.shape
    if in_features % 4:
        raise ValueError("input size must be a multiple of 4 to pack int8 into int32")
    unsigned = (codes.to(torch.int64) + 128).reshape(out_features, in_features // 4, 4)
    shifts = torch.tensor([0, 8, 16, 24], dtype=torch.int64)
    packed = (unsigned << shifts).sum(dim=-1)
    # Reinterpret the unsigned 32-bit value as a signed int32 (two's complement).
    packed = torch.where(packed >= 2**31, packed - 2**32, packed)
    return packed.to(torch.int32)


def unpack_int32_to_int8(packed: torch.Tensor) -> torch.Tensor:
    wide = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.tensor([0, 8, 16, 24], dtype=torch.int64)
    unsigned = (wide.unsqueeze(-1) >> shifts) & 0xFF
    return (unsigned - 128).reshape(packed.shape[0], -1).to(torch.int8)


def _args(strategy: str, group_size: int | None, dynamic: bool, observer: str | None) -> dict:
    return {
        "num_bits": 8,
        "type": "int",
        "symmetric": True,
        "strategy": strategy,
        "group_size": group_size,
        "dynamic": dynamic,
        "actorder": None,
        "block_structure": None,
        "observer": observer,
        "observer_kwargs": {},
    }


def quantization_config(scheme: Scheme, group_size: int | None = None) -> dict:
    """The `quantization_config` block of config.json for a scheme, as llm-compressor writes it."""
    if scheme == "w8a8":
        group = {
            "targets": ["Linear"],
            "weights": _args("channel", None, False, "minmax"),
            "input_activations": _args("token", None, True, None),
            "output_activations": None,
        }
        fmt = "int-quantized"
    else:
        strategy = "channel" if group_size is None else "group"
        group = {
            "targets": ["Linear"],
            "weights": _args(strategy, group_size, False, "minmax"),
            "input_activations": None,
            "output_activations": None,
        }
        fmt = "pack-quantized"
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "quantization_status": "compressed",
        "config_groups": {"group_0": group},
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "global_compression_ratio": None,
    }


def is_quantizable(name: str, tensor: torch.Tensor) -> bool:
    if not name.endswith(".weight") or tensor.dim() != 2 or not tensor.is_floating_point():
        return False
    module = name[: -len(".weight")].rsplit(".", 1)[-1]
    return module in LINEAR_SUFFIXES


def quantize_tensors(
    tensors: dict[str, torch.Tensor], scheme: Scheme, group_size: int | None = None
) -> dict[str, torch.Tensor]:
    """One safetensors file's tensors, with each linear weight replaced by its quantized form."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        if not is_quantizable(name, tensor):
            out[name] = tensor.contiguous()
            continue
        prefix = name[: -len(".weight")]
        q = quantize_symmetric(tensor, None if scheme == "w8a8" else group_size)
        if scheme == "w8a8":
            out[prefix + ".weight"] = q.codes.contiguous()
            out[prefix + ".weight_scale"] = q.scales.contiguous()  # [out, 1]
        else:
            out[prefix + ".weight_packed"] = pack_int8_to_int32(q.codes).contiguous()
            out[prefix + ".weight_scale"] = q.scales.to(tensor.dtype).contiguous()
            out[prefix + ".weight_shape"] = torch.tensor(list(tensor.shape), dtype=torch.int64)
    return out


@dataclass(frozen=True, slots=True)
class QuantizeReport:
    quantized_layers: int
    source_bytes: int
    output_bytes: int


def quantize_checkpoint(src: Path, dst: Path, scheme: Scheme = "w8a8", group_size: int | None = None) -> QuantizeReport:
    """Write an INT8 copy of the Hugging Face checkpoint directory `src` into `dst`."""
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    files = sorted(src.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors files in {src}")
    if scheme == "w8a8" and group_size is not None:
        raise ValueError("w8a8 uses one scale per output channel: group_size applies to w8a16 only")
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():  # tokenizer, generation config, chat template ...
        if (
            item.is_file()
            and item.suffix != ".safetensors"
            and item.name not in ("config.json", "model.safetensors.index.json")
        ):
            shutil.copy2(item, dst / item.name)
    weight_map: dict[str, str] = {}
    layers = 0
    for path in files:
        tensors = quantize_tensors(load_file(path), scheme, group_size)
        layers += sum(1 for name in tensors if name.endswith(".weight_scale"))
        save_file(tensors, dst / path.name, metadata={"format": "pt"})
        weight_map.update({name: path.name for name in tensors})
    if (src / "model.safetensors.index.json").exists():
        index = {"metadata": {}, "weight_map": weight_map}
        (dst / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = quantization_config(scheme, group_size)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return QuantizeReport(
        layers, sum(f.stat().st_size for f in files), sum(f.stat().st_size for f in dst.glob("*.safetensors"))
    )
