"""The protocol every backend follows (:class:`Backend`), and what a backend may ask of its machine (:class:`Here`).

A backend is a library collectives run on: torch.distributed's gloo and NCCL, which run collbench's own
schedules as well as their own collectives, or an MPI library, whose own collectives a harness measures
under its own launcher. Everything that differs between them is a question to the backend here; no
module outside ``collbench/backends/`` compares a backend's name.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

from collbench.errors import AlgorithmForNoOpError, CommandLineError, ConfigError, NotApplicableError
from collbench.nccl.support import CommShape
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names, get_algorithm

if TYPE_CHECKING:
    from collbench.ompi.algorithms import OmpiAlgorithm

NCCL_EXPORTS = "nccl"
"""The consumer family of NCCL's exports (the tuner plugin's config, ``NCCL_ALGO``): :attr:`Backend.feeds`."""
OMPI_EXPORTS = "ompi"
"""The consumer family of Open MPI's exports (the coll/tuned rules file): :attr:`Backend.feeds`."""
NATIVE_VARIANT_PREFIXES = ("native:", "native@")
"""How a forced variant of a backend's own collective is spelt (``native:<algorithm>``, ``native@<N>ch``)."""


class Here(Protocol):
    """What a backend may ask about the machine it plans for.

    The runtime answers (``collbench.runtime.here.HERE``): backends sit below the runtime, so that the runtime,
    the models and the tuning all ask them, and the runtime is what talks to CUDA, NCCL and Open MPI's tools.
    Every answer is looked up when asked (nothing is cached here), so tests replace the runtime's functions.
    """

    def gpus(self) -> int:
        """CUDA devices torch sees (0 without CUDA)."""
        ...

    def check_nccl_usable(self, local_ranks: int) -> None:
        """Raise BackendUnavailableError where NCCL cannot run ``local_ranks`` ranks here."""
        ...

    def nccl_version(self) -> str:
        """NCCL's version as torch reports it (``2.21.5``), empty when unknown."""
        ...

    def job_shape(self, ranks: int | None) -> tuple[int, int]:
        """(world size, nodes): a launcher's job's, else ``ranks`` (1 when None) on this one node."""
        ...

    def environ(self, name: str, default: str) -> str:
        """An environment variable of this process."""
        ...

    def ompi_algorithms(self) -> dict[str, tuple[OmpiAlgorithm, ...]]:
        """What this Open MPI's coll/tuned can be forced to run, per collective (from its ``ompi_info``)."""
        ...

    def check_mpi_tools(self) -> None:
        """Raise BackendUnavailableError where Open MPI's tools (mpicc, mpirun, ompi_info) are missing."""
        ...

    def check_mpi_world_size(self, world_size: int | None) -> int:
        """The world size an mpirun job starts; ConfigError for one it cannot."""
        ...


class SweepOptions(Protocol):
    """The sweep options a backend reads (``collbench.runtime.sweep.plan.SweepConfig`` has them)."""

    @property
    def world_size(self) -> int | None: ...
    @property
    def algos(self) -> tuple[str, ...]: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def cuda_graph(self) -> bool: ...


