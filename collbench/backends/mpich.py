"""MPICH (``--backend mpich``): MPICH's own collectives, each algorithm forced in turn by its CVAR.

The same C harness as Open MPI's (``csrc/mpi_harness.c``, built with MPICH's ``mpicc.mpich`` beside an
Open MPI that stays the ``mpicc``/``mpirun`` default) measures them under MPICH's launcher
(``mpiexec.mpich``), one job per forced algorithm: MPICH reads ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` from
the environment at ``MPI_Init`` (``native`` leaves it ``auto``: MPICH's own selection, its CSEL tree).
Rows are ``native`` or ``native:<algorithm>`` with the name the CVAR takes (``native:recursive_doubling``).
Its profiles feed MPICH's exports: ``export mpich-json`` (a CSEL selection file for
``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``) and ``export mpich-env`` (the CVARs, for one fixed choice).

What MPICH can be forced to run is :data:`MPICH_4_0`, read from MPICH 4.0.2 itself: the descriptions its
MPI_T interface gives for each ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` (``MPI_T_cvar_get_info``; the same
text as ``src/mpi/coll/cvars.txt`` of the v4.0.2 tag), and the CSEL names of the same algorithms
(``src/mpi/coll/src/csel_container.c``, v4.0.2: ``MPIR_<Coll>_intra_<name>``, ``MPIR_<Coll>_allcomm_nb``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import ClassVar

from collbench.backends.base import Backend, Here, SweepOptions, skip_note
from collbench.backends.mpi import check_mpi_call
from collbench.errors import (
    BackendUnavailableError,
    CommandLineError,
    ConfigError,
    NotApplicableError,
    UnknownNameError,
)
from collbench.mpich.algorithms import (
    NATIVE,
    NATIVE_PREFIX,
    TOOLS,
    algorithms,
    find_algorithm,
    known_algos,
)
from collbench.nccl.support import CommShape
from collbench.nccl.variants import is_native
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names

MPICH_EXPORTS = "mpich"
"""The consumer family of MPICH's exports (its CSEL file, its CVARs): :attr:`Backend.feeds`."""


class Mpich(Backend):
    name: ClassVar[str] = "mpich"
    library: ClassVar[str] = "MPICH"
    own_choices: ClassVar[str] = "MPICH's own algorithms"
    torch_backend: ClassVar[str | None] = None
    sweep_runner: ClassVar[str | None] = "collbench.runtime.mpi.mpich_sweep:run_mpich_sweep"
    in_place_every_op: ClassVar[bool] = True
    runs_own_algorithms: ClassVar[bool] = False
    feeds: ClassVar[frozenset[str]] = frozenset({MPICH_EXPORTS})

    def unusable_reason(self, local_ranks: int, here: Here) -> str | None:
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            raise BackendUnavailableError(
                f"--backend mpich needs MPICH's {', '.join(missing)} on PATH: install MPICH "
                "(Debian/Ubuntu: apt-get install mpich libmpich-dev)"
            )
        return None

    def check_sweep(self, options: SweepOptions, dtype: str, redop: str, here: Here) -> None:
        if options.world_size is None:
            # No --ranks (or a launcher's job, whose ranks leave it out): alike on every rank of one.
            raise CommandLineError(
                "--backend mpich starts mpiexec.mpich itself: run the command (sweep, tune) with --backend mpich "
                "--ranks N outside any launcher"
            )
        check_mpi_call(self.name, options, dtype, redop)

    def sweep_algos(self, options: SweepOptions, ops: list[Op], skipped: list[str], here: Here) -> dict[Op, list[str]]:
        return mpich_algos(options.algos, ops, skipped)

    def tune_candidates(
        self, ops: Sequence[str], own: tuple[str, ...], shape: CommShape, here: Here
    ) -> tuple[str, ...]:
        """``native`` and every ``native:<algorithm>`` MPICH has for an asked op, once each."""
        chosen = list(Op) if any(o.strip().lower() == "all" for o in ops) else [Op.parse(o) for o in ops]
        names: dict[str, None] = {NATIVE: None}
        for op in chosen:
            names.update((a.algo, None) for a in algorithms(op.spec.mpi_name))
        return tuple(names)

    def forced_problem(self, algo: str) -> str | None:
        return None if algo.strip().lower() in known_algos() else ""

    def foreign_native(self, algo: str) -> str | None:
        key = algo.strip().lower()
        known = known_algos()
        if is_native(key) and key != NATIVE and key not in known:
            return f"not one of MPICH's algorithms; MPICH runs native or one of: {', '.join(sorted(known))}"
        return None


def mpich_algos(asked: Sequence[str], ops: list[Op], skipped: list[str]) -> dict[Op, list[str]]:
    """For each op, what to measure: ``native`` (MPICH's own selection) and ``native:<algorithm>`` forced.

    ``all`` is ``native`` and every algorithm MPICH has for the op. A forced algorithm some asked ops lack
    is left out of those, with a line in ``skipped``. Raises UnknownNameError for a name no asked op has,
    ConfigError for collbench's own algorithms, NotApplicableError when nothing is left.
    """
    per_op: dict[Op, list[str]] = {op: [] for op in ops}
    lacking: dict[Op, list[str]] = {}

    def add(op: Op, algo: str) -> None:
        if algo not in per_op[op]:
            per_op[op].append(algo)

    for name in asked:
        key = name.strip().lower()
        if key in ("all", NATIVE):
            for op in ops:
                add(op, NATIVE)
                if key == "all":
                    for a in algorithms(op.spec.mpi_name):
                        add(op, a.algo)
            continue
        if not key.startswith(NATIVE_PREFIX) and key in algorithm_names():
            raise ConfigError(
                f"--backend mpich measures MPICH's own algorithms (native, native:<algorithm>, all); {name} is "
                "collbench's own: run it with --backend gloo"
            )
        having = [op for op in ops if find_algorithm(op.value, key) is not None]
        if not having:
            known = sorted({a.algo for op in ops for a in algorithms(op.spec.mpi_name)})
            if not known:
                raise NotApplicableError(
                    f"{name} {', '.join(op.value for op in ops)}: MPI_Sendrecv is point-to-point, MPICH has no "
                    "algorithm to force for it; measure it with --algo native"
                )
            raise UnknownNameError(f"MPICH algorithm for {', '.join(op.value for op in ops)}", name, known)
        for op in ops:
            if op in having:
                add(op, key)
            elif key not in lacking.setdefault(op, []):
                lacking[op].append(key)
    # One line per op (a tune asks every op for every name some op has: a line per name was 14 lines), in
    # the words a tune gathers over its parts and rounds (skip_note).
    skipped.extend(skip_note(op.value, names) for op, names in lacking.items())
    if not any(per_op.values()):
        raise NotApplicableError("nothing to run: " + " | ".join(r.removesuffix("; skipped") for r in skipped))
    return per_op


MPICH = Mpich()
