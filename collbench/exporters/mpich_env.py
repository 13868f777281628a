"""``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` from a profile, where one fixed choice says what it says.

The variables have no size ranges and no communicator sizes: MPICH applies one to every call of its
collective on every intracommunicator of the job (MPICH 4.0.2, ``src/mpi/coll/cvars.txt``; the harness
of ``sweep --backend mpich`` is forced the same way). So a collective gets a setting only where one
forced algorithm won at every size of every rule set; where MPICH's own selection (``native``) won
everywhere nothing is written (``auto`` stays), and where the winner changes the output says so and
points to ``export mpich-json``, whose selection file has ranges. A forced algorithm MPICH cannot run
for some call stops that call with an error under ``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` and runs
MPICH's own choice under the default (``silent``): the file says which.
"""

from __future__ import annotations

from collbench.backends.mpich import MPICH_EXPORTS
from collbench.exporters.exported import Exported, wrap_comments
from collbench.exporters.serving import check_serves
from collbench.mpich.algorithms import MPICH_VERSION, NATIVE, find_algorithm
from collbench.profile.document import Profile
from collbench.schedules.ops import Op
from collbench.text import printable


def build_mpich_env(profile: Profile) -> Exported:
    """Shell lines ``export MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<name>`` where one choice holds, a ``#`` line
    per collective saying why (or why not). Raises UserError for a profile not measured over MPICH."""
    check_serves(MPICH_EXPORTS, profile.backend, None)
    host = printable(profile.host)
    out = [
        f"# MPICH {MPICH_VERSION} algorithm variables made by collbench from a profile ({profile.fingerprint}, {host})",
        f"# rule sets: {profile.shapes_label()}; each variable applies to every communicator of the job",
        "# a forced algorithm MPICH cannot run for a call: its own choice runs instead (MPIR_CVAR_COLLECTIVE_FALLBACK"
        "=silent, the default), or the call fails (=error)",
    ]
    settings: list[str] = []
    notes: list[str] = []
    for op in Op:
        coll = op.spec.mpi_name
        if op.value not in profile.ops or coll == "sendrecv":
            continue
        winners = {r.algo.strip().lower() for s in profile.rule_sets if op.value in s.ops for r in s.rules_for(op)}
        if winners == {NATIVE}:
            out.append(f"# {coll}: MPICH's own selection won at every size measured; nothing to set")
            continue
        if len(winners) > 1:
            line = (
                f"{coll}: the winner changes with the size or communicator ({', '.join(sorted(winners))}); one "
                "variable cannot say that: use `collbench export mpich-json`"
            )
            out.append(f"# {line}")
            notes.append(line)
            continue
        found = find_algorithm(op.value, winners.pop())
        if found is None:
            continue  # the profile's loader refuses a name MPICH does not have (Backend.foreign_native)
        out.append(f"# {coll}: {found.name} won at every size measured")
        settings.append(f"export {found.cvar}={found.name}")
    if not settings:
        out.append("# no variable expresses this profile")
    return Exported(wrap_comments("\n".join([*out, *settings]) + "\n"), tuple(notes))
