"""Plots of measured points against fitted models (matplotlib, Agg: no display needed)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from collbench.errors import InputFileError
from collbench.fileio import check_writable
from collbench.models.fit import Fit
from collbench.models.fit_points import FitPoint
from collbench.schedules.ops import Op

PLOT_SUFFIXES = (".png", ".pdf", ".svg")
"""The plot formats collbench writes (matplotlib picks the format from the suffix)."""


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
    points (each point's p50, ``FitPoint.median_us``) and fitted curves per algorithm, and the relative
    residuals below. Returns ``path``.

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
    fig, axes = plt.subplots(
        3, len(keys), figsize=(6.5 * len(keys), 10), squeeze=False, gridspec_kw={"height_ratios": [3, 2, 1.3]}
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, key in enumerate(keys):
        op, backend, p = key
        factor = Op.parse(op).spec.busbw_factor(p)
        ax_t, ax_b, ax_r = axes[0][col], axes[1][col], axes[2][col]
        for i, f in enumerate(sorted(panels[key], key=lambda f: f.algo)):
            color = colors[i % len(colors)]
            mine = [q for q in points if q.group == (op, f.algo, backend, p)]
            xs = np.array([q.size_bytes for q in mine], dtype=float)
            ts = np.array([q.median_us for q in mine], dtype=float)
            grid = np.geomspace(max(f.min_bytes, 1), max(f.max_bytes, 2), 200)
            model = np.array([f.predict_us(s) for s in grid])
            ax_t.plot(grid, model, color=color, label=f.algo)
            ax_b.plot(grid, grid / model / 1e3 * factor, color=color)
            if len(mine):
                ok = xs > 0
                ax_t.scatter(xs[ok], ts[ok], color=color, s=12)
                ax_b.scatter(xs[ok], xs[ok] / ts[ok] / 1e3 * factor, color=color, s=12)
                pred = np.array([f.predict_us(s) for s in xs])
                ax_r.scatter(xs[ok], 100 * (ts[ok] - pred[ok]) / pred[ok], color=color, s=10)
            for seg in f.segments[1:]:
                ax_t.axvline(seg.min_bytes, color=color, linestyle=":", linewidth=0.8)
        ax_t.set(xscale="log", yscale="log", ylabel="time (us)", title=f"{op}, {backend}, {p} ranks")
        ax_b.set(xscale="log", yscale="log", ylabel="busbw (GB/s)")
        ax_r.set(xscale="log", ylabel="residual (%)", xlabel="size (bytes)")
        ax_r.axhline(0, color="grey", linewidth=0.8)
        ax_t.legend(fontsize=8)
        for ax in (ax_t, ax_b, ax_r):
            ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("measured (points) and fitted (lines)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputFileError(str(path), f"cannot write the plot ({exc.strerror})") from exc
    finally:
        plt.close(fig)
    return path
