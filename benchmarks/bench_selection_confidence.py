"""How often selection's verdicts are wrong on simulated rounds: the confidence they claim, measured.

No ranks run: each trial makes the result rows a tune's rounds would hold at one size, four
algorithms measured in ``--rounds`` rounds (native 3x, ring 1x, rabenseifner ``1 + min_gain``,
tree 1.5x), every point's time in every round scattered lognormally by ``sigma``, and folds them
as a tune does (``selection.measured_points``: rounds put at one speed, between-round noise pooled
over the size's algorithms). Per rounds and sigma it counts:

* apart, wrong: rabenseifner, exactly ``min_gain`` behind, called apart from ring round by round
  (``selection.apart_round_by_round``, the slower one by best time against the faster): "apart"
  means more than ``min_gain`` behind, so every time it is said it is wrong. ``sigmas`` = 2 claims
  it in 2.3% of tunes each way. With rabenseifner the slower of the two (``rab``) and ring the
  slower (``ring``, the other way round) counted apart.
* beaten, wrong (3 rounds and more): ``tune --check`` of a rule choosing native where ring is exactly
  as fast (rabenseifner left out): the rule called beaten (``RuleCheck.faulted``).

Beside each, the same rows judged with ``sigmas`` standard errors in place of Student's t (the rule
before it took t; two rounds never used a standard error, so no column there), and the check's
verdict by the regret's own 2 standard errors (its rule before ``selection.beaten_by``).

    python benchmarks/bench_selection_confidence.py [--trials 1000] [--rounds 2,3,5]
        [--sigmas 0.05,0.1,0.15,0.2,0.3,0.5] [--seed 1]

The last line printed is one JSON object: {"apart": {rounds: {sigma: [rab, ring, rab_old, ring_old]}},
"beaten": {rounds: {sigma: [new, old]}}}.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.results.row import ResultRow
from collbench.tuning.check import regrets
from collbench.tuning.selection import (
    SelectionSettings,
    apart_round_by_round,
    in_round,
    measured_points,
    points_at,
)
from collbench.tuning.selection import decision as decision_module

SIZE = 4096


def _row(algo: str, time_us: float) -> ResultRow:
    """A 4-rank float32 all-reduce row at ``time_us``, its 10 iterations within 2% of it."""
    return ResultRow(
        op="all-reduce", algo=algo, backend="gloo", world_size=4, dtype="float32", redop="sum",
        in_place=False, size_bytes=SIZE, count=SIZE // 4, iters=10, time_us=time_us,
        time_us_mean=time_us, time_us_min=time_us * 0.98, time_us_max=time_us * 1.02,
        algbw_gbps=0.0, busbw_gbps=0.0, wrong=0,
    )  # fmt: skip


def _rows(base: dict[str, float], rounds: int, sigma: float, rng: np.random.Generator) -> list[ResultRow]:
    """One row per algorithm and round, each time scattered by ``sigma`` (lognormal)."""
    rows: list[ResultRow] = []
    for r in range(rounds):
        rows += in_round([_row(algo, t * math.exp(rng.normal(0.0, sigma))) for algo, t in base.items()], r)
    return rows


@contextmanager
def _normal_errors() -> Iterator[None]:
    """Selection's round-by-round tests as they were: ``sigmas`` standard errors, not Student's t."""
    real = decision_module.student_t_factor
    decision_module.student_t_factor = lambda sigmas, _dof: sigmas  # type: ignore[assignment]
    try:
        yield
    finally:
        decision_module.student_t_factor = real


def _apart(rows: list[ResultRow], settings: SelectionSettings) -> tuple[bool, bool]:
    """(rabenseifner called apart behind ring, ring called apart behind rabenseifner)."""
    here = {v.algo: p for v, p in points_at(measured_points(rows)["all-reduce"], SIZE).items()}
    ring, rab = here["ring"], here["rabenseifner"]
    if rab.time_us >= ring.time_us:
        return apart_round_by_round(rab, ring, settings), False
    return False, apart_round_by_round(ring, rab, settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--rounds", default="2,3,5")
    parser.add_argument("--sigmas", default="0.05,0.1,0.15,0.2,0.3,0.5")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    settings = SelectionSettings()
    rng = np.random.default_rng(args.seed)
    profile = Profile(
        fingerprint="f",
        host="h",
        backend="gloo",
        rule_sets=(RuleSet(4, 1, (Rule("all-reduce", 0, None, "native", at_bytes=SIZE),)),),
    )
    apart_base = {"native": 300.0, "ring": 100.0, "rabenseifner": 100.0 * (1 + settings.min_gain), "tree": 150.0}
    check_base = {"native": 100.0, "ring": 100.0, "tree": 150.0, "direct": 300.0}
    out: dict[str, dict[int, dict[float, list[float]]]] = {"apart": {}, "beaten": {}}
    print(f"wrong verdicts per {args.trials} trials, as a share (sigmas = 2 claims 0.023 each way)")
    print(f"{'rounds':>6} {'scatter':>7} {'apart: rab':>10} {'ring':>6} {'2 se: rab':>9} {'ring':>6}"
          f" {'beaten':>7} {'2 se':>6}")  # fmt: skip
    for rounds in (int(x) for x in args.rounds.split(",")):
        for sigma in (float(x) for x in args.sigmas.split(",")):
            counts = [0, 0, 0, 0, 0, 0]
            for _ in range(args.trials):
                rows = _rows(apart_base, rounds, sigma, rng)
                rab, ring = _apart(rows, settings)
                counts[0] += rab
                counts[1] += ring
                if rounds >= 3:
                    with _normal_errors():
                        rab, ring = _apart(rows, settings)
                    counts[2] += rab
                    counts[3] += ring
                    (check,) = regrets(profile, _rows(check_base, rounds, sigma, rng))
                    counts[4] += check.faulted
                    counts[5] += check.regret is not None and check.regret - 2 * (check.regret_err or 0.0) > 1.0
            share = [c / args.trials for c in counts]
            if rounds >= 3:
                out["apart"].setdefault(rounds, {})[sigma] = share[:4]
                out["beaten"].setdefault(rounds, {})[sigma] = share[4:]
                cells = " ".join(f"{s:>{w}.3f}" for s, w in zip(share, (10, 6, 9, 6, 7, 6), strict=True))
            else:
                out["apart"].setdefault(rounds, {})[sigma] = share[:2]
                cells = f"{share[0]:>10.3f} {share[1]:>6.3f} {'-':>9} {'-':>6} {'-':>7} {'-':>6}"
            print(f"{rounds:>6} {sigma:>7.2f} {cells}", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
