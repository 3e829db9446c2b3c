"""Small SVG line charts, so the ledger and the reproduction scripts need no plotting library."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
]


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    y_label: str,
    x_label: str = "round",
    reference: tuple[str, float] | None = None,
    from_zero: bool = True,
) -> str:
    """One polyline per named series of ``(x, y)`` points (non-finite ones left out), its
    name in the legend; ``reference`` a dashed horizontal line with its label (a budget, a
    baseline). The y axis starts at 0 when ``from_zero``, else at the smallest value (loss
    curves that move by a few percent stay readable)."""
    width, height, left, bottom, top, right = 720, 360, 60, 40, 20, 220
    # A diverged run's NaN or infinite values are left out (its line stops there).
    series = {
        name: [(x, y) for x, y in points if math.isfinite(x) and math.isfinite(y)]
        for name, points in series.items()
    }
    ys = [y for points in series.values() for _, y in points]
    xs = [x for points in series.values() for x, _ in points]
    if reference is not None:
        ys.append(reference[1])
    low = 0.0 if from_zero or not ys else min(ys)
    high = max(ys + [low])
    if high - low < 1e-9:
        high = low + 1e-9
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = max(x1 - x0, 1e-9)

    def px(x: float) -> float:
        return left + (x - x0) / span * (width - left - right)

    def py(y: float) -> float:
        return top + (1 - (y - low) / (high - low)) * (height - top - bottom)

    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif" font-size="11">'
        ),
        # Opaque, so the chart reads on a dark page too.
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{left}" y1="{py(low)}" x2="{width - right}" y2="{py(low)}" stroke="black"/>',
        f'<line x1="{left}" y1="{py(low)}" x2="{left}" y2="{top}" stroke="black"/>',
        f'<text x="{left - 8}" y="{top + 4}" text-anchor="end">{high:.4g}</text>',
        f'<text x="{left - 8}" y="{py(low)}" text-anchor="end">{low:.4g}</text>',
        f'<text x="{left}" y="{height - 12}">{escape(x_label)} {x0:g}</text>',
        (
            f'<text x="{width - right}" y="{height - 12}" text-anchor="end">'
            f"{escape(x_label)} {x1:g}</text>"
        ),
        (
            f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" '
            f'text-anchor="middle">{escape(y_label)}</text>'
        ),
    ]
    if reference is not None:
        label, value = reference
        out.append(
            f'<line x1="{left}" y1="{py(value)}" x2="{width - right}" y2="{py(value)}" '
            'stroke="gray" stroke-dasharray="4 3"/>'
        )
        out.append(f'<text x="{width - right + 4}" y="{py(value) + 4}">{escape(label)}</text>')
    for i, (name, points) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        out.append(
            f'<text x="{width - right + 4}" y="{top + 14 * (i + 1)}" fill="{color}">'
            f"{escape(name)}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
