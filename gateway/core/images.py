"""Image input tokens by OpenAI's tile rule, and image sizes read from a data: URL's header.

OpenAI bills an image in a chat message by its size and `detail` (its vision pricing guide):
`low` costs a fixed base; `high` and `auto` scale the image to fit in 2048 x 2048, then its
shortest side down to 768 px, and cost the base plus a fixed amount per 512 px tile. An image
whose size the gateway does not know (a URL it does not fetch, a format it cannot read) counts
at the most tiles the rule allows: 2 x 4 (768 x 2048).

Models bill different amounts per image; `rule_for` knows the ones whose rule differs from
gpt-4o's and counts the others by gpt-4o's. A flat rule (`per_tile` 0) stands for models that
bill by area with a cap: every image counts at the cap.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass

FIT = 2048  # the square an image is first scaled into
SHORT_SIDE = 768  # then its shortest side is scaled down to this
TILE = 512
MOST_TILES = math.ceil(SHORT_SIDE / TILE) * math.ceil(FIT / TILE)
HEADER_B64 = 43_692  # base64 characters of the first 32 KiB, where a JPEG's size marker usually is


@dataclass(frozen=True, slots=True)
class TileRule:
    base: int
    per_tile: int

    def tokens(self, size: tuple[int, int] | None, detail: str | None) -> int:
        if detail == "low":
            return self.base
        tiles = MOST_TILES if size is None else tile_count(*size)
        return self.base + self.per_tile * tiles


GPT_4O = TileRule(85, 170)
# Model-name prefixes whose images cost otherwise: gpt-4o-mini prices an image like gpt-4o
# at a 33x cheaper token; the patch-billed models (1536 patches at most, times a multiplier)
# and Claude (area / 750, about 1,600 at most) are counted at their cap for every image.
RULES = (
    ("gpt-4o-mini", TileRule(2833, 5667)),
    ("gpt-4.1-mini", TileRule(2489, 0)),
    ("gpt-4.1-nano", TileRule(3779, 0)),
    ("o4-mini", TileRule(2642, 0)),
    ("claude", TileRule(1600, 0)),
)


def rule_for(model: str) -> TileRule:
    name = model.rsplit("/", 1)[-1]
    return next((rule for prefix, rule in RULES if name.startswith(prefix)), GPT_4O)


def tile_count(width: int, height: int) -> int:
    w, h = float(max(width, 1)), float(max(height, 1))
    if max(w, h) > FIT:
        scale = FIT / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > SHORT_SIDE:
        scale = SHORT_SIDE / min(w, h)
        w, h = w * scale, h * scale
    return math.ceil(w / TILE) * math.ceil(h / TILE)


def data_url_size(url: str) -> tuple[int, int] | None:
    """(width, height) of a base64 data: URL's PNG, GIF, WebP or JPEG; None if unknown."""
    if not url.startswith("data:"):
        return None
    _, _, payload = url.partition(";base64,")
    for chars in (HEADER_B64, len(payload)):
        try:
            head = base64.b64decode(payload[: chars - chars % 4])
        except (binascii.Error, ValueError):
            return None
        size = image_size(head)
        if size is not None or chars >= len(payload):
            return size
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    kind = data[12:16]
    if kind == b"VP8X" and len(data) >= 30:
        return (int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1)
    if kind == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if kind == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return (width & 0x3FFF, height & 0x3FFF)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """The frame header (SOFn) of a JPEG: walk the segments from the start."""
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            i += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return (width, height)
        i += 2 + struct.unpack(">H", data[i + 2 : i + 4])[0]
    return None