class Backend(ABC):
    """One backend's answers. One subclass per module of ``collbench/backends/``, one instance in the registry."""

    name: ClassVar[str]
    """What ``--backend`` and the rows' ``backend`` field call it."""
    library: ClassVar[str]
    """The library's name in a sentence (``Open MPI``)."""
    own_choices: ClassVar[str] = ""
    """What a tune over it chooses among of the library's own, in a sentence (``Open MPI's own coll/tuned
    algorithms``): what its exports' rules say, and what another backend's profile does not."""
    torch_backend: ClassVar[str | None]
    """torch.distributed's name for it, where collbench's own ranks run on it; None where a harness of the
    library's own measures its collectives under its own launcher (:attr:`sweep_runner`)."""
    sweep_runner: ClassVar[str | None] = None
    """``module:function`` measuring a whole ``SweepJob`` under the library's own launcher (it takes the job
    and a progress callback and returns the rows); None: collbench's ranks (``runtime/sweep/worker.py``)."""
    on_gpu: ClassVar[bool] = False
    """Whether its ranks each own a GPU (rows then describe the GPU machine, memory is the devices')."""
    places_cpu_ranks: ClassVar[bool] = False
    """Whether collbench pins its CPU ranks to cores and raises their priority (a harness with a launcher
    of its own places its ranks itself)."""
    in_place_every_op: ClassVar[bool] = False
    """Whether its calls have an in-place form for every op, and time a barrier's two forms apart (MPI's
    ``MPI_IN_PLACE``); torch.distributed's all_to_all_single and send/recv take two buffers."""
    runs_own_algorithms: ClassVar[bool] = True
    """Whether collbench's own schedules run on it (over its point-to-point calls)."""
    serial_issue: ClassVar[bool] = True
    """Whether one thread must issue all of a process group's operations, collectives and point-to-point
    alike, so that the DDP hook queues native buckets behind its schedules' thread (NCCL; assumed for a
    backend that does not say otherwise)."""
    premultiplied_avg: ClassVar[bool] = False
    """Whether its own average multiplies each input by 1/n before summing (NCCL), so that its result is
    checked within that rounding rather than exactly."""
    feeds: ClassVar[frozenset[str]] = frozenset()
    """The consumer families (``nccl``, ``ompi``) whose exports choose among this backend's own
    algorithms: a profile measured over it feeds them without ``--from-other-backend``."""
    native_formula: ClassVar[bool] = False
    barrier_as_all_reduce: ClassVar[bool] = False
    """Whether torch's barrier on it is a one-element all-reduce on the rank's device (ProcessGroupNCCL's,
    torch's dist.barrier docs), so that its native barrier is timed as that all-reduce, without the host wait."""
    """Whether collbench knows how its ``native`` choice is built (NCCL's tuning model), so that a fit of
    ``native`` may be priced at another shape (``models/native_structure.py``)."""

    def __repr__(self) -> str:
        return f"<backend {self.name}>"

    @abstractmethod
    def unusable_reason(self, local_ranks: int, here: Here) -> str | None:
        """Why it cannot run ``local_ranks`` ranks here (one line); None when it can. May raise
        BackendUnavailableError with a more specific line."""

    def check_usable(self, local_ranks: int, here: Here) -> None:
        """Raise BackendUnavailableError (one line) where it cannot run here."""
        from collbench.errors import BackendUnavailableError

        reason = self.unusable_reason(local_ranks, here)
        if reason is not None:
            raise BackendUnavailableError(reason)

    def chosen_by_auto(self, local_ranks: int, here: Here) -> bool:
        """Whether ``--backend auto`` picks it for ``local_ranks`` ranks here (the registry asks in its order)."""
        return False

    def comm_shape(self, world_size: int, nodes: int, here: Here) -> CommShape:
        """The communicator its collectives see on ``world_size`` ranks over ``nodes`` nodes (a launcher's job:
        ``here.job_shape``): with CollNet where NCCL has it enabled, never elsewhere."""
        return CommShape(world_size=world_size, nodes=nodes)

    def check_sweep(self, options: SweepOptions, dtype: str, redop: str, here: Here) -> None:
        """Raise ConfigError for an option this backend cannot honour (one line each)."""
        if options.cuda_graph and not self.on_gpu:
            # 'sweep --cuda-graph' on a host without GPUs measured gloo's CPU ranks as ever, without a word.
            raise ConfigError(
                f"--cuda-graph captures GPU work; {self.library}'s ranks run on the CPU (it times NCCL's native "
                "collectives on GPUs)"
            )

    def sweep_algos(self, options: SweepOptions, ops: list[Op], skipped: list[str], here: Here) -> dict[Op, list[str]]:
        """For each op, the algorithms a sweep of ``options.algos`` runs on this backend; a line in ``skipped``
        for each left out. Raises UnknownNameError, NotApplicableError, ConfigError."""
        return own_algos(self, options, ops, skipped, here)

    def forced_variants(
        self,
        options: SweepOptions,
        key: str,
        ops: list[Op],
        per_op: dict[Op, list[str]],
        skipped: list[str],
        here: Here,
    ) -> None:
        """Add the forced variant ``key`` (``native:...``) to the ops it runs for; ConfigError where none exist."""
        what = "a channel count (@<N>ch, NCCL's channels)" if "@" in key else "an NCCL algorithm"
        raise CommandLineError(f"{key} forces {what}; it needs --backend nccl")

    def tune_variants(self, ops: Sequence[str], shape: CommShape, here: Here) -> tuple[str, ...]:
        """The forced variants of its own collective a tune measures for ``ops`` on ``shape`` (none here)."""
        return ()

    def tune_candidates(
        self, ops: Sequence[str], own: tuple[str, ...], shape: CommShape, here: Here
    ) -> tuple[str, ...]:
        """What a tune of ``ops`` chooses among: ``own`` (collbench's algorithms for them, and ``native``)
        and the forced variants of its own collective (:meth:`tune_variants`), once each."""
        return own + tuple(n for n in self.tune_variants(ops, shape, here) if n not in own)

    def native_notes(self, op: Op | None, world_size: int) -> list[str]:
        """What a sweep says about its ``native`` points: of the whole sweep (``op`` None), else of ``op``'s."""
        return []

    def foreign_native(self, algo: str) -> str | None:
        """Why a profile rule of this backend naming ``algo`` means nothing to it; None when it may."""
        return None

    def forced_problem(self, algo: str) -> str | None:
        """Whether ``algo`` (``native:...``, ``native@...``) names a variant of this library's own collective it
        can be forced to run, as rows and profile rules name it: None when it does; else why not in one line,
        empty where the library has nothing to say of the name (it forces nothing spelt that way)."""
        return ""

    def version(self, here: Here) -> str:
        """The library's version the rows record (empty when the runtime says nothing)."""
        return ""


