"""A latency-only model: barrier, which moves no data, fitted as a latency per round.

A barrier's rows are one point at 0 bytes (``fit_points.py``): its time, whatever size a row names.
Its algorithm's closed form (``costs.py``) gives the rounds it takes at the world size measured
(dissemination: ceil(log2 n); a tree: up and down its depth), with no byte term, so the model is
``t = rounds * alpha`` and the one point gives alpha, in microseconds per round. No bandwidth is
claimed (``beta_gbps`` is null). The model reproduces its one point exactly, which says nothing of
its error: the fit's note says so, and ``predict`` gives no error figure for it. At another world size
the rounds change as the algorithm's structure says (``scaled.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from collbench.errors import UserError
from collbench.models.costs import cost_terms
from collbench.models.fit_points import FitPoint, set_aside_note
from collbench.models.fitted import Fit

GroupKey = tuple[str, str, str, int]


def fit_latency_only(key: GroupKey, kept: Sequence[FitPoint], set_aside: Sequence[FitPoint]) -> Fit:
    """alpha (us per round) of a barrier group's one point. Raises UserError when the algorithm's
    formula gives it no round at this world size (nothing to divide the time by)."""
    op, algo, backend, p = key
    (point,) = kept  # a barrier's rows are one point (fit_points folds them to 0 bytes)
    terms = cost_terms(op, algo, p, 0.0)
    # A fit prices a step at one latency (steps and messages cannot be told apart at one world size);
    # predictions at another charge each message its share (``scaled.py``).
    rounds = terms.alpha
    if not rounds > 0:
        raise UserError(f"{algo}'s {op} takes no round at {p} ranks: no latency to fit")
    alpha = point.time_us / rounds
    notes = [
        f"latency only ({op} moves no data): {rounds:g} round{'s' if rounds != 1 else ''} at x{p}, "
        f"alpha = its measured {point.time_us:.4g} us / {rounds:g}; one point, so the error figures "
        "cannot judge the model"
    ]
    if set_aside:
        notes.append(set_aside_note(set_aside))
    return Fit(
        op=op,
        algo=algo,
        backend=backend,
        world_size=p,
        alpha_us=alpha,
        beta_us_per_byte=0.0,
        gamma_us_per_byte=None,
        r2=1.0,
        median_abs_pct_error=0.0,
        max_abs_pct_error=0.0,
        min_bytes=0,
        max_bytes=0,
        points=1,
        note="; ".join(notes),
        outliers=len(set_aside),
    )
