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

``--power`` measures the check's other error: native chosen 5%, 10% and 30% slower than ring (tree
1.5x, direct 3x), every point's rounds scattered by 2% and 10%, 3 and 5 rounds; the share of checks
that call the rule beaten (right every time), by the check (``RuleCheck.faulted``: a tune's winner
test, ``selection.beaten_by``, since 9d16564), by the regret's 2 standard errors (before it), and by
a candidate: a one-sided test of "native is slower than an alternative" over the rounds' log time
ratios, Student's t at n - 1 degrees of freedom, each of the K alternatives at 2.3%/K (Bonferroni);
with the same three verdicts' false alarms (native exactly as fast as ring) first.

    python benchmarks/bench_selection_confidence.py [--trials 1000] [--rounds 2,3,5]
        [--sigmas 0.05,0.1,0.15,0.2,0.3,0.5] [--seed 1]
    python benchmarks/bench_selection_confidence.py --power [--trials 300] [--seed 1]

The last line printed is one JSON object: {"apart": {rounds: {sigma: [rab, ring, rab_old, ring_old]}},
"beaten": {rounds: {sigma: [new, old]}}}; with --power, {"check": {rounds: {sigma: {slower: [check,
2 se, t/K]}}}} (slower 0: the false alarms).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from scipy.special import ndtr, ndtri

from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.results.noise import student_t_factor
from collbench.results.row import ResultRow
from collbench.tuning.check import regrets
from collbench.tuning.selection import (
    Point,
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


def _verdicts(profile: Profile, rows: list[ResultRow]) -> tuple[bool, bool, bool]:
    """A check of ``profile``'s native rule on ``rows``: beaten by the check, by the regret's 2
    standard errors, by the candidate (:func:`_slower_than_any`)."""
    (check,) = regrets(profile, rows)
    here = {v.algo: p for v, p in points_at(measured_points(rows)["all-reduce"], SIZE).items()}
    best = min(here, key=lambda a: here[a].time_us)
    two_se = check.regret is not None and check.regret - 2 * (check.regret_err or 0.0) > 1.0
    others = [p for a, p in here.items() if a != "native"]
    return check.faulted, two_se, best != "native" and _slower_than_any(here["native"], others)


def _slower_than_any(chosen: Point, others: list[Point]) -> bool:
    """The candidate: ``chosen`` slower than one of ``others`` by a one-sided t test of the rounds' mean
    log time ratio, each at the claimed 2.3% over K = len(others)."""
    sigmas = float(-ndtri(float(1.0 - ndtr(SelectionSettings().sigmas)) / len(others)))
    for other in others:
        logs = [math.log(a / b) for (_, a), (_, b) in zip(chosen.by_round, other.by_round, strict=True)]
        error = statistics.stdev(logs) / math.sqrt(len(logs))
        if statistics.fmean(logs) - student_t_factor(sigmas, len(logs) - 1) * error > 0.0:
            return True
    return False


def power(profile: Profile, trials: int, rng: np.random.Generator) -> None:
    """The check's false alarms and power, per rounds, scatter and how much slower native is."""
    out: dict[int, dict[float, dict[float, list[float]]]] = {}
    print(f"rules called beaten per {trials} checks, as a share (slower 0: false alarms, claim 0.023)")
    print(f"{'rounds':>6} {'scatter':>7} {'slower':>6} {'check':>6} {'2 se':>6} {'t/K':>6}")
    for rounds in (3, 5):
        for sigma in (0.02, 0.10):
            for slower in (0.0, 0.05, 0.10, 0.30):
                base = {"native": 100.0 * (1 + slower), "ring": 100.0, "tree": 150.0, "direct": 300.0}
                counts = [0, 0, 0]
                for _ in range(trials):
                    for i, said in enumerate(_verdicts(profile, _rows(base, rounds, sigma, rng))):
                        counts[i] += said
                share = [c / trials for c in counts]
                out.setdefault(rounds, {}).setdefault(sigma, {})[slower] = share
                cells = " ".join(f"{s:>6.3f}" for s in share)
                print(f"{rounds:>6} {sigma:>7.2f} {slower:>6.2f} {cells}", flush=True)
    print(json.dumps({"check": out}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--rounds", default="2,3,5")
    parser.add_argument("--sigmas", default="0.05,0.1,0.15,0.2,0.3,0.5")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--power", action="store_true", help="the check's false alarms and power")
    args = parser.parse_args()
    settings = SelectionSettings()
    rng = np.random.default_rng(args.seed)
    profile = Profile(
        fingerprint="f",
        host="h",
        backend="gloo",
        rule_sets=(RuleSet(4, 1, (Rule("all-reduce", 0, None, "native", at_bytes=SIZE),)),),
    )
    if args.power:
        power(profile, args.trials, rng)
        return
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