NATIVE = "native"
NO_TORCH_SCAN = "torch.distributed has no scan (native is MPI_Scan/MPI_Exscan under --backend mpi or mpich)"


def _runs(algo: str, op: Op) -> bool:
    """Whether ``algo`` can run ``op`` on gloo or NCCL: everything but native where torch has no call."""
    return algo != NATIVE or op.spec.torch_native


def skip_note(op: str, algos: Sequence[str]) -> str:
    """The note for ``algos`` named for ``op`` that do not implement it (parse_skip_note reads it)."""
    return f"{op}: {', '.join(algos)} {'does' if len(algos) == 1 else 'do'} not implement it; skipped"


_SKIP_NOTE = re.compile(r"(?P<op>[\w-]+): (?P<algos>.+) (?:does|do) not implement it; skipped")


_REFUSED_NOTE = re.compile(r"(?P<what>.+ cannot run it on \d+ ranks) \(.*\); skipped")


def note_said(text: str) -> str:
    """What a note says, for saying it once: a library's refusal of a forced algorithm (the MPI sweeps'
    ``ALGO OPS: MPICH cannot run it on N ranks (WHY); skipped``) without its reason, which differs from
    one round of a tune to the next for the same refusal (MPICH's 'Failure during collective' in one,
    its job ended with exit code 15 in the next); any other note whole."""
    found = _REFUSED_NOTE.fullmatch(text)
    return text if found is None else found["what"]


def parse_skip_note(text: str) -> tuple[str, list[str]] | None:
    """(op, algorithms) of a skip_note, or None for any other note: a tune sweeps in several parts and
    rounds, each with its own skip notes, and says each op's once (cli/tune.py)."""
    found = _SKIP_NOTE.fullmatch(text)
    return None if found is None else (found["op"], found["algos"].split(", "))


def own_algos(
    backend: Backend, options: SweepOptions, ops: list[Op], skipped: list[str], here: Here
) -> dict[Op, list[str]]:
    """For each op, collbench's algorithms (``all``: every registered one that applies, in the registry's
    order) and the backend's forced variants (:meth:`Backend.forced_variants`).

    Raises UnknownNameError for an unknown name, NotApplicableError for one that does none of the ops, or
    when nothing is left to run.
    """
    per_op: dict[Op, list[str]] = {op: [] for op in ops}
    lacking: dict[Op, list[str]] = {op: [] for op in ops}
    no_native = [op for op in ops if not op.spec.torch_native]
    for name in options.algos:
        key = name.strip().lower()
        if key == "all":
            for op in ops:
                for algo in algorithm_names():
                    if algo not in per_op[op] and get_algorithm(algo).supports(op) and _runs(algo, op):
                        per_op[op].append(algo)
            continue
        if key.startswith(NATIVE_VARIANT_PREFIXES):
            backend.forced_variants(options, key, ops, per_op, skipped, here)
            continue
        spec = get_algorithm(key)
        if not any(spec.supports(op) for op in ops):
            does = ", ".join(op.value for op in Op if spec.supports(op))
            raise AlgorithmForNoOpError(f"algorithm {spec.name} does none of the ops asked for; it does: {does}")
        for op in ops:
            if spec.supports(op) and _runs(spec.name, op) and spec.name not in per_op[op]:
                per_op[op].append(spec.name)
            elif not spec.supports(op) and spec.name not in lacking[op]:
                lacking[op].append(spec.name)
    # One line per op, naming it first (a tune names every algorithm for every op it asks: a line per
    # algorithm was 26 lines for six ops).
    skipped.extend(skip_note(op.value, names) for op, names in lacking.items() if names)
    asked_native = any(k.strip().lower() in ("all", NATIVE) for k in options.algos)
    if no_native and asked_native:
        which = ", ".join(op.value for op in no_native)
        skipped.append(f"{NATIVE} {which}: {NO_TORCH_SCAN}; skipped")
    if skipped and not any(per_op.values()):
        raise NotApplicableError("nothing to run: " + " | ".join(r.removesuffix("; skipped") for r in skipped))
    return per_op
