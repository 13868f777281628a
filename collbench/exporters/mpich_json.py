"""MPICH's collective selection file (CSEL JSON, ``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``) from a profile.

The format (MPICH 4.0.2, ``src/mpi/coll/src/csel.c``): nested objects whose keys are conditions; the
keys of one object are tried in order, the first whose condition holds is entered, and a leaf
``"algorithm=<function>": {}`` names what runs. The conditions used here: ``collective=<name>``,
``comm_type=intra``, ``comm_size<=N`` and ``comm_size=any``, and a size in bytes: ``avg_msg_size<=B``
(count times the datatype's size; all-to-all's per block) for allreduce, bcast, reduce and alltoall,
``total_msg_size<=B`` (the gathered output, the reduce-scatter input: collbench's size) for allgather and
reduce_scatter, and ``<key>=any`` for the last range. (``comm_size<N`` is not used: 4.0.2's search
tests it as ``<=``, csel.c ``MPIR_Csel_search``.) Gather's and scatter's ``total_msg_size`` leaves the
datatype's size out in 4.0.2 (``get_total_msgsize``), and barrier, scan and exscan have no size key:
for these a communicator size gets a rule only where one algorithm won at every size.

A file replaces MPICH's whole built-in tree, and a call no branch matches stops MPICH (``MPIR_Assert(cnt)``
in the code ``maint/gen_coll.py`` generates). So the file is MPICH's own tree (``base``: read from the
installed library, or given) with, for each tuned collective's intracommunicators, a branch per
measured communicator size placed before it: sizes up to the one below keep MPICH's tree, the size
gets the profile's ranges, and ``comm_size=any`` keeps MPICH's tree for every larger communicator.
A range where MPICH's own choice (``native``) was fastest is MPICH's subtree itself, so its choice
is unchanged there. JSON has no comments: what each range says and why goes to :attr:`Exported.notes`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.backends.mpich import MPICH_EXPORTS
from collbench.errors import InputFileError, UserError
from collbench.exporters.exported import Exported
from collbench.exporters.serving import check_serves
from collbench.fileio import read_text_file
from collbench.mpich.algorithms import (
    IN_PLACE_ONLY,
    NOT_IN_PLACE,
    find_algorithm,
)
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op

SIZE_KEYS: dict[str, str] = {
    "allreduce": "avg_msg_size",
    "bcast": "avg_msg_size",
    "reduce": "avg_msg_size",
    "alltoall": "avg_msg_size",
    "allgather": "total_msg_size",
    "reduce_scatter": "total_msg_size",
}
"""The size condition MPICH 4.0.2's CSEL evaluates as collbench's size (all-to-all's per block)."""
PER_BLOCK = frozenset({"alltoall"})
"""Collectives whose ``avg_msg_size`` is one block (``sendcount``): collbench's size over the ranks."""
INTRA = "comm_type=intra"
OWN_CHOICE = "MPICH's own selection"


@dataclass(frozen=True, slots=True)
class Range:
    """One size range of one communicator size: what runs up to ``max_bytes`` (None: every larger size)."""

    max_bytes: int | None
    algorithm: str | None
    """The CSEL function name (``MPIR_Allreduce_intra_ring``); None: MPICH's own selection."""
    said: str


def parse_base(text: str, where: str) -> dict[str, Any]:
    """MPICH's selection tree from ``text``; UserError naming ``where`` when it is not one."""
    try:
        tree = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise UserError(f"{where}: not JSON collbench reads: nested too deeply") from None
    if not isinstance(tree, dict) or not any(str(k).startswith("collective=") for k in tree):
        raise UserError(f'{where}: not an MPICH selection tree (no "collective=..." keys at the top)')
    return tree


def _choice(op: Op, rule: Rule) -> str | None:
    """The CSEL function a rule names; None for ``native``. UserError for a name MPICH does not have."""
    if rule.algo.own_choice:
        return None
    found = find_algorithm(op.value, rule.algo)
    if found is None:
        raise UserError(f"{op.value} rule at {rule.min_bytes} B: {rule.algo} is not one of MPICH's algorithms")
    return found.csel_name


def _evidence(rule: Rule) -> str:
    parts = []
    if rule.measured_us is not None:
        parts.append(f"{rule.measured_us:.4g} us")
    if rule.gain_vs_native is not None and not rule.algo.own_choice:
        parts.append(f"{rule.gain_vs_native:.2f}x over native")
    return f" ({', '.join(parts)})" if parts else ""


def ranges(op: Op, rules: list[Rule], world_size: int) -> list[Range]:
    """The profile's rules of ``op`` at one communicator size as CSEL ranges, equal neighbours merged."""
    coll = op.spec.mpi_name
    out: list[Range] = []
    for rule in rules:
        top = rule.max_bytes
        if top is not None and coll in PER_BLOCK:
            top //= world_size
        choice = _choice(op, rule)
        said = f"{rule.min_bytes}-{rule.max_bytes if rule.max_bytes is not None else 'up'} B: {rule.algo}"
        said += _evidence(rule)
        if out and out[-1].algorithm == choice:
            out[-1] = Range(top, choice, f"{out[-1].said}; {said}")
        else:
            out.append(Range(top, choice, said))
    return out


def _leaf(coll: str, algorithm: str | None, own: Any) -> Any:
    """What runs for one range: MPICH's own subtree, or the algorithm; for an algorithm MPICH runs in one
    mode only (:data:`IN_PLACE_ONLY`, :data:`NOT_IN_PLACE`), the other mode keeps MPICH's own."""
    if algorithm is None:
        return own
    chosen: dict[str, Any] = {f"algorithm={algorithm}": {}}
    name = algorithm.removeprefix(f"MPIR_{coll.capitalize()}_intra_")
    if (coll, name) in IN_PLACE_ONLY:
        return {"is_sendbuf_inplace=yes": chosen, "is_sendbuf_inplace=no": own}
    if (coll, name) in NOT_IN_PLACE:
        return {"is_sendbuf_inplace=no": chosen, "is_sendbuf_inplace=yes": own}
    return chosen


def _sized(coll: str, found: list[Range], own: Any) -> dict[str, Any]:
    key = SIZE_KEYS[coll]
    tree: dict[str, Any] = {}
    for r in found:
        cond = f"{key}=any" if r.max_bytes is None else f"{key}<={r.max_bytes}"
        tree[cond] = _leaf(coll, r.algorithm, own)
    return tree


def _by_size(profile: Profile) -> list[RuleSet]:
    seen: dict[int, RuleSet] = {}
    for rule_set in profile.rule_sets:
        other = seen.get(rule_set.world_size)
        if other is not None:
            raise UserError(
                f"MPICH's selection keys on the communicator size, and the profile has two shapes of "
                f"{rule_set.world_size} ranks ({other.shape_label}; {rule_set.shape_label}): tune one shape per size"
            )
        seen[rule_set.world_size] = rule_set
    return [seen[n] for n in sorted(seen)]


def build_mpich_json(profile: Profile, base: dict[str, Any], base_source: str) -> Exported:
    """The selection file: ``base`` (MPICH's own tree, read from ``base_source``) with the profile's
    choices in front of it for every collective and communicator size the profile has rules for.

    Raises UserError for a profile not measured over MPICH, two shapes of one size, or a base without the
    intracommunicator branch of a collective the profile chose for.
    """
    check_serves(MPICH_EXPORTS, profile.backend, None)
    sets = _by_size(profile)
    tree = json.loads(json.dumps(base))  # a copy: the base's subtrees are placed more than once
    notes: list[str] = []
    for op in Op:
        coll = op.spec.mpi_name
        present = [s for s in sets if op.value in s.ops]
        if not present or coll == "sendrecv":
            continue
        branch = tree.get(f"collective={coll}")
        own = branch.get(INTRA) if isinstance(branch, dict) else None
        if own is None:
            raise UserError(f"{base_source}: MPICH's tree has no collective={coll} / {INTRA} branch to tune")
        intra: dict[str, Any] = {}
        below = 0
        for rule_set in present:
            n = rule_set.world_size
            found = ranges(op, rule_set.rules_for(op), n)
            where = f"{coll} at {rule_set.shape_label}"
            if coll not in SIZE_KEYS and len(found) > 1:
                notes.append(
                    f"{where}: the winner changes with the size, and MPICH {coll}'s selection has no size key "
                    f"this file can use; {OWN_CHOICE} kept ({'; '.join(r.said for r in found)})"
                )
                continue
            if n - 1 > below:
                intra[f"comm_size<={n - 1}"] = own
            if coll in SIZE_KEYS:
                intra[f"comm_size<={n}"] = _sized(coll, found, own)
            else:
                intra[f"comm_size<={n}"] = _leaf(coll, found[0].algorithm, own)
            below = n
            notes += [
                f"{where}, to {'any size' if r.max_bytes is None else f'{r.max_bytes} B'}: "
                f"{r.algorithm or OWN_CHOICE} [{r.said}]"
                for r in found
            ]
        if not intra:
            continue
        intra["comm_size=any"] = own
        branch[INTRA] = intra
    text = json.dumps(tree, indent=1) + "\n"
    return Exported(text, (f"MPICH's own selection read from {base_source}", *notes))


def load_base(base: Path | None) -> tuple[dict[str, Any], str]:
    """(MPICH's own selection tree, where it was read): ``base`` (``--base FILE``), else the one built into
    the installed MPICH's library. UserError (one line) for a file that cannot be read or parsed."""
    if base is not None:
        # The one reader of files: a FIFO or /dev/zero given as --base hung the export, never read to its end.
        try:
            text, source = read_text_file(base, "MPICH's selection JSON"), str(base)
        except InputFileError as exc:
            raise UserError(f"--base {exc}") from None
    else:
        from collbench.runtime.mpi.mpich_library import installed_selection

        text, source = installed_selection()
    return parse_base(text, source), source
