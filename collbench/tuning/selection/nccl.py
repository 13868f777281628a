"""The second selection of a profile measured over NCCL: among NCCL's own variants only.

NCCL's exports (the tuner plugin's config, ``NCCL_ALGO``/``NCCL_PROTO``) can only make NCCL run what
NCCL has: its algorithms, protocols and channel counts. A rule chosen among everything would hand NCCL
a range that collbench's own schedule won, which NCCL cannot run, and leave out which of NCCL's own
variants was fastest there. So the rows of ``native`` and every ``native:...`` variant go through the
same selection (points, decision, ranges) on their own: its ties go to plain ``native`` (NCCL's own
choice), so NCCL is forced only where a forced variant beats it beyond the noise.
"""

from __future__ import annotations

from collections.abc import Sequence

from collbench.backends import feeds
from collbench.backends.base import NCCL_EXPORTS
from collbench.nccl.variants import is_native
from collbench.profile.rules import Rule
from collbench.results.row import ResultRow
from collbench.tuning.selection.decision import SelectionSettings
from collbench.tuning.selection.ranges import FitLike, select_rules


def select_nccl_rules(
    rows: Sequence[ResultRow],
    fits: Sequence[FitLike] = (),
    *,
    settings: SelectionSettings | None = None,
) -> list[Rule] | None:
    """Rules among NCCL's own variants for every op ``rows`` measured one of them for; None where the
    rows are not NCCL's (another backend: no NCCL variant ran) or hold no NCCL variant.

    ``fits`` of other algorithms are ignored. Raises ConfigError as :func:`select_rules` does.
    """
    own = [r for r in rows if feeds(r.backend, NCCL_EXPORTS) and is_native(r.algo)]
    if not own:
        return None
    return select_rules(own, [f for f in fits if is_native(f.algo)], settings=settings)
