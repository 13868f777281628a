"""NCCL's own collectives in a sweep: which points CUDA graphs time, and a communicator per variant.

Split from worker.py, which runs the points; these two decide what the native points run on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from collbench.nccl.variants import is_native, parse_native_variant
from collbench.schedules.ops import Op

GRAPHED_OPS: frozenset[Op] = frozenset({*(op for op in Op if op.spec.nccl_tuned), Op.BARRIER})
"""Ops whose native call ``--cuda-graph`` captures: NCCL's collectives (barrier's native on NCCL is a
one-element all-reduce, runtime/sweep/native_calls.py). The grouped send/recv torch runs for
all-to-all, scatter, gather and send/recv is not verified under capture here: timed with events."""


def graph_ops_note(cuda_graph: bool, device: torch.device, ops: list[Op]) -> str:
    """A note on the ops whose native points ``--cuda-graph`` leaves out of graphs (see GRAPHED_OPS)."""
    if not cuda_graph or device.type != "cuda":
        return ""
    left = [op.value for op in Op if op in ops and op not in GRAPHED_OPS]
    if not left:
        return ""
    return (
        f"--cuda-graph: native {', '.join(left)} timed without CUDA graphs (torch runs them as grouped "
        "send/recv, whose capture is not verified); each sample is a round of iterations between CUDA events"
    )


def graph_policy(cuda_graph: bool, device: torch.device, algos: list[str]) -> tuple[set[str], str]:
    """Which algorithms ``--cuda-graph`` times inside CUDA graphs, and a note on those it does not.

    Graphs apply on CUDA devices only (``--cuda-graph`` is ignored on CPU, as before), and to the
    native algorithms only: collbench's own schedules post point-to-point batches and wait on them
    from the host step by step, and capturing those in a graph is not verified.
    """
    if not cuda_graph or device.type != "cuda":
        return set(), ""
    graphed = {a for a in algos if is_native(a)}
    own = sorted({a for a in algos if not is_native(a)})
    note = ""
    if own:
        note = (
            f"--cuda-graph: {', '.join(own)} timed without CUDA graphs (collbench's own schedules are "
            "driven step by step from the host); only native rows are graph launches"
        )
    return graphed, note


class NativeGroups:
    """The NCCL process group of each native variant, made on first use and destroyed after its last.

    NCCL reads NCCL_ALGO/NCCL_PROTO when a communicator is made, so each forced variant needs a
    communicator of its own; plain ``native`` runs on the default group. ``algos`` is the algorithm of
    every point in the order they run, so that a group is destroyed as soon as no later point needs
    it (communicators hold GPU memory) and none is created twice. Every rank runs the same points in
    the same order, so the collective creation and destruction match across ranks.

    ``before_destroy`` runs before each group is destroyed: the sweep's graph timer releases the CUDA
    graph it captured on that group's communicator there (``CudaEventTimer.release``), since NCCL's
    teardown waits for graphs that still reference the communicator.
    """

    def __init__(self, algos: list[str], before_destroy: Callable[[], None] | None = None) -> None:
        self._before_destroy = before_destroy
        self._last_use = {algo: index for index, algo in enumerate(algos)}
        self._algos = algos
        self._open: dict[str, contextlib.ExitStack[Any]] = {}
        self._groups: dict[str, Any] = {}
        self.refused: set[str] = set()
        """Variants NCCL refused (on any rank): their later points are skipped on every rank."""

    def __enter__(self) -> NativeGroups:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            # The rank is failing and about to exit: destroying a communicator whose peer died can
            # hang (as the default group's can), so the process's exit releases them.
            return
        for algo in list(self._open):
            self._close(algo)

    def group(self, algo: str) -> Any:
        """The process group ``algo`` (``native`` or ``native:*``) runs on; None for the default group."""
        if algo == "native":
            return None
        if algo not in self._groups:
            # Imported here only: the NCCL module belongs to the GPU side.
            from collbench.runtime.cuda import nccl

            stack = contextlib.ExitStack()
            # Not kept when making it fails: a communicator NCCL refused is left to the process's exit.
            self._groups[algo] = stack.enter_context(nccl.variant_group(parse_native_variant(algo)))
            self._open[algo] = stack
        return self._groups[algo]

    def done_with(self, index: int) -> None:
        """Point ``index`` has run: destroy its algorithm's group if no later point uses it."""
        algo = self._algos[index]
        if self._last_use.get(algo) == index and algo in self._open:
            self._close(algo)

    def _close(self, algo: str) -> None:
        if self._before_destroy is not None:
            self._before_destroy()
        self._groups.pop(algo, None)
        self._open.pop(algo).close()
