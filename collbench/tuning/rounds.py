"""Which points a tune measures again: sizes whose winner is not yet separated from the runner-up.

``collbench tune`` sweeps every algorithm in rounds (odd rounds in reverse order, so that a load that
drifts during a run does not favour the algorithms measured first). After the fixed rounds, each size
whose fastest variant is within the measured noise of another (``selection.decide_at``: a tie) is
measured again, only the tied variants and only over the sizes concerned, until every size is
separated or the round budget (``Depth.max_rounds``) is spent. Each extra round can narrow the noise:
the gap between a point's two smallest round times (``selection.Point.between``) shrinks as rounds
undisturbed by load accumulate, and a winner that is really faster separates; two that are really the
same stay tied, and the tie goes to the simpler choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.tuning.selection import PointsByOp, SelectionSettings, decide_at, points_at, sizes_of


@dataclass(frozen=True, slots=True)
class Unsettled:
    """Sizes of one op whose winner is not separated, and the algorithms tied there."""

    op: str
    sizes: tuple[int, ...]
    algos: tuple[str, ...]


def unsettled(points: PointsByOp, settings: SelectionSettings | None = None) -> list[Unsettled]:
    """Per op, the sizes where the fastest variant is tied with another, and the algorithms in those ties.

    ``points`` are the measured rows folded by ``selection.measured_points``.
    """
    settings = settings or SelectionSettings()
    out: list[Unsettled] = []
    for op, variants in sorted(points.items()):
        tied_sizes: list[int] = []
        algos: list[str] = []
        for size in sizes_of(variants):
            chosen, tied = decide_at(points_at(variants, size), None, settings)
            if not tied:
                continue
            tied_sizes.append(size)
            for variant in (chosen, *tied):
                if variant.algo not in algos:
                    algos.append(variant.algo)
        if tied_sizes:
            out.append(Unsettled(op, tuple(tied_sizes), tuple(algos)))
    return out


def settled_fraction(points: PointsByOp, settings: SelectionSettings | None = None) -> tuple[int, int]:
    """(sizes whose winner is separated, sizes measured), over every op of ``points``."""
    settings = settings or SelectionSettings()
    total = 0
    settled = 0
    for variants in points.values():
        for size in sizes_of(variants):
            total += 1
            settled += not decide_at(points_at(variants, size), None, settings)[1]
    return settled, total
