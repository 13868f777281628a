"""Which points a tune measures again: sizes whose winner is not yet separated from the runner-up.

``collbench tune`` sweeps every algorithm in rounds (odd rounds in reverse order, so that a load that
drifts during a run does not favour the algorithms measured first). After the fixed rounds, each size
whose fastest variant is within the measured noise of another (``selection.decide_at``: a tie) is
measured again: exactly the tied (size, algorithm) pairs, each algorithm at the sizes where it is in
a tie and nowhere else, so a size already separated beyond the noise and an algorithm already behind
it are not measured again, nor a size whose ties three rounds already show equal to the winner
(``selection.equal_round_by_round``). That goes on until every size is separated or shown a tie that
way, or the round budget (``Depth.max_rounds``, which says why it is bounded) is spent. Each extra
round can narrow the noise: the gap between a point's two smallest round times
(``selection.Point.between``) shrinks as rounds undisturbed by load accumulate, and a winner that is
really faster separates; two that are really the same stay tied, and the tie goes to the simpler
choice.

The fixed rounds after the first measure only what is still within reach (:func:`within_reach`): at
each size, an algorithm whose fastest timed iteration (``time_us_min``) is slower than
``REACH_FACTOR`` (2x) times the slowest timed iteration (``time_us_max``) of that size's fastest
variant is left out of the rounds that follow. That is beyond any noise one round shows: the two
points' whole iteration ranges do not overlap, with a gap of 2x, where the decision's own bar is at
most 25% between steady points (``SelectionSettings.max_threshold``). A point in the stall regime, or
with rounds that disagree by more than that cap, is always kept, since its range says too little.
A point a round cut short after one timed iteration (runtime/sweep/timed.py: that iteration, and the
data check's call before it, over 2x the slowest iteration of a point measured in full at its size,
where its full iterations would overrun its time budget) is left out of the rounds after too.
The rows already measured stay in the results and the profile's evidence; selection never ties nor
chooses such an algorithm (``decision.left_behind``): in every round it shared with the fastest it was
more than 2x behind. On the namespace cluster, five algorithms 4-10x behind the winner at every size
took 82% of each fixed round.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.tuning.selection import (
    REACH_FACTOR,
    Point,
    PointsByOp,
    SelectionSettings,
    decide_at,
    equal_round_by_round,
    points_at,
    sizes_of,
)


@dataclass(frozen=True, slots=True)
class Unsettled:
    """One op's ties: at each size whose winner is not separated, the algorithms tied there."""

    op: str
    pairs: tuple[tuple[int, str], ...]
    """(size_bytes, algorithm), by size: the points a tie round measures again, and only these."""

    @property
    def sizes(self) -> tuple[int, ...]:
        """The tied sizes, smallest first."""
        return tuple(dict.fromkeys(size for size, _ in self.pairs))

    @property
    def algos(self) -> tuple[str, ...]:
        """The algorithms in a tie at one size or more, in the order first met."""
        return tuple(dict.fromkeys(algo for _, algo in self.pairs))


def unsettled(points: PointsByOp, settings: SelectionSettings | None = None) -> list[Unsettled]:
    """Per op, the (size, algorithm) pairs in a tie: at each size where the fastest variant is tied with
    another, the chosen one and those tied with it; none at a size already separated, nor at one whose
    ties are all shown equal to the chosen variant (``selection.equal_round_by_round``: within the
    smallest gain that counts, round by round), where another round cannot change the decision.

    ``points`` are the measured rows folded by ``selection.measured_points``.
    """
    settings = settings or SelectionSettings()
    out: list[Unsettled] = []
    for op, variants in sorted(points.items()):
        pairs: list[tuple[int, str]] = []
        for size in sizes_of(variants):
            here = points_at(variants, size)
            chosen, tied = decide_at(here, None, settings)
            if all(equal_round_by_round(here[v], here[chosen], settings) for v in tied):
                continue  # a tie settled as one (nothing tied: separated)
            # A variant is an algorithm at one segment size: a tie round measures the algorithm.
            pairs.extend(dict.fromkeys((size, variant.algo) for variant in (chosen, *tied) if tied))
        if pairs:
            out.append(Unsettled(op, tuple(pairs)))
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


def within_reach(points: PointsByOp, settings: SelectionSettings | None = None) -> tuple[list[Unsettled], int]:
    """Per op, the (size, algorithm) pairs the next fixed round measures, and how many it leaves out.

    At each size, an algorithm is left out when every variant of it there is out of reach of the
    fastest: its fastest iteration slower than ``REACH_FACTOR`` times the fastest variant's slowest
    timed iteration, neither point stalled, and neither point's rounds apart by more than the noise
    cap (``settings.max_threshold``). Every other pair is kept, ties included.

    A point cut short is out of reach unless its algorithm is within reach at a size next to it. The
    cut rests on two calls (the data check's and one timed), and a stall can slow both; where the
    algorithm, measured in full at a neighbouring size, competes there, the next round measures it
    again (and cuts it short again if it is behind). An algorithm behind at every size, as the slow
    ones on the namespace cluster are (4-10x), is left out as before.
    """
    settings = settings or SelectionSettings()
    out: list[Unsettled] = []
    left_out = 0
    for op, variants in sorted(points.items()):
        sizes = sizes_of(variants)
        reach_at: dict[int, dict[str, bool]] = {}
        cut_at: dict[int, set[str]] = {}
        for size in sizes:
            here = points_at(variants, size)
            fastest = min(here.values(), key=lambda p: (p.cut_short, p.time_us))
            reach: dict[str, bool] = {}
            cut: dict[str, bool] = {}
            for variant, point in here.items():
                reach[variant.algo] = reach.get(variant.algo, False) or not out_of_reach(point, fastest, settings)
                cut[variant.algo] = cut.get(variant.algo, True) and bool(point.cut_short) and not fastest.cut_short
            reach_at[size] = reach
            cut_at[size] = {algo for algo, all_cut in cut.items() if all_cut}
        pairs: list[tuple[int, str]] = []
        for i, size in enumerate(sizes):
            neighbours = [reach_at[n] for n in sizes[max(i - 1, 0) : i + 2] if n != size]
            for algo, kept in reach_at[size].items():
                if not kept and algo in cut_at[size]:
                    kept = any(near.get(algo, False) for near in neighbours)
                if kept:
                    pairs.append((size, algo))
                else:
                    left_out += 1
        out.append(Unsettled(op, tuple(pairs)))
    return out, left_out


def out_of_reach(point: Point, fastest: Point, settings: SelectionSettings) -> bool:
    """Whether ``point`` is behind ``fastest`` beyond any noise their rows show (:func:`within_reach`).

    A point cut short is (``Point.cut_short``): selection never chooses it. :func:`within_reach`
    measures it again only where its algorithm is within reach at a neighbouring size."""
    if point.cut_short and not fastest.cut_short:
        return True
    steady = not (point.stalled or fastest.stalled)
    agreed = max(point.between, fastest.between) <= settings.max_threshold
    return steady and agreed and point.time_us_min > REACH_FACTOR * fastest.time_us_max
