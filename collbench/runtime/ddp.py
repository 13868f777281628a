"""What the DDP hook (``collbench.torch``) needs of DistributedDataParallel and of threads, below the profile.

* :func:`bucket_bytes`: the sizes of the gradient buckets a DDP model hands its communication hook,
  computed as DDP computes them, so that a profile's rules can be looked up for them before training.
* :class:`ScheduleWorker`: one thread running a hook's buckets in the order they were handed over,
  stopped and joined at the interpreter's exit.
* :func:`group_nodes`: the nodes a process group's ranks run on, which pick the profile's rule set;
  :func:`group_device`: where the group's backend takes tensors; :func:`other_backend`: what to say
  where it is not the backend the profile was measured over.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from collbench.backends import for_torch
from collbench.runtime.launch import membership

Job = tuple[Callable[[torch.Tensor], None], torch.Tensor, "torch.futures.Future[torch.Tensor]", Any]
"""One bucket for the worker: what all-reduces it (its compiled schedule, or the backend's own
all-reduce), its buffer, the future to complete, and the CUDA stream the buffer was written on (None on CPU)."""

STOP_JOIN_S = 10.0
"""How long stopping a worker waits for its thread to end: ample for a thread that has completed its
last bucket (it only has to leave torch's call and read the end of its queue), bounded so that a
schedule stuck on a dead peer does not hold the interpreter's exit."""


def bucket_bytes(model: torch.nn.parallel.DistributedDataParallel) -> tuple[int, ...]:
    """The sizes in bytes of the buckets ``model`` hands its communication hook, smallest first.

    DDP assigns gradients to buckets with ``dist._compute_bucket_assignment_by_size`` (grouped by dtype
    and device, a bucket closed once it reaches its cap, no parameter split) twice: for its first
    backward over the parameters in their order (one bucket of everything unless
    ``find_unused_parameters`` without a static graph), then once more after it, in the order the
    gradients became ready, with a first bucket of 1 MiB under DDP's default cap
    (``torch/nn/parallel/distributed.py``: ``BucketCapacityConfig.compute_bucket_size_limits``, or
    ``_DEFAULT_FIRST_BUCKET_BYTES`` before it; ``Reducer::rebuild_buckets``). The ready order is taken,
    as DDP takes it for its initial buckets, to be the parameters' reverse: a model whose gradients
    come in another order gets other buckets after its first step.
    """
    ignored = set(getattr(model, "parameters_to_ignore", ()))
    params = [p for name, p in model.module.named_parameters() if p.requires_grad and name not in ignored]
    if not params:
        return ()
    static, unused = bool(getattr(model, "static_graph", False)), bool(model.find_unused_parameters)
    cap = int(model.bucket_bytes_cap)
    config = getattr(model, "_bucket_config", None)
    if config is not None:
        initial, rebuilding = config.compute_bucket_size_limits(static_graph=static, find_unused_parameters=unused)
        rebuilding = rebuilding or [config.first_bucket_bytes_cap, config.bucket_bytes_cap]
    else:
        first = dist._DEFAULT_FIRST_BUCKET_BYTES
        default_cap = bool(getattr(model, "bucket_bytes_cap_default", False))
        initial = [sys.maxsize] if static or not unused else ([first, cap] if default_cap else [cap])
        rebuilding = [first, cap]
    sizes: set[int] = set()
    for order, limits in ((params, initial), (params[::-1], rebuilding)):
        buckets, _ = dist._compute_bucket_assignment_by_size(order, [int(n) for n in limits])
        sizes.update(sum(order[i].numel() * order[i].element_size() for i in bucket) for bucket in buckets)
    return tuple(sorted(sizes))


def _run_jobs(jobs: queue.SimpleQueue[Job | None]) -> None:
    """The worker thread's loop: run each bucket's all-reduce in turn and complete its future.

    After one fails, every later bucket fails with that error too: the peers' point-to-point messages
    no longer line up with this rank's, so running the next schedule could only hang or pair the wrong
    data.
    """
    failure: BaseException | None = None
    while (job := jobs.get()) is not None:
        reduce, buffer, future, stream = job
        if failure is not None:
            # torch annotates set_exception's argument as the future's value type; it takes an exception.
            future.set_exception(RuntimeError(f"an earlier bucket's all-reduce failed: {failure}"))  # type: ignore[arg-type]
            continue
        try:
            # A thread's current CUDA device and stream are its own: run where the bucket was written,
            # so the schedule's kernels follow the backward's writes into the bucket.
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                reduce(buffer)
        except BaseException as exc:
            # Handed to DDP through the future, which raises it in backward on this rank.
            failure = exc
            future.set_exception(exc)  # type: ignore[arg-type]
        else:
            future.set_result(buffer)


def stop_worker(jobs: queue.SimpleQueue[Job | None], thread: threading.Thread) -> None:
    """End a worker's loop and wait, at most :data:`STOP_JOIN_S`, for its thread to end."""
    jobs.put(None)
    if thread is not threading.current_thread():
        thread.join(STOP_JOIN_S)


class ScheduleWorker:
    """One daemon thread that runs the buckets a hook hands it, in order.

    Every rank's DDP hands buckets to its hook in the same order (bucket index order), so one thread
    per hook runs the same sequence of schedules on every rank: their point-to-point messages pair up
    as they do in a sweep. The thread is stopped and joined when the worker is garbage-collected and
    at the interpreter's exit, before finalisation (``weakref.finalize`` runs then, as an ``atexit``
    function does). Without that join a training job died at its end now and then (exit -6,
    "terminate called without an active exception"): completing the last bucket's future releases
    the GIL inside torch's C++ (``Future.set_result`` wakes DDP's waiting thread with the GIL
    released); the main thread could then run on to the interpreter's finalisation, and a daemon
    thread that takes the GIL after that is ended by CPython with ``pthread_exit``, whose unwinding
    through pybind11's GIL guard (a C++ destructor, which may not throw) calls ``std::terminate``.
    The thread stays a daemon so that a schedule blocked on a dead peer holds the exit no longer
    than :data:`STOP_JOIN_S`.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=_run_jobs, args=(self._jobs,), name="collbench-ddp-hook", daemon=True)
        self.thread.start()
        weakref.finalize(self, stop_worker, self._jobs, self.thread)

    def submit(
        self, reduce: Callable[[torch.Tensor], None], buffer: torch.Tensor
    ) -> torch.futures.Future[torch.Tensor]:
        """Queue ``reduce(buffer)`` after every bucket submitted before; its future completes with ``buffer``."""
        future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        stream = torch.cuda.current_stream(buffer.device) if buffer.device.type == "cuda" else None
        self._jobs.put((reduce, buffer, future, stream))
        return future


def group_device(group: Any) -> torch.device:
    """Where ``group``'s backend takes tensors: the current CUDA device on NCCL, else the CPU."""
    backend = for_torch(str(dist.get_backend(group)))
    on_gpu = backend is not None and backend.on_gpu and torch.cuda.is_available()
    return torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")


def group_nodes(group: Any) -> tuple[int, bool]:
    """The nodes ``group``'s ranks run on (None: the default group), by the host name and boot id each
    reports (``launch/membership.py``), and whether this call gathered them: one all-gather of a
    fixed-width row per rank on the group's first ask (O(group size) bytes on every rank), none after.
    Every rank of the group must ask at the same point, as for any collective on it."""
    key = group if group is not None else dist.group.WORLD
    first = not membership.GROUPS.known(key)
    return membership.GROUPS.of(key, dist.get_world_size(group), group_device(group)).nodes, first


def other_backend(measured: str, group: Any) -> str:
    """A line where ``group`` runs another backend than ``measured`` (a profile's), else "": an Open MPI
    profile's rules ran in a gloo job without a word, 'native:recursive_doubling' calling gloo's all_reduce
    (the exports refuse to hand a rule to another implementation than the one measured unless asked)."""
    here = str(dist.get_backend(group))
    if measured in here.replace(",", ":").split(":"):  # 'gloo', or torch's 'cpu:gloo,cuda:nccl'
        return ""
    return (
        f"collbench: the profile was measured over {measured}, and this group runs {here}: its rules say which "
        f"algorithm was fastest over {measured}, not over {here} (a native rule, forced variant or not, calls "
        f"{here}'s own collective here); `collbench tune --backend {here}` measures this one"
    )
