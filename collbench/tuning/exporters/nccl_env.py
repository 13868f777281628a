"""``NCCL_ALGO`` from a profile, where one variable can say what the profile says.

``NCCL_ALGO`` takes one algorithm list per collective (NCCL 2.24+: ``allreduce:tree;broadcast:ring``)
and no size ranges, so it expresses an op only when a single NCCL algorithm wins at every size. For
each op the output says either the setting or, in one line, why it cannot: the winner changes with
size (use the tuner plugin config instead), or the winner is an algorithm NCCL does not have, or the
winner is native (nothing to set: NCCL's own choice is the default).
"""

from __future__ import annotations

from collbench.schedules.ops import Op
from collbench.tuning.exporters.nccl_tuner import nccl_algorithm
from collbench.tuning.profile import Profile


def nccl_algo_value(profile: Profile) -> tuple[str | None, list[str]]:
    """The ``NCCL_ALGO`` value (None when no op can be set) and one reason line per op left out."""
    settings: list[str] = []
    reasons: list[str] = []
    for name in profile.ops:
        op = Op.parse(name)
        rules = profile.rules_for(op)
        algos = list(dict.fromkeys(r.algo for r in rules))
        nccl = op.spec.nccl_name
        if len(algos) > 1:
            ranges = ", ".join(f"{r.algo} from {r.min_bytes} B" for r in rules)
            reasons.append(
                f"{nccl}: the best algorithm changes with size ({ranges}); NCCL_ALGO has no size ranges: "
                "use `collbench export nccl-tuner`"
            )
        elif algos[0] == "native":
            reasons.append(f"{nccl}: native wins at every size; nothing to set (NCCL's own choice)")
        elif (mapped := nccl_algorithm(algos[0])) is None:
            reasons.append(f"{nccl}: {algos[0]} wins at every size, but NCCL has no {algos[0]} algorithm")
        else:
            settings.append(f"{nccl}:{mapped[0]}")
    return (";".join(settings) if settings else None), reasons


def export_nccl_env(profile: Profile) -> str:
    """Shell lines: ``export NCCL_ALGO="..."`` where possible, and a ``#`` line per op it cannot cover."""
    value, reasons = nccl_algo_value(profile)
    out = []
    if profile.backend != "nccl":
        out.append(f"# note: measured with {profile.backend}, not NCCL")
    out.extend(f"# {reason}" for reason in reasons)
    if value is not None:
        out.append(f'export NCCL_ALGO="{value}"')
    else:
        out.append("# no NCCL_ALGO setting expresses this profile")
    return "\n".join(out) + "\n"
