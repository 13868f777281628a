"""The backends collectives run on, one module each, behind one protocol (:class:`base.Backend`).

``BACKENDS`` below is the one list of them; every other module asks a backend (``get_backend(name)``,
``backend_named(name)`` for a name read from a file) rather than comparing its name. A backend says its
name, whether it can run here and why not, the communicator its collectives see, the variants of its
own collective it can be forced to run per op, how a sweep runs on it (collbench's ranks over
torch.distributed, or a harness under the library's own launcher: ``sweep_runner``), what the rows it
measures record (:mod:`collbench.results.measured` builds every measured row, above), which
``native:<...>`` names its library runs (``forced_problem``), and which exports its profiles feed
(``feeds``).

Where this sits: above the libraries' facts (NCCL's, Open MPI's, MPICH's) and the schedules (which it
uses), below the result records, the runtime, the importers, the models, the profile and the tuning
(which all ask it: a row's or a rule's forced ``native:<...>`` name is known when some backend's library
runs it, :func:`forced_problem`). What it needs to know about this machine (GPUs, NCCL's version, Open
MPI's algorithms, a launcher's job) it asks through :class:`base.Here`, which the runtime answers
(``collbench.runtime.here.HERE``).

Adding a backend (MPICH, say):

1. ``collbench/backends/<name>.py``: a subclass of :class:`base.Backend` answering each question (its
   docstrings say what each means) and one instance of it; add the instance to ``BACKENDS`` here.
2. Its sweep: a ``sweep_runner`` (``module:function``) measuring a ``SweepJob`` under its launcher,
   building rows with :func:`collbench.results.measured.measured_row`; or a ``torch_backend`` name, and
   collbench's ranks run on it.
3. Its export, beside the others, choosing among what the backend ``feeds``; and the tests of both.
4. Its name in ``collbench/profile/schema.json``'s backend list (``profiles/schema.json`` links to it), so
   that its profiles load; ``tests/unit/test_backends.py`` holds that list to ``BACKENDS``.
"""

from __future__ import annotations

from collbench.backends.base import Backend, Here
from collbench.backends.gloo import GLOO
from collbench.backends.mpi import MPI
from collbench.backends.mpich import MPICH
from collbench.backends.nccl import NCCL
from collbench.errors import UnknownNameError

BACKENDS: tuple[Backend, ...] = (GLOO, NCCL, MPI, MPICH)
"""Every backend (``--backend auto`` asks those on GPUs first: :meth:`Backend.chosen_by_auto`)."""
AUTO = "auto"
"""``--backend auto``: the first backend of :data:`BACKENDS` that says it is chosen here, NCCL over gloo."""
RCCL = "rccl"
"""The backend of rows read from rccl-tests' logs: AMD's RCCL, whose choice of algorithm is its own."""
IMPORTED_GPU_LIBRARIES = (RCCL,)
"""Rows imported from the logs of a GPU library that is not a backend here (rccl-tests' logs): measured on
GPUs all the same."""


def backend_names() -> tuple[str, ...]:
    """Every backend's name, in the registry's order."""
    return tuple(b.name for b in BACKENDS)


def torch_backend_names() -> tuple[str, ...]:
    """The backends collbench's own ranks run on (torch.distributed's), and ``auto``."""
    return (*(b.name for b in BACKENDS if b.torch_backend is not None), AUTO)


def backend_named(name: str) -> Backend | None:
    """The backend called ``name`` (any case, spaces around it ignored); None for a name that is not one
    (a row's or a profile's backend read from elsewhere: ``rccl``, or torch's ``mpi``/``ucc``)."""
    key = name.strip().lower()
    return next((b for b in BACKENDS if b.name == key), None)


def get_backend(name: str) -> Backend:
    """The backend called ``name``; UnknownNameError listing the known ones otherwise."""
    found = backend_named(name)
    if found is None:
        raise UnknownNameError("backend", name, list(backend_names()))
    return found


def for_torch(torch_name: str) -> Backend | None:
    """The backend torch.distributed calls ``torch_name`` (``dist.get_backend(group)``); None for another."""
    return next((b for b in BACKENDS if b.torch_backend == torch_name.strip().lower()), None)


def measured_on_gpus(name: str) -> bool:
    """Whether rows of backend ``name`` were measured on GPUs (a backend's, or an imported GPU library's)."""
    found = backend_named(name)
    return found.on_gpu if found is not None else name.strip().lower() in IMPORTED_GPU_LIBRARIES


def feeds(name: str, consumer: str) -> bool:
    """Whether a profile measured over backend ``name`` chose among ``consumer``'s own algorithms."""
    found = backend_named(name)
    return found is not None and consumer in found.feeds


def forced_problem(algo: str) -> str | None:
    """Whether ``algo`` (``native:...``) names a variant some backend's library can be forced to run (an Open
    MPI or MPICH algorithm, an NCCL algorithm/protocol/channels): None when one can; else why not, in the
    words of the backend that has something to say of the name."""
    problems = [b.forced_problem(algo) for b in BACKENDS]
    if None in problems:
        return None
    return next((p for p in problems if p), f"no backend forces {algo!r}")


def resolve(name: str, local_ranks: int, here: Here, *, torch_only: bool = False) -> Backend:
    """The backend ``--backend name`` runs ``local_ranks`` ranks on here, checked usable.

    ``auto`` is the first backend chosen by auto (NCCL where CUDA sees enough GPUs, else gloo).
    ``torch_only``: only those collbench's own ranks run on. Raises UnknownNameError for an unknown
    name and BackendUnavailableError for one that cannot run here.
    """
    key = name.strip().lower()
    known = torch_backend_names() if torch_only else (*backend_names(), AUTO)
    if key not in known:
        raise UnknownNameError("backend", name, list(known))
    if key == AUTO:
        # A GPU backend first; auto checks no more than whether the GPUs are there (NCCL's own check
        # runs in its ranks).
        ordered = sorted(BACKENDS, key=lambda b: not b.on_gpu)
        return next(b for b in ordered if b.chosen_by_auto(local_ranks, here))
    backend = get_backend(key)
    backend.check_usable(local_ranks, here)
    return backend


__all__ = [
    "AUTO",
    "BACKENDS",
    "Backend",
    "Here",
    "backend_named",
    "backend_names",
    "feeds",
    "for_torch",
    "forced_problem",
    "get_backend",
    "measured_on_gpus",
    "resolve",
    "torch_backend_names",
]
