"""Charts drawn on the server as inline SVG: no JavaScript library, no CDN, nothing to vendor.

Pure functions from numbers to markup. Every label that reaches the markup is escaped here,
because team and model names are user-chosen strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from html import escape

PALETTE = ("#2563eb", "#db2777", "#16a34a", "#ea580c", "#7c3aed", "#0891b2", "#ca8a04", "#64748b")
OTHER = "other"


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: tuple[Decimal, ...]  # one per x label


def nice_ceiling(value: Decimal) -> Decimal:
    """The smallest 1, 2 or 5 times a power of ten that is >= value (axis maximum)."""
    if value <= 0:
        return Decimal(1)
    exponent = value.adjusted()
    for _ in range(2):
        for step in (1, 2, 5):
            candidate = Decimal(step).scaleb(exponent)
            if candidate >= value:
                return candidate
        exponent += 1
    return Decimal(10).scaleb(exponent)


def fraction(used: Decimal, limit: Decimal) -> float:
    """used / limit clamped to [0, 1] for drawing; a zero limit counts as full when anything is used."""
    if limit <= 0:
        return 1.0 if used > 0 else 0.0
    return float(min(max(used / limit, Decimal(0)), Decimal(1)))


def top_series(series: Sequence[Series], keep: int) -> list[Series]:
    """The `keep` largest series by total; the rest summed into one named 'other'."""
    ranked = sorted(series, key=lambda s: sum(s.values, Decimal(0)), reverse=True)
    if len(ranked) <= keep:
        return ranked
    rest = ranked[keep:]
    width = len(rest[0].values)
    summed = tuple(sum((s.values[i] for s in rest), Decimal(0)) for i in range(width))
    return [*ranked[:keep], Series(OTHER, summed)]


AXIS_CHAR_PX = 7  # an axis label's character at its 11 px font, rounded up (digits, "$" and ",")


def _money(value: Decimal) -> str:
    """Dollars for a label: whole dollars when large, cents, else every digit that matters
    (axis ticks are quarters of a 1-2-5 ceiling, so they terminate)."""
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 1:
        return f"${value:,.2f}"
    if not value:
        return "$0"
    return "$" + format(value.quantize(Decimal(1).scaleb(value.adjusted() - 2)).normalize(), "f")


def stacked_bars(
    labels: Sequence[str], series: Sequence[Series], *, title: str, width: int = 720, height: int = 240
) -> str:
    """A stacked column chart (one column per label, one colour per series) with a legend."""
    totals = [sum((s.values[i] for s in series), Decimal(0)) for i in range(len(labels))]
    top = nice_ceiling(max(totals, default=Decimal(0)))
    ticks = [_money(top * tick / 4) for tick in range(5)]
    # Room for the widest tick label ("$5,000,000" was cut to "5,000,000" in a fixed 64 px).
    pad_left = max(64, 10 + AXIS_CHAR_PX * max(len(t) for t in ticks))
    pad_bottom, pad_top, legend_h = 28, 12, 20 * ((len(series) + 3) // 4)
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" viewBox="0 0 {width} '
        f'{height + legend_h}" width="{width}" height="{height + legend_h}"><title>{escape(title)}</title>'
    ]
    for tick in range(5):
        y = pad_top + plot_h - plot_h * tick / 4
        parts.append(
            f'<line x1="{pad_left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{pad_left - 6}" y="{y + 4:.1f}" class="axis" text-anchor="end">'
            f"{escape(ticks[tick])}</text>"
        )
    slot = plot_w / max(len(labels), 1)
    bar_w = max(slot * 0.75, 1.0)
    label_every = max(1, len(labels) // 10)
    for i, label in enumerate(labels):
        x = pad_left + slot * i + (slot - bar_w) / 2
        base = float(pad_top + plot_h)
        for k, s in enumerate(series):
            h = plot_h * float(s.values[i] / top) if top else 0.0
            if h > 0:
                base -= h
                parts.append(
                    f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                    f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(s.name)} {escape(label)}: '
                    f"{escape(_money(s.values[i]))}</title></rect>"
                )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{height - 10}" class="axis" text-anchor="middle">'
                f"{escape(label[5:] if len(label) == 10 else label)}</text>"
            )
    for k, s in enumerate(series):
        lx, ly = pad_left + (k % 4) * (plot_w / 4), height + 14 + 20 * (k // 4)
        parts.append(
            f'<rect x="{lx:.1f}" y="{ly - 10}" width="12" height="12" fill="{PALETTE[k % len(PALETTE)]}"/>'
            f'<text x="{lx + 16:.1f}" y="{ly}" class="legend">{escape(s.name[:28])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def meter(parts: Sequence[tuple[str, Decimal, str]], limit: Decimal, *, width: int = 360) -> str:
    """A horizontal budget bar: segments (label, amount, css class) laid end to end against a limit."""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="meter" viewBox="0 0 {width} 16" width="{width}" '
        f'height="16" role="img"><rect x="0" y="0" width="{width}" height="16" rx="3" class="meter-bg"/>'
    ]
    x, used = 0.0, Decimal(0)
    for label, amount, css in parts:
        used += amount
        end = width * fraction(used, limit)
        if end > x:
            out.append(
                f'<rect x="{x:.1f}" y="0" width="{end - x:.1f}" height="16" class="{escape(css)}">'
                f"<title>{escape(label)}: {escape(_money(amount))}</title></rect>"
            )
            x = end
    out.append("</svg>")
    return "".join(out)


def curve_lines(
    points: Sequence[tuple[float, Sequence[float | None]]], names: Sequence[str], *, width: int = 480, height: int = 160
) -> str:
    """Lines over a shared x axis (e.g. a cascade's learning curve: cost and quality, as shares
    from 0 to 1.2, over the first requests). `points` are (x, one y per name; None: no point)."""
    if not points:
        return ""
    pad, top = 36, 1.2
    x_max = max(x for x, _ in points) or 1.0

    def at(x: float, y: float) -> str:
        px = pad + (width - pad - 8) * x / x_max
        py = height - 18 - (height - 26) * min(max(y, 0.0), top) / top
        return f"{px:.1f},{py:.1f}"

    parts = [
        f'<svg class="chart curve" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(", ".join(names))} over {int(x_max)} requests">'
    ]
    for tick in (0.0, 0.5, 1.0):
        y = at(0, tick).split(",")[1]
        parts.append(f'<line x1="{pad}" x2="{width - 8}" y1="{y}" y2="{y}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="2" y="{y}" font-size="10">{tick:.0%}</text>')
    for i, name in enumerate(names):
        line = " ".join(at(x, ys[i]) for x, ys in points if ys[i] is not None)  # type: ignore[arg-type]
        colour = PALETTE[i % len(PALETTE)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{line}"/>')
        parts.append(
            f'<text x="{pad + 4 + 120 * i}" y="{height - 2}" font-size="10" fill="{colour}">{escape(name)}</text>'
        )
    parts.append(f'<text x="{width - 60}" y="{height - 2}" font-size="10">{int(x_max)} requests</text></svg>')
    return "".join(parts)
