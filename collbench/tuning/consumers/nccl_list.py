"""NCCL's reading of ``NCCL_ALGO`` and ``NCCL_PROTO``, re-implemented to check values before a job uses them.

From 2.24 (``parseList`` in ``src/graph/tuning.cc``): the value is split at ``;`` into entries (empty
ones skipped, as ``strtok_r`` does); an entry is ``[prefix:]list``, the prefix a collective
(``ncclFuncStr``: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce) and only the entry that starts
the value may lack one; a list starting with ``^`` enables everything but its elements, otherwise only
its elements; elements are split at ``,``. Names compare case-insensitively and without trimming
(``" ring"`` is unknown). An unknown prefix or element, or a second entry without a prefix, fails
communicator creation (``ncclInvalidUsage``). An entry sets the whole list of the collectives it names,
so later entries override earlier ones for their collective.

Before 2.24 the value is one global list: a leading ``^`` negates, elements split at ``,``, and an
element NCCL does not know is silently ignored: ``allreduce:tree`` there enables nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.errors import UserError
from collbench.nccl.algorithms import ALGORITHMS_BY_NUMBER, FUNC_OF_OP, FUNCTIONS, PROTOCOLS
from collbench.schedules.ops import NCCL_TUNED_OPS, Op
from collbench.tuning.consumers.nccl import NEWEST, PER_COLLECTIVE_SYNTAX, Version, runnable_algorithms


class NcclListError(UserError):
    """A value NCCL rejects when it creates a communicator (the message is NCCL's own warning)."""


@dataclass(frozen=True, slots=True)
class Enabled:
    """Per collective (``ncclFunc_t`` order), which elements a value leaves enabled."""

    elements: tuple[str, ...]
    by_function: tuple[frozenset[str], ...]

    def for_op(self, op: Op) -> frozenset[str]:
        return self.by_function[FUNC_OF_OP[op]]


def algo_names(version: Version = NEWEST) -> tuple[str, ...]:
    """``ncclAlgoStr`` of ``version``."""
    return tuple(a.env for a in ALGORITHMS_BY_NUMBER if a.since[:2] <= version)


def _strtok(text: str, delims: str) -> list[tuple[int, str]]:
    """C's ``strtok_r``: non-empty tokens between delimiter runs, with their start offsets."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i] in delims:
            i += 1
        start = i
        while i < len(text) and text[i] not in delims:
            i += 1
        if i > start:
            out.append((start, text[start:i]))
    return out


def parse_list(value: str, elements: tuple[str, ...], version: Version = NEWEST) -> Enabled:
    """Which elements ``value`` enables per collective, as NCCL ``version`` reads it.

    Raises NcclListError with NCCL's warning where NCCL fails the communicator.
    """
    lowered = [e.lower() for e in elements]
    table = [[True] * len(elements) for _ in FUNCTIONS]
    if version < PER_COLLECTIVE_SYNTAX:
        negate = value.startswith("^")
        chosen = {tok.lower() for _, tok in _strtok(value[1:] if negate else value, ",")}
        row = [(name in chosen) != negate for name in lowered]
        enabled = frozenset(e for e, on in zip(elements, row, strict=True) if on)
        return Enabled(elements, tuple(enabled for _ in FUNCTIONS))
    for start, entry in _strtok(value, ";"):
        parts = _strtok(entry, ":")
        if not parts:
            raise NcclListError(f'NCCL would fail: empty entry when parsing "{value}"')
        prefix: str | None = parts[0][1]
        if len(parts) == 1:
            if start != 0:
                raise NcclListError(f'NCCL would fail: all entries except the first must have a prefix: "{value}"')
            elem_list, prefix = parts[0][1], None
        else:
            elem_list = parts[1][1]  # a third ``:`` field is ignored, as strtok_r leaves it unread
        enable = not elem_list.startswith("^")
        if not enable:
            elem_list = elem_list[1:]
        hit = [f for f in range(len(FUNCTIONS)) if prefix is None or prefix.lower() == FUNCTIONS[f].lower()]
        if not hit:
            raise NcclListError(f'NCCL would fail: unrecognized prefix token "{prefix}" when parsing "{value}"')
        names = [tok.lower() for _, tok in _strtok(elem_list, ",")]
        for name in names:
            if name not in lowered:
                raise NcclListError(f'NCCL would fail: unrecognized element token "{name}" when parsing "{value}"')
        for f in hit:
            table[f] = [(name in names) == enable for name in lowered]
    return Enabled(elements, tuple(frozenset(e for e, on in zip(elements, row, strict=True) if on) for row in table))


def check_env(algo: str | None, proto: str | None, version: Version = NEWEST) -> list[str]:
    """Problems NCCL ``version`` would have with these ``NCCL_ALGO``/``NCCL_PROTO`` values (empty: none).

    Parse errors raise NcclListError; a collective left with no algorithm it can run, or no protocol
    for the ones it has, is a problem line (NCCL fails every call of that collective).
    """
    algos = parse_list(algo, algo_names(version), version) if algo is not None else None
    protos = parse_list(proto, PROTOCOLS, version) if proto is not None else None
    problems = []
    for op in NCCL_TUNED_OPS:
        runnable = runnable_algorithms(op, version)
        usable = [a for a in runnable if algos is None or a.env in algos.for_op(op)]
        if not usable:
            problems.append(
                f"{op.spec.nccl_name}: no algorithm left that NCCL can run it with "
                f"(it runs {', '.join(a.env for a in runnable)}); every call would fail"
            )
            continue
        if protos is None:
            continue
        allowed = protos.for_op(op)
        if not any(p in allowed for a in usable for p in a.protocols):
            problems.append(f"{op.spec.nccl_name}: no protocol left for {', '.join(a.env for a in usable)}")
    return problems
