"""What ``sweep --backend mpi`` may measure: Open MPI's algorithms per op, dtypes and reductions MPI has.

Checked before anything starts, each mistake one line: collbench's own algorithms (they run on gloo or
NCCL), an algorithm this Open MPI does not have for any asked op, a dtype or reduction MPI lacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collbench.errors import ConfigError, NotApplicableError, UnknownNameError
from collbench.ompi.algorithms import (
    COLLECTIVE_FOR_OP,
    NATIVE,
    NATIVE_PREFIX,
    UNTUNED,
    OmpiAlgorithm,
    parse_ompi_info,
)
from collbench.runtime.mpi.harness import check_world_size, find_tools, ompi_info_text
from collbench.schedules.ops import DTYPE_SIZES
from collbench.schedules.registry import algorithm_names

if TYPE_CHECKING:
    from collbench.runtime.sweep.plan import SweepConfig
    from collbench.schedules.ops import Op

MPI_DTYPES = ("float32", "float64", "int32", "int64")
"""collbench dtypes with an MPI datatype (MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T); MPI has no
16-bit float type."""
MPI_MAX_COUNT = (1 << 31) - 1
"""The most elements one MPI call takes (its count is a C int)."""
MPI_REDOPS = ("sum", "prod", "min", "max")
"""Reductions with an MPI_Op; MPI has no average."""


def is_mpi(backend: str) -> bool:
    return backend.strip().lower() == "mpi"


def installed_algorithms() -> dict[str, tuple[OmpiAlgorithm, ...]]:
    """What this Open MPI's coll/tuned can be forced to run, per collective (from its ompi_info)."""
    algorithms = parse_ompi_info(ompi_info_text(find_tools()))
    if not algorithms:
        raise ConfigError("ompi_info lists no coll/tuned algorithm: this Open MPI has no coll/tuned to force")
    return algorithms


def check_mpi_config(config: SweepConfig, dtype: str, redop: str) -> None:
    """The options ``--backend mpi`` cannot honour, refused in one line each."""
    check_world_size(config.world_size)
    if dtype not in MPI_DTYPES:
        raise ConfigError(f"--backend mpi: MPI has no {dtype} type; use one of {', '.join(MPI_DTYPES)}")
    if redop not in MPI_REDOPS:
        raise ConfigError(f"--backend mpi: MPI has no {redop} reduction; use one of {', '.join(MPI_REDOPS)}")
    elements = config.max_bytes // DTYPE_SIZES[dtype]
    if elements > MPI_MAX_COUNT:
        raise ConfigError(
            f"--backend mpi: -e {config.max_bytes} is {elements} {dtype} elements; an MPI count is a C int "
            f"(at most {MPI_MAX_COUNT})"
        )
    if config.cuda_graph:
        raise ConfigError("--cuda-graph captures GPU work; --backend mpi runs on the CPU")


def mpi_algos(
    config: SweepConfig,
    ops: list[Op],
    skipped: list[str],
    algorithms: dict[str, tuple[OmpiAlgorithm, ...]] | None = None,
) -> dict[Op, list[str]]:
    """For each op, what to measure: ``native`` (Open MPI's own choice) and ``native:<algorithm>`` forced.

    ``all`` is ``native`` and every algorithm Open MPI has for the op. A forced algorithm some asked ops
    lack is left out of those, with a line in ``skipped``. Raises UnknownNameError for an algorithm no
    asked op has (listing what they have), ConfigError for collbench's own algorithms.
    """
    have = algorithms if algorithms is not None else installed_algorithms()
    per_op: dict[Op, list[str]] = {op: [] for op in ops}
    untuned: dict[Op, list[str]] = {}

    def forcible(op: Op) -> tuple[OmpiAlgorithm, ...]:
        return have.get(COLLECTIVE_FOR_OP[op.value], ())

    for name in config.algos:
        key = name.strip().lower()
        if key == "all":
            for op in ops:
                for algo in (NATIVE, *(a.algo for a in forcible(op))):
                    if algo not in per_op[op]:
                        per_op[op].append(algo)
            continue
        if key == NATIVE:
            for op in ops:
                if NATIVE not in per_op[op]:
                    per_op[op].append(NATIVE)
            continue
        if not key.startswith(NATIVE_PREFIX):
            if key in algorithm_names():
                raise ConfigError(
                    f"--backend mpi measures Open MPI's own algorithms (native, native:<algorithm>, all); {name} is "
                    "collbench's own: run it with --backend gloo"
                )
            known = sorted({f"native:{a.name}" for op in ops for a in forcible(op)})
            raise UnknownNameError(
                f"Open MPI algorithm for {', '.join(op.value for op in ops)}", name, [NATIVE, *known]
            )
        wanted = key.removeprefix(NATIVE_PREFIX).strip()
        taken = False
        lacking: list[Op] = []
        for op in ops:
            names = [a.name for a in forcible(op)]
            if wanted in names:
                taken = True
                if NATIVE_PREFIX + wanted not in per_op[op]:
                    per_op[op].append(NATIVE_PREFIX + wanted)
            elif COLLECTIVE_FOR_OP[op.value] in UNTUNED:
                untuned.setdefault(op, []).append(NATIVE_PREFIX + wanted)
            else:
                lacking.append(op)
        if lacking:
            # One line per name: a tune asks every op for every name some op has.
            colls = ", ".join(COLLECTIVE_FOR_OP[op.value] for op in lacking)
            skipped.append(
                f"native:{wanted} {', '.join(op.value for op in lacking)}: Open MPI's {colls} "
                f"{'has' if len(lacking) == 1 else 'have'} no such algorithm; skipped"
            )
        if not taken and all(COLLECTIVE_FOR_OP[op.value] in UNTUNED for op in ops):
            raise NotApplicableError(
                f"{name} {', '.join(op.value for op in ops)}: MPI_Sendrecv is point-to-point, coll/tuned has no "
                "algorithm to force for it; measure it with --algo native"
            )
        if not taken:
            known = sorted({f"native:{a.name}" for op in ops for a in forcible(op)})
            raise UnknownNameError(f"Open MPI algorithm for {', '.join(op.value for op in ops)}", name, known)
    for op, names in untuned.items():
        skipped.append(
            f"{', '.join(names)} {op.value}: MPI_{COLLECTIVE_FOR_OP[op.value].capitalize()} is point-to-point, "
            "coll/tuned has no algorithm for it (native only); skipped"
        )
    if not any(per_op.values()):
        raise NotApplicableError("nothing to run: " + " | ".join(r.removesuffix("; skipped") for r in skipped))
    return per_op
