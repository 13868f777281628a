"""Inline SVG charts written by collbench itself: log-log line charts and band charts.

The report must open offline in any browser, so it carries no plotting library: these few shapes
(axes with decade or power-of-two ticks, polylines, error bars, dashed model curves, vertical markers,
coloured bands) are all it draws. Every mark has a ``<title>`` so hovering shows its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from collbench.units import size_label

PALETTE = (
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
)
"""Colours per algorithm, in a fixed order (matplotlib's tab10, readable on white)."""


def color_map(names: Sequence[str]) -> dict[str, str]:
    """A colour per name, stable for a sorted list of names."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


LABEL_CHAR_PX = 6.0
"""A generous width per character of the 10-11 px labels, to keep a label inside the drawing."""


def _num_label(value: float) -> str:
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:g}"
    return f"{value:.0e}"


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    lo: float
    """Bottom of the spread bar (same unit as y)."""
    hi: float
    tip: str
    """Hover text."""
    noisy: bool = False
    """Drawn with a red ring: the measurement flagged this point as noisy."""


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    color: str
    points: tuple[Point, ...]
    curve: tuple[tuple[float, float], ...] = ()
    """The fitted model, drawn dashed."""


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical line across the plot (a crossover), labelled at the top."""

    x: float
    label: str


class _LogScale:
    def __init__(self, lo: float, hi: float, start: float, stop: float) -> None:
        lo = max(lo, 1e-12)
        hi = max(hi, lo * 1.0001)
        # A little margin so that end points are not on the frame.
        pad = (math.log(hi) - math.log(lo)) * 0.04 or 0.5
        self.a, self.b = math.log(lo) - pad, math.log(hi) + pad
        self.start, self.stop = start, stop

    def __call__(self, value: float) -> float:
        v = math.log(max(value, 1e-12))
        return self.start + (v - self.a) / (self.b - self.a) * (self.stop - self.start)

    def ticks(self, base: int) -> list[float]:
        lo, hi = math.exp(self.a), math.exp(self.b)
        first, last = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
        exps = list(range(first, last + 1))
        if base == 10 and len(exps) < 2:
            # Less than a decade: 1-2-5 steps, so the axis still has numbers on it.
            out = []
            for e in range(first - 1, last + 1):
                out += [m * 10.0**e for m in (1, 2, 5) if lo <= m * 10.0**e <= hi]
            return out if len(out) >= 2 else _even_ticks(lo, hi)
        step = max(1, math.ceil(len(exps) / 8))
        return [float(base) ** e for e in exps[::step]]


def _even_ticks(lo: float, hi: float) -> list[float]:
    """Evenly spaced round values inside [lo, hi], at least two: a chart of times from 180 to 260 us had
    one number on its axis (200), too few to read a point's value from."""
    span = hi - lo
    for exponent in range(math.floor(math.log10(span)), math.floor(math.log10(span)) - 3, -1):
        for mantissa in (5, 2, 1):
            step = mantissa * 10.0**exponent
            ticks = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
            if len(ticks) >= 3:
                return ticks
    return [lo, hi]


def log_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    markers: Sequence[Marker] = (),
    width: int = 560,
    height: int = 360,
    legend_note: str = "",
) -> str:
    """A log-log chart: per series its measured points (with spread bars) joined by a line, and its
    dashed model curve; markers as labelled vertical lines; a legend below, ending with
    ``legend_note`` (what the points and bars are). Sizes on x (powers of 2)."""
    left, right, top, bottom = 64, width - 12, 40, height - 84
    xs = [p.x for s in series for p in s.points] + [x for s in series for x, _ in s.curve]
    ys = [v for s in series for p in s.points for v in (p.lo, p.hi, p.y) if v > 0]
    ys += [y for s in series for _, y in s.curve if y > 0]
    # A log axis has no place for size 0: rows of only 0-byte calls (nccl-tests -b 0 -e 0) ended in min()'s
    # ValueError; such a chart is empty, as one of no rows is.
    sizes = [x for x in xs if x > 0]
    if not sizes or not ys:
        return _empty(title, width, height)
    sx = _LogScale(min(sizes), max(sizes), left, right)
    sy = _LogScale(min(ys), max(ys), bottom, top)
    # Room below for every legend line and the note, so that neither is cut at the drawing's edge.
    legend, legend_end = _legend(series, left, bottom + 46, right, legend_note)
    height = max(height, legend_end + 8)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" class="title">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" class="frame"/>',
    ]
    for t in sx.ticks(2):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" class="tick">{size_label(t)}</text>')
    for t in sy.ticks(10):
        y = sy(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_num_label(t)}</text>')
    out.append(f'<text x="{(left + right) / 2:.0f}" y="{bottom + 30}" text-anchor="middle" class="axis">')
    out.append(f"{escape(x_label)}</text>")
    out.append(
        f'<text x="14" y="{(top + bottom) / 2:.0f}" text-anchor="middle" class="axis" '
        f'transform="rotate(-90 14 {(top + bottom) / 2:.0f})">{escape(y_label)}</text>'
    )
    for i, m in enumerate(markers):
        x = sx(m.x)
        if left <= x <= right:
            out.append(
                f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" class="marker">'
                f"<title>{escape(m.label)}</title></line>"
            )
            # Crossovers are often close together: stagger their labels down the plot. A label that
            # would run past the frame's right edge is written leftwards from its line instead.
            y = top + 11 + 12 * (i % 4)
            if x + 3 + LABEL_CHAR_PX * len(m.label) > right:
                out.append(
                    f'<text x="{x - 3:.1f}" y="{y}" text-anchor="end" class="marker-label">{escape(m.label)}</text>'
                )
            else:
                out.append(f'<text x="{x + 3:.1f}" y="{y}" class="marker-label">{escape(m.label)}</text>')
    for s in series:
        out.extend(_series(s, sx, sy))
    out.extend(legend)
    out.append("</svg>")
    return "\n".join(out)


