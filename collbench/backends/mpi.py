"""Open MPI (``--backend mpi``): Open MPI's own collectives, each coll/tuned algorithm forced in turn.

A C harness measures them under ``mpirun`` (``runtime/mpi/``), not collbench's ranks; collbench's own
schedules do not run inside Open MPI. Rows are ``native`` (coll/tuned's fixed decision) or
``native:<algorithm>`` (:mod:`collbench.ompi.algorithms`). Checked before anything starts, each mistake
one line: collbench's own algorithms, an algorithm this Open MPI does not have for any asked op, a dtype
or reduction MPI lacks. Its profiles feed Open MPI's exports (the coll/tuned rules file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from collbench.backends.base import OMPI_EXPORTS, Backend, Here, SweepOptions
from collbench.errors import ConfigError, NotApplicableError, UnknownNameError
from collbench.nccl.support import CommShape
from collbench.nccl.variants import is_native
from collbench.ompi.algorithms import NATIVE, NATIVE_PREFIX, UNTUNED, OmpiAlgorithm, known_algos
from collbench.schedules.ops import DTYPE_SIZES, Op
from collbench.schedules.registry import algorithm_names

MPI_DTYPES = ("float32", "float64", "int32", "int64")
"""collbench dtypes with an MPI datatype (MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T); MPI has no
16-bit float type."""
MPI_MAX_COUNT = (1 << 31) - 1
"""The most elements one MPI call takes (its count is a C int)."""
MPI_REDOPS = ("sum", "prod", "min", "max")
"""Reductions with an MPI_Op; MPI has no average."""


def check_mpi_call(backend: str, options: SweepOptions, dtype: str, redop: str) -> None:
    """What any MPI library's collectives can be asked (Open MPI's and MPICH's alike): an MPI type and
    reduction, a count that fits a C int, and no CUDA graph. ConfigError naming ``--backend``."""
    if dtype not in MPI_DTYPES:
        raise ConfigError(f"--backend {backend}: MPI has no {dtype} type; use one of {', '.join(MPI_DTYPES)}")
    if redop not in MPI_REDOPS:
        raise ConfigError(f"--backend {backend}: MPI has no {redop} reduction; use one of {', '.join(MPI_REDOPS)}")
    elements = options.max_bytes // DTYPE_SIZES[dtype]
    if elements > MPI_MAX_COUNT:
        raise ConfigError(
            f"--backend {backend}: -e {options.max_bytes} is {elements} {dtype} elements; an MPI count is a "
            f"C int (at most {MPI_MAX_COUNT})"
        )
    if options.cuda_graph:
        raise ConfigError(f"--cuda-graph captures GPU work; --backend {backend} runs on the CPU")


class Mpi(Backend):
    name: ClassVar[str] = "mpi"
    library: ClassVar[str] = "Open MPI"
    own_choices: ClassVar[str] = "Open MPI's own coll/tuned algorithms"
    torch_backend: ClassVar[str | None] = None
    sweep_runner: ClassVar[str | None] = "collbench.runtime.mpi.ompi_sweep:run_mpi_sweep"
    in_place_every_op: ClassVar[bool] = True
    runs_own_algorithms: ClassVar[bool] = False
    feeds: ClassVar[frozenset[str]] = frozenset({OMPI_EXPORTS})

    def unusable_reason(self, local_ranks: int, here: Here) -> str | None:
        here.check_mpi_tools()
        return None

    def check_sweep(self, options: SweepOptions, dtype: str, redop: str, here: Here) -> None:
        here.check_mpi_world_size(options.world_size)
        check_mpi_call(self.name, options, dtype, redop)

    def sweep_algos(self, options: SweepOptions, ops: list[Op], skipped: list[str], here: Here) -> dict[Op, list[str]]:
        return mpi_algos(options, ops, skipped, here.ompi_algorithms())

    def tune_candidates(
        self, ops: Sequence[str], own: tuple[str, ...], shape: CommShape, here: Here
    ) -> tuple[str, ...]:
        """``native`` and every ``native:<algorithm>`` this Open MPI has for an asked op, once each, in
        ``ompi_info``'s order: Open MPI's exports hand it only what it runs (``own`` does not run here)."""
        have = here.ompi_algorithms()
        chosen = list(Op) if any(o.strip().lower() == "all" for o in ops) else [Op.parse(o) for o in ops]
        names: dict[str, None] = {NATIVE: None}
        for op in chosen:
            names.update((algo.algo, None) for algo in have.get(op.spec.mpi_name, ()))
        return tuple(names)

    def forced_problem(self, algo: str) -> str | None:
        return None if algo.strip().lower() in known_algos() else ""

    def foreign_native(self, algo: str) -> str | None:
        # Open MPI runs native (its fixed decision) or one of its own coll/tuned algorithms; an NCCL variant
        # means nothing to it, and exported as Open MPI rules it would be read as a different algorithm.
        own = known_algos()
        key = algo.strip().lower()
        if is_native(key) and key != NATIVE and key not in own:
            listed = ", ".join(sorted(own))
            return f"an NCCL variant, in a backend mpi profile; Open MPI runs native or one of: {listed}"
        return None


def mpi_algos(
    options: SweepOptions,
    ops: list[Op],
    skipped: list[str],
    have: dict[str, tuple[OmpiAlgorithm, ...]],
) -> dict[Op, list[str]]:
    """For each op, what to measure: ``native`` (Open MPI's own choice) and ``native:<algorithm>`` forced.

    ``all`` is ``native`` and every algorithm Open MPI has (``have``, from its ``ompi_info``) for the op. A
    forced algorithm some asked ops lack is left out of those, with a line in ``skipped``. Raises
    UnknownNameError for an algorithm no asked op has (listing what they have), ConfigError for collbench's
    own algorithms.
    """
    per_op: dict[Op, list[str]] = {op: [] for op in ops}
    untuned: dict[Op, list[str]] = {}

    def forcible(op: Op) -> tuple[OmpiAlgorithm, ...]:
        return have.get(op.spec.mpi_name, ())

    for name in options.algos:
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
            elif op.spec.mpi_name in UNTUNED:
                untuned.setdefault(op, []).append(NATIVE_PREFIX + wanted)
            else:
                lacking.append(op)
        if lacking:
            # One line per name: a tune asks every op for every name some op has.
            colls = ", ".join(op.spec.mpi_name for op in lacking)
            skipped.append(
                f"native:{wanted} {', '.join(op.value for op in lacking)}: Open MPI's {colls} "
                f"{'has' if len(lacking) == 1 else 'have'} no such algorithm; skipped"
            )
        if not taken and all(op.spec.mpi_name in UNTUNED for op in ops):
            raise NotApplicableError(
                f"{name} {', '.join(op.value for op in ops)}: MPI_Sendrecv is point-to-point, coll/tuned has no "
                "algorithm to force for it; measure it with --algo native"
            )
        if not taken:
            known = sorted({f"native:{a.name}" for op in ops for a in forcible(op)})
            raise UnknownNameError(f"Open MPI algorithm for {', '.join(op.value for op in ops)}", name, known)
    for op, names in untuned.items():
        skipped.append(
            f"{', '.join(names)} {op.value}: MPI_{op.spec.mpi_name.capitalize()} is point-to-point, "
            "coll/tuned has no algorithm for it (native only); skipped"
        )
    if not any(per_op.values()):
        raise NotApplicableError("nothing to run: " + " | ".join(r.removesuffix("; skipped") for r in skipped))
    return per_op


MPI = Mpi()
