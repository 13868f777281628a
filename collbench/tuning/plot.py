"""The tune plot: measured time per algorithm against size, fitted curves, and the chosen ranges.

One panel per op: measured p50 (points, with the min-max spread as error bars) and the fitted model
(dashed) per algorithm on log-log axes; a band along the top shows which algorithm each rule picks.
matplotlib is imported here only, with the non-interactive Agg backend.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collbench.fileio import atomic_output
from collbench.profile.document import Profile
from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow


def plot_tune(rows: Sequence[ResultRow], fits: Sequence[Any], profile: Profile, path: Path) -> Path:
    """Write the plot to ``path`` (PNG) atomically and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = profile.ops
    fig, axes = plt.subplots(len(ops), 1, figsize=(9, 4.8 * len(ops)), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    algos = sorted({r.algo for r in rows})
    color = {a: colors[i % len(colors)] for i, a in enumerate(algos)}
    for ax, op in zip(axes[:, 0], ops, strict=True):
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
            lo = [max(0.0, y - r.time_us_min) for y, r in zip(ys, pts, strict=True)]
            hi = [max(0.0, r.time_us_max - y) for y, r in zip(ys, pts, strict=True)]
            # Name the segment size only where an algorithm was measured with several.
            label = algo if seg is None or seg_count[algo] == 1 else f"{algo} (seg {seg // 1024} KiB)"
            marker = "o" if seg is None or seg_count[algo] == 1 or seg >= (1 << 20) else "s"
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=marker, ms=4, capsize=2, color=color[algo], label=label, alpha=0.8)
        for fit in fits:
            if str(getattr(fit.op, "value", fit.op)) != op or not sizes_all:
                continue
            grid = _geom(sizes_all[0], sizes_all[-1], 60)
            ax.plot(grid, [fit.predict_us(s) for s in grid], "--", lw=1, color=color.get(fit.algo, "grey"))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("time (us), p25; bars min-max")
        ax.set_title(f"{op}, {profile.backend}, {profile.world_size} ranks: measured (points), fitted (dashed)")
        _rule_band(ax, profile, op, sizes_all, color)
        ax.legend(fontsize=7, ncol=3, loc="lower right")
        ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    try:
        with atomic_output(path) as f:
            fig.savefig(f, dpi=110, format="png")
    finally:
        plt.close(fig)
    return path


def _geom(lo: int, hi: int, n: int) -> list[float]:
    lo_f, hi_f = math.log(max(lo, 1)), math.log(max(hi, 1))
    return [math.exp(lo_f + (hi_f - lo_f) * i / (n - 1)) for i in range(n)]


def _rule_band(ax: Any, profile: Profile, op: str, sizes: list[int], color: dict[str, str]) -> None:
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
