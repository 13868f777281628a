"""Selection: per op and size range, which algorithm (with its parameters) to run.

The answer is a list of :class:`~collbench.profile.rules.Rule` per op whose ranges cover
``[0, unbounded)`` with no gaps (profile/rules.py). It is built in three steps, one module each:

* ``points``: the measured rows folded into one point per variant (algorithm, segment size, layout)
  and size, with the time decisions compare (each round put at the fastest round's speed, the
  smallest over rounds) and its noise. Rows with wrong elements never win.
* ``decision``: at one size, the variant to run and the ones it cannot be told apart from (a noise
  bar, a round-by-round test, ties to the simpler choice).
* ``ranges``: the sizes walked upwards with the variant in use as the incumbent, boundaries placed
  in the gaps between measured sizes (from the fits where they hold there), equal neighbours merged.

``nccl`` makes a profile's second selection over NCCL: the same steps among NCCL's own variants only,
which the NCCL exports are built from.
"""

from collbench.tuning.selection.decision import (
    DEFAULT_MAX_THRESHOLD,
    DEFAULT_MIN_GAIN,
    DEFAULT_SIGMAS,
    NATIVE,
    REACH_FACTOR,
    SelectionSettings,
    apart_round_by_round,
    beaten_by,
    decide_at,
    equal_round_by_round,
    left_behind,
    separated,
)
from collbench.tuning.selection.nccl import select_nccl_rules
from collbench.tuning.selection.points import (
    ROUND_MIN_SHARED,
    Point,
    Points,
    PointsByOp,
    in_round,
    measured_points,
    points_at,
    ratio_error,
    round_speeds,
    sizes_of,
)
from collbench.tuning.selection.ranges import GAP_FIT_TOLERANCE, FitLike, select_rules

__all__ = [
    "DEFAULT_MAX_THRESHOLD",
    "DEFAULT_MIN_GAIN",
    "DEFAULT_SIGMAS",
    "GAP_FIT_TOLERANCE",
    "NATIVE",
    "REACH_FACTOR",
    "ROUND_MIN_SHARED",
    "FitLike",
    "Point",
    "Points",
    "PointsByOp",
    "SelectionSettings",
    "apart_round_by_round",
    "beaten_by",
    "decide_at",
    "equal_round_by_round",
    "in_round",
    "left_behind",
    "measured_points",
    "points_at",
    "ratio_error",
    "round_speeds",
    "select_nccl_rules",
    "select_rules",
    "separated",
    "sizes_of",
]