def _series(s: Series, sx: _LogScale, sy: _LogScale) -> list[str]:
    out = []
    if s.curve:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s.curve if x > 0 and y > 0)
        out.append(f'<polyline points="{path}" class="model" stroke="{s.color}"><title>{escape(s.name)} model</title>')
        out.append("</polyline>")
    pts = sorted((p for p in s.points if p.x > 0 and p.y > 0), key=lambda p: p.x)
    if len(pts) > 1:
        path = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in pts)
        out.append(f'<polyline points="{path}" class="measured" stroke="{s.color}"/>')
    for p in pts:
        x, y = sx(p.x), sy(p.y)
        if p.lo > 0 and p.hi > 0:
            out.append(f'<line x1="{x:.1f}" y1="{sy(p.lo):.1f}" x2="{x:.1f}" y2="{sy(p.hi):.1f}" class="spread" ')
            out.append(f'stroke="{s.color}"/>')
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{s.color}"><title>{escape(p.tip)}</title></circle>')
        if p.noisy:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6.5" class="noisy"><title>{escape(p.tip)}</title>')
            out.append("</circle>")
    return out


def _legend(series: Sequence[Series], left: int, y: int, right: int, note: str = "") -> tuple[list[str], int]:
    """The legend's marks, wrapped to the plot's width, and the baseline of its last line."""
    out, x = [], float(left)
    for s in series:
        w = 26 + 7 * len(s.name)
        if x + w > right and x > left:
            x, y = float(left), y + 16
        out.append(f'<rect x="{x:.0f}" y="{y - 8}" width="14" height="8" fill="{s.color}"/>')
        out.append(f'<text x="{x + 18:.0f}" y="{y}" class="legend">{escape(s.name)}</text>')
        x += w
    if note:
        y += 16
        out.append(f'<text x="{left}" y="{y}" class="legend-note">{escape(note)}</text>')
    return out, y


def _empty(title: str, width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height // 3}" '
        f'viewBox="0 0 {width} {height // 3}"><text x="10" y="20" class="title">{escape(title)}: no points</text></svg>'
    )


@dataclass(frozen=True, slots=True)
class Band:
    """One range of sizes (``stop`` None: unbounded) and what runs there."""

    start: float
    stop: float | None
    label: str
    color: str
    tip: str
    hatched: bool = False
    """Predicted rather than measured: drawn hatched."""


def band_chart(bands: Sequence[Band], *, lo: float, hi: float, title: str, width: int = 760) -> str:
    """Coloured bands over a log2 size axis from ``lo`` to ``hi`` bytes, each labelled where it fits."""
    height, left, right, top, bottom = 78, 10, width - 10, 22, 52
    sx = _LogScale(max(lo, 1.0), max(hi, 2.0), left, right)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="bands" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/>'
        "</pattern></defs>",
        f'<text x="{left}" y="14" class="title-small">{escape(title)}</text>',
    ]
    for b in bands:
        x0 = max(sx(max(b.start, 1.0)), left)
        x1 = right if b.stop is None else min(sx(b.stop + 1), right)
        if x1 <= x0:
            continue
        out.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{bottom - top}" fill="{b.color}" '
            f'class="band"><title>{escape(b.tip)}</title></rect>'
        )
        if b.hatched:
            out.append(
                f'<rect x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{bottom - top}" fill="url(#hatch)"/>'
            )
        if x1 - x0 > 7 * len(b.label) + 6:
            out.append(
                f'<text x="{(x0 + x1) / 2:.1f}" y="{(top + bottom) / 2 + 4:.1f}" text-anchor="middle" '
                f'class="band-label">{escape(b.label)}</text>'
            )
    for t in sx.ticks(2):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" class="axis-line"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle" class="tick">{size_label(t)}</text>')
    out.append("</svg>")
    return "\n".join(out)
