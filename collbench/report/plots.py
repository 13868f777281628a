"""The report's plots: measured points against fitted models (matplotlib, Agg: no display needed).

Two drawings, one per command that writes a plot:

- ``plot_fits`` (``collbench fit --plot``): per (op, world size) a column of time and busbw against
  size, each point at the time it is fitted at (its rows' fastest consistent p25) and the fitted
  curves per algorithm, with each point's model error below (the figure the fit table summarises).
- ``plot_tune`` (``collbench tune``'s PNG): one panel per op, each row's decision time (its p25 where
  measured, else its p50: what the fits and the choice of algorithm read), bars from the fastest
  iteration to the p50, and the fitted model (dashed) per algorithm on log-log axes; a band along
  the top shows which algorithm each rule picks.

matplotlib is imported inside the functions, so reading or writing a report never loads it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.errors import InputFileError
from collbench.fileio import atomic_output, check_writable
from collbench.models.fit import Fit, point_errors_pct
from collbench.models.fit_points import FitPoint
from collbench.profile.document import Profile
from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.units import size_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOT_SUFFIXES = (".png", ".pdf", ".svg")
"""The plot formats collbench writes (matplotlib picks the format from the suffix)."""


def _fitted_to(fig: Figure, text: str, ax: Axes | None = None) -> str:
    """``text`` broken at word boundaries into lines that each fit the figure's width (or ``ax``'s, for
    an axes title), as the figure's renderer measures them at the title's font size."""
    import matplotlib.pyplot as plt

    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    width = (ax.get_window_extent(renderer).width if ax is not None else fig.bbox.width) * 0.96
    size = plt.rcParams["axes.titlesize" if ax is not None else "figure.titlesize"]
    lines: list[str] = []
    for word in text.split():
        trial = f"{lines[-1]} {word}" if lines else word
        probe = fig.text(0, 0, trial, fontsize=size)
        fits = probe.get_window_extent(renderer).width <= width
        probe.remove()
        if lines and fits:
            lines[-1] = trial
        else:
            lines.append(word)
    return "\n".join(lines)


def _readable_axes(ax: Axes, *, sizes: bool = True, values: bool = True) -> None:
    """Tick labels a reader takes in at a glance: sizes at powers of two as nccl-tests writes them
    (``512B``, ``8K``, ``1M``), times and bandwidths as plain numbers (``300``, ``0.01``). matplotlib's
    own were ``2^9``...``2^21`` on tune's plot, ``10^3`` and ``10^4`` on fit's, and ``3x10^2`` where a
    panel spans less than a decade. Call after the axes' scales are set (setting one resets these)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if sizes:
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=10))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: size_label(x) if x >= 1 else ""))
        ax.xaxis.set_minor_formatter(NullFormatter())
    if values and ax.get_yscale() == "log":
        plain = FuncFormatter(lambda y, _pos: f"{y:g}")
        ax.yaxis.set_major_formatter(plain)
        # Minor ticks are labelled (plainly) only where the panel spans too little for the decades: all
        # of them within a span of 20x, those at 2 and 5 times a power of ten where fewer than two powers
        # of ten are in view (tune's 3-rank plot spanned 170-4,500 us and said one number, 1000).
        low, high = ax.get_ylim()
        narrow = low > 0 and high / low < 20
        decades = 0 if low <= 0 else math.floor(math.log10(high)) - math.ceil(math.log10(low)) + 1
        if narrow:
            ax.yaxis.set_minor_formatter(plain)
        elif low > 0 and decades < 2:
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _pos: f"{y:g}" if _lead_digit(y) in (2, 5) else ""))
        else:
            ax.yaxis.set_minor_formatter(NullFormatter())


def _lead_digit(value: float) -> int:
    """The first significant digit of a positive ``value`` (a log axis's minor tick: 2 for 200 or 0.02)."""
    return round(value / 10 ** math.floor(math.log10(value) + 1e-9))


