"""Element-wise reductions the executor applies when a receive lands: ``dst = dst (op) src``.

``avg`` reduces as ``sum`` here; the executor divides by the world size once, at the end, so that
the division happens in one place and rounds once (see ``executor.finish_avg``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

REDUCING_OPS = ("sum", "prod", "min", "max", "avg")


def reduce_many(dst: torch.Tensor, sources: Sequence[torch.Tensor], redop: str) -> None:
    """Combine every tensor of ``sources`` into ``dst`` in place, in order.

    ``redop`` is one of sum, prod, min, max, avg (avg sums). All tensors have ``dst``'s shape and
    dtype. On CUDA tensors the fused kernel of ``collbench.runtime.cuda.kernels`` runs when it is
    available (it answers False when it is not built here); torch's own ops otherwise.

    Raises ValueError for an unknown reduction.
    """
    if redop not in REDUCING_OPS:
        raise ValueError(f"unknown reduction {redop!r}; known: {', '.join(REDUCING_OPS)}")
    if not sources:
        return
    if dst.is_cuda:
        # Imported here only: the CUDA module compiles kernels and must never load on CPU runs.
        from collbench.runtime.cuda.kernels import reduce_many_cuda

        if reduce_many_cuda(dst, list(sources), redop):
            return
    for src in sources:
        if redop in ("sum", "avg"):
            dst.add_(src)
        elif redop == "prod":
            dst.mul_(src)
        elif redop == "min":
            torch.minimum(dst, src, out=dst)
        else:
            torch.maximum(dst, src, out=dst)
