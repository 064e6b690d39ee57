"""A GGUF file's metadata (the key/value header), read without the `gguf` package's reader.

`gguf.GGUFReader` turns every value into numpy views, tokenizer arrays of ~50,000 strings
included: 10 s for SmolLM2-135M's header on a busy two-core machine, at every gateway start.
This reads the header once, front to back, keeping scalars and strings and skipping arrays.
Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (little-endian, version 2+).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

MAGIC = b"GGUF"
STRING, ARRAY = 8, 9
# value type -> struct format of a scalar (GGUF's gguf_type enum)
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

Scalar = int | float | bool | str


def read_metadata(path: Path) -> dict[str, Scalar]:
    """The header's scalar and string values by key (arrays are skipped)."""
    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise ValueError(f"{path} is not a GGUF file")
        version, _tensors, count = struct.unpack("<IQQ", f.read(20))
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        values: dict[str, Scalar] = {}
        for _ in range(count):
            key = _string(f)
            kind = _unpack(f, "<I")
            if kind == ARRAY:
                _skip_array(f)
            else:
                values[key] = _value(f, kind)
        return values


def _unpack(f: BinaryIO, fmt: str) -> int:
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    return f.read(_unpack(f, "<Q")).decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Scalar:
    if kind == STRING:
        return _string(f)
    if kind not in SCALARS:
        raise ValueError(f"unknown GGUF value type {kind}")
    return struct.unpack(SCALARS[kind], f.read(struct.calcsize(SCALARS[kind])))[0]


def _skip_array(f: BinaryIO) -> None:
    kind, count = struct.unpack("<IQ", f.read(12))
    if kind == STRING:
        for _ in range(count):
            f.seek(_unpack(f, "<Q"), 1)
    elif kind == ARRAY:
        for _ in range(count):
            _skip_array(f)
    elif kind in SCALARS:
        f.seek(count * struct.calcsize(SCALARS[kind]), 1)
    else:
        raise ValueError(f"unknown GGUF array type {kind}")