def check_plot_path(path: Path) -> None:
    """Raise InputFileError now, before any work, for a plot path that could not be written.

    matplotlib fails on an unknown suffix and adds ``.png`` to a name without one, so the suffix
    must be one of :data:`PLOT_SUFFIXES`.
    """
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputFileError(str(path), f"a plot needs a {', '.join(PLOT_SUFFIXES)} name")
    check_writable(path)


def plot_fits(points: Sequence[FitPoint], fits: Sequence[Fit], path: Path) -> Path:
    """Write a PNG: per (op, world size) a column of time and busbw against size (log axes), measured
    points (each at the time it is fitted at, ``FitPoint.time_us``) and fitted curves per algorithm,
    and below each point's model error (``models.fit.point_errors_pct``, the figure whose median and
    worst the fit table shows). Returns ``path``.

    Raises InputFileError when the file cannot be written.
    """
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels: dict[tuple[str, str, int], list[Fit]] = defaultdict(list)
    for f in fits:
        panels[(f.op, f.backend, f.world_size)].append(f)
    keys = sorted(panels)
    if not keys:
        raise InputFileError(str(path), "nothing to plot: no fits")
    # Each column 6.5 inches of axes and room on its right for the legend, beside the time panel.
    fig, axes = plt.subplots(
        3, len(keys), figsize=(9.0 * len(keys), 10), squeeze=False, gridspec_kw={"height_ratios": [3, 2, 1.3]}
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, key in enumerate(keys):
        op, backend, p = key
        factor = Op.parse(op).spec.busbw_factor(p)
        ax_t, ax_b, ax_r = axes[0][col], axes[1][col], axes[2][col]
        if not Op.parse(op).spec.payload:
            _latency_fits(ax_t, ax_b, ax_r, points, sorted(panels[key], key=lambda f: f.algo), key, colors)
            continue
        for i, f in enumerate(sorted(panels[key], key=lambda f: f.algo)):
            color = colors[i % len(colors)]
            mine = [q for q in points if q.group == (op, f.algo, backend, p)]
            xs = np.array([q.size_bytes for q in mine], dtype=float)
            # The time each point is fitted at (its fastest consistent p25), so the curve, the
            # points and the error panel show what the fit table's figures are of.
            ts = np.array([q.time_us for q in mine], dtype=float)
            aside = np.array([bool(q.set_aside) for q in mine], dtype=bool)
            # A fit that does not follow its points draws no curve, only its points (Fit.distrust).
            if f.usable:
                grid = np.geomspace(max(f.min_bytes, 1), max(f.max_bytes, 2), 200)
                model = np.array([f.predict_us(s) for s in grid])
                ax_t.plot(grid, model, color=color, label=f.algo)
                ax_b.plot(grid, grid / model / 1e3 * factor, color=color)
            if len(mine):
                ok = (xs > 0) & ~aside
                label = None if f.usable else f"{f.algo}\n(not usable: no curve)"
                ax_t.scatter(xs[ok], ts[ok], color=color, s=12, label=label)
                ax_b.scatter(xs[ok], xs[ok] / ts[ok] / 1e3 * factor, color=color, s=12)
                # Points their own measurement set aside: crosses, not fitted.
                out = (xs > 0) & aside
                ax_t.scatter(xs[out], ts[out], color=color, s=20, marker="x")
                if f.usable:
                    errors = point_errors_pct(f, mine)
                    ax_r.scatter([s for s, _ in errors], [e for _, e in errors], color=color, s=10)
            for seg in f.segments[1:] if f.usable else ():
                ax_t.axvline(seg.min_bytes, color=color, linestyle=":", linewidth=0.8)
        ax_t.set(xscale="log", yscale="log", ylabel="time (us)", title=f"{op}, {backend}, {p} ranks")
        ax_b.set(xscale="log", yscale="log", ylabel="busbw (GB/s)")
        ax_r.set(xscale="log", ylabel="model error (%)", xlabel="size")
        for ax in (ax_t, ax_b, ax_r):
            _readable_axes(ax)
        # Beside the axes, not over the points: inside them, matplotlib's "best" place covered measured
        # points wherever they filled the panel (eight algorithms on 4 ranks, four of them unusable).
        ax_t.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        for ax in (ax_t, ax_b, ax_r):
            ax.grid(True, which="both", alpha=0.3)
        if any(f.usable for f in panels[key]):
            ax_r.axhline(0, color="grey", linewidth=0.8)
        else:
            # No model, no error to draw: an empty panel had axes of 1B-8B and 0-1 %, read as data.
            ax_r.axis("off")
            ax_r.text(0.5, 0.5, "no usable fit: no model error", ha="center", va="center", transform=ax_r.transAxes)
    # One column is narrower than the sentence (it was cut at both ends): wrapped to the figure.
    fig.suptitle(
        _fitted_to(fig, "measured (points; crosses: set aside as their measurement marks them) and fitted (lines)")
    )
    for ax in axes[0]:
        ax.set_title(_fitted_to(fig, ax.get_title(), ax))
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputFileError(str(path), f"cannot write the plot ({exc.strerror})") from exc
    finally:
        plt.close(fig)
    return path


def _latency_fits(
    ax_t: Axes,
    ax_b: Axes,
    ax_r: Axes,
    points: Sequence[FitPoint],
    fits: Sequence[Fit],
    key: tuple[str, str, int],
    colors: list[str],
) -> None:
    """An op that moves no data (barrier): per algorithm its fitted time (a bar) and its measured
    points, in microseconds; no size axis, no bandwidth, no residual panel."""
    op, backend, p = key
    names = [f.algo for f in fits]
    ax_t.bar(names, [f.predict_us(0) for f in fits], color=[colors[i % len(colors)] for i in range(len(fits))])
    for f in fits:
        mine = [q.time_us for q in points if q.group == (op, f.algo, backend, p) and not q.set_aside]
        ax_t.scatter([f.algo] * len(mine), mine, color="black", s=12, zorder=3)
    ax_t.set(ylabel="time (us)", title=f"{op}, {backend}, {p} ranks: no data moved, time only")
    ax_t.grid(True, axis="y", alpha=0.3)
    for ax in (ax_b, ax_r):
        ax.axis("off")
    ax_b.text(0.5, 0.5, f"{op} moves no data: no bandwidth", ha="center", va="center", transform=ax_b.transAxes)


def plot_tune(rows: Sequence[ResultRow], fits: Sequence[Fit], profile: Profile, path: Path) -> Path:
    """Write tune's plot to ``path`` (PNG) atomically and return it (see the module's docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = profile.ops
    fig, axes = plt.subplots(len(ops), 1, figsize=(11, 4.8 * len(ops)), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    algos = sorted({r.algo for r in rows})
    color = {a: colors[i % len(colors)] for i, a in enumerate(algos)}
    for ax, op in zip(axes[:, 0], ops, strict=True):
        if not Op.parse(op).spec.payload:
            _latency_panel(ax, rows, profile, op, color)
            continue
        by_variant: dict[tuple[str, int | None], list[ResultRow]] = defaultdict(list)
        for r in rows:
            if r.op == op and r.wrong <= 0:
                by_variant[(r.algo, r.segment_bytes)].append(r)
        sizes_all = sorted({r.size_bytes for r in rows if r.op == op})
        seg_count: dict[str, int] = defaultdict(int)
        for algo, _seg in by_variant:
            seg_count[algo] += 1
        for (algo, seg), pts in sorted(by_variant.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            pts.sort(key=lambda r: r.size_bytes)
            xs = [r.size_bytes for r in pts]
            # The time decisions and fits use (p25 where measured), so points and fitted lines compare.
            ys = [decision_time_us(r) for r in pts]
            # Bars: the fastest iteration to the p50 (the faster half), as in the HTML report; the
            # slowest iteration is one stall and would stretch the axis over decades.
            lo = [max(0.0, y - r.time_us_min) if r.time_us_min > 0 else 0.0 for y, r in zip(ys, pts, strict=True)]
            hi = [max(0.0, r.time_us - y) for y, r in zip(ys, pts, strict=True)]
            # Name the segment size only where an algorithm was measured with several.
            label = algo if seg is None or seg_count[algo] == 1 else f"{algo} (seg {seg // 1024} KiB)"
            marker = "o" if seg is None or seg_count[algo] == 1 or seg >= (1 << 20) else "s"
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=marker, ms=4, capsize=2, color=color[algo], label=label, alpha=0.8)
        for fit in fits:
            # A fit that does not follow its points is not drawn (Fit.distrust).
            if fit.op != op or not sizes_all or not fit.usable:
                continue
            grid = _geom(sizes_all[0], sizes_all[-1], 60)
            ax.plot(grid, [fit.predict_us(s) for s in grid], "--", lw=1, color=color.get(fit.algo, "grey"))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("time (us): p25; bars: fastest iteration to p50")
        ax.set_title(
            _fitted_to(
                fig, f"{op}, {profile.backend}, {profile.world_size} ranks: measured (points), fitted (dashed)", ax
            )
        )
        _rule_band(ax, profile, op, sizes_all, color)
        ax.set_xlabel("size")
        _readable_axes(ax)
        # Beside the axes, not over the points.
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    try:
        with atomic_output(path) as f:
            fig.savefig(f, dpi=110, format="png")
    finally:
        plt.close(fig)
    return path


def _latency_panel(ax: Axes, rows: Sequence[ResultRow], profile: Profile, op: str, color: dict[str, str]) -> None:
    """An op that moves no data (barrier): a bar per algorithm, its time in microseconds (the p25 of its
    fastest round), the fastest iteration to the p50 as the error bar; the chosen one named."""
    best: dict[str, ResultRow] = {}
    for r in rows:
        if r.op != op or r.time_us <= 0:
            continue
        if r.algo not in best or decision_time_us(r) < decision_time_us(best[r.algo]):
            best[r.algo] = r
    algos = sorted(best, key=lambda a: decision_time_us(best[a]))
    ys = [decision_time_us(best[a]) for a in algos]
    lo = [max(0.0, y - best[a].time_us_min) if best[a].time_us_min > 0 else 0.0 for y, a in zip(ys, algos, strict=True)]
    hi = [max(0.0, best[a].time_us - y) for y, a in zip(ys, algos, strict=True)]
    ax.bar(algos, ys, yerr=[lo, hi], capsize=3, color=[color[a] for a in algos], alpha=0.8)
    chosen = ", ".join(r.algo for r in profile.rules_for(op))
    ax.set_ylabel("time (us): p25; bars: fastest iteration to p50")
    title = f"{op}, {profile.backend}, {profile.world_size} ranks: no data moved, time only; chosen: {chosen}"
    ax.set_title(_fitted_to(ax.get_figure(), title, ax))  # type: ignore[arg-type]
    ax.grid(True, axis="y", alpha=0.25)


def _geom(lo: int, hi: int, n: int) -> list[float]:
    lo_f, hi_f = math.log(max(lo, 1)), math.log(max(hi, 1))
    return [math.exp(lo_f + (hi_f - lo_f) * i / (n - 1)) for i in range(n)]


def _rule_band(ax: Axes, profile: Profile, op: str, sizes: list[int], color: dict[str, str]) -> None:
    """Shade the top of the panel with the chosen algorithm per range, labelled."""
    if not sizes:
        return
    left, right = sizes[0] / 1.5, sizes[-1] * 1.5
    ax.set_xlim(left, right)
    for rule in profile.rules_for(op):
        start = max(float(rule.min_bytes), left)
        stop = right if rule.max_bytes is None else min(float(rule.max_bytes + 1), right)
        if stop <= start:
            continue
        ax.axvspan(start, stop, ymin=0.94, ymax=1.0, color=color.get(rule.algo, "grey"), alpha=0.6)
        ax.text(
            math.sqrt(start * stop),
            0.9,
            rule.algo,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=8,
        )
