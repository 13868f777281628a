"""The profile a tune writes: its rules and fits, with what they were measured on and how they were chosen."""

from __future__ import annotations

import datetime as _dt
import platform
from collections.abc import Sequence
from typing import TYPE_CHECKING

from collbench.profile.document import Profile, ProfileLayout, RuleSet, machine_fingerprint
from collbench.profile.rules import Rule
from collbench.results.row import ResultRow
from collbench.tuning.config import TuneConfig
from collbench.tuning.selection import select_nccl_rules
from collbench.version import __version__

if TYPE_CHECKING:
    from collbench.layouts.model import Layout
    from collbench.models.fitted import Fit
    from collbench.topology.model import Topology

HOW_SELECTED = (
    "time: each row's p25, each round put at the fastest round's speed (median ratio over "
    "shared variants), smallest over rounds; per point noise hypot((t - min) / t / sqrt(iters), "
    "(second-smallest - smallest) / smallest of the rounds' times); variants within "
    "max(min_gain, sigmas * hypot(noise_a, noise_b)) (capped at max_threshold where rounds agree "
    "within it) of the fastest, or not ahead of it round by round (mean log ratio - t * its "
    "standard error > log(1 + min_gain), over n >= 3 shared rounds, t Student's at n - 1 degrees of "
    "freedom and the normal confidence of sigmas), are tied, and a tie goes to native, else the "
    "variant in use"
)
"""The profile's ``selection.noise``: how the rules were chosen (tuning/selection/), in one line."""


def build_profile(
    config: TuneConfig,
    rows: Sequence[ResultRow],
    fits: Sequence[Fit],
    rules: Sequence[Rule],
    *,
    topology: Topology | None,
    layout: Layout | None,
) -> Profile:
    """One shape's profile: ``rules`` and ``fits`` from ``rows``, measured on ``topology`` with
    ``layout`` (the layout the ranks ran; None: rank order).

    ``rules`` is the selection among everything measured; over NCCL the profile also keeps the
    selection among NCCL's own variants (``tuning/selection/nccl.py``), made here from the same rows,
    settings and trusted fits, which the NCCL exports are built from.
    """
    first = rows[0]
    # Fits that do not explain their data place no boundary (Fit.distrust), as for ``rules``.
    nccl_rules = select_nccl_rules(rows, [f for f in fits if not f.distrust()], settings=config.selection)
    # The machine's, not the ranks' topology's: tunes of one machine at other rank counts merge.
    fingerprint = machine_fingerprint(topology) if topology is not None else first.topology_fingerprint
    versions = {
        "collbench": __version__,
        "python": platform.python_version(),
        "torch": first.torch_version,
        "backend": first.backend_version,
        "cuda": first.cuda_version,
        "driver": first.driver_version,
    }
    return Profile(
        fingerprint=str(fingerprint),
        host=first.host,
        backend=first.backend,
        rule_sets=(
            RuleSet(
                world_size=first.world_size,
                nodes=max(r.nodes for r in rows),
                rules=tuple(rules),
                nccl_rules=None if nccl_rules is None else tuple(nccl_rules),
                layout=None
                if layout is None
                else ProfileLayout(name=layout.name, rings=tuple(layout.rings), trees=tuple(layout.trees)),
            ),
        ),
        fits=tuple(f.as_stored() for f in fits),
        versions={k: v for k, v in versions.items() if v},
        command=config.command,
        created=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        selection={
            "min_gain": config.selection.min_gain,
            "max_threshold": config.selection.max_threshold,
            "sigmas": config.selection.sigmas,
            "noise": HOW_SELECTED,
        },
    )
