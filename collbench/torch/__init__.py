"""The API for training jobs: run the profile's choice inside a user's torch.distributed job.

::

    import collbench, collbench.torch
    profile = collbench.Profile.load("collbench-profile.yaml")
    collbench.torch.all_reduce(tensor, profile=profile)            # in place, like dist.all_reduce
    ddp_model.register_comm_hook(None, collbench.torch.ddp_comm_hook(profile))
    collbench.torch.all_to_all_single(output, input, profile=profile)  # as dist.all_to_all_single
    collbench.torch.scatter(tensor, scatter_list, profile=profile, src=0)  # as dist.scatter
    collbench.torch.gather(tensor, gather_list, profile=profile, dst=0)    # as dist.gather
    collbench.torch.ring_shift(output, input, profile=profile)  # to the next rank, from the previous
    collbench.torch.barrier(profile=profile)
    collbench.torch.scan(tensor, profile=profile, op="sum", exclusive=False)  # a prefix, in place

Per call, the profile's rule for all-reduce at the tensor's size in bytes, in the rule set of the
process group's shape (its size, on the nodes its ranks report), says what runs: ``native``
is ``torch.distributed.all_reduce`` (the backend's own collective); any other algorithm is
collbench's schedule for it, built for the group's size and run by collbench's executor over the
group's point-to-point transport, on the layout (ring orders, trees) the profile recorded. The other
ops do the same with their own rules (all-to-all, scatter, gather, sendrecv, barrier), sized as
nccl-tests counts them: the whole per-rank buffer, the root's n blocks, 0 bytes for barrier. Scan and
exscan have no ``native`` here: torch.distributed has no scan (native scan is ``MPI_Scan``, measured
under ``--backend mpi``), so their rules name collbench's schedules, and a native rule is refused.

The DDP hook overlaps with backward as DDP's default hook does: it hands the bucket's all-reduce off
and returns a future that completes when it is done. A native rule is torch's own ``allreduce_hook``
(``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``: the backend's asynchronous work's
future, no copy); collbench's schedules run on one worker thread per hook, bucket after bucket in the
order DDP hands them over. Once that thread exists, on a backend whose operations must come from one
thread (NCCL: its user guide, "Thread Safety", forbids issuing one communicator's operations from
several threads in parallel, and calls it unsafe for two communicators of one device too), native
buckets go to it as well, in the same queue: one thread issuing them in DDP's bucket order keeps every
rank's order alike, where a separate group for the schedules would not. On gloo they stay torch's own
hook (``Backend.serial_issue``). Where the profile is native at every size, :func:`ddp_comm_hook` is
torch's ``allreduce_hook`` itself, and :func:`register_comm_hook` registers nothing where it is native
at every size the model's buckets have; both say so once. The hook decides once per bucket shape
(elements, dtype, device, group); compiled plans are the process's (``runtime/executor/plan_cache.py``):
a shape met before by any hook or call builds nothing.

Every call runs outside autograd, as c10d's collectives do: a parameter (a leaf that requires grad) is
written in place and stays a leaf, as after ``dist.all_reduce(param)``, and no output takes a gradient from an
input. (gloo's own gather into parameters raises, its copy running under autograd; collbench's writes them.)
"""

from __future__ import annotations

from collbench.torch.collectives import all_reduce, all_to_all_single, barrier, gather, ring_shift, scan, scatter
from collbench.torch.ddp import CommHook, DDPDefaultPath, ddp_comm_hook, register_comm_hook
from collbench.torch.rules import GroupShape, LayoutNotHeld, OtherBackend

# The API users call as collbench.torch.NAME (its modules are how it is built, not what it offers).
__all__ = [
    "CommHook",
    "DDPDefaultPath",
    "GroupShape",
    "LayoutNotHeld",
    "OtherBackend",
    "all_reduce",
    "all_to_all_single",
    "barrier",
    "ddp_comm_hook",
    "gather",
    "register_comm_hook",
    "ring_shift",
    "scan",
    "scatter",
]
