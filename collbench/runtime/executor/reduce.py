"""Element-wise reductions the executor applies when a receive lands: ``dst = dst (op) src``.

``avg`` reduces as ``sum`` here; the executor divides by the world size once, at the end, so that
the division happens in one place and rounds once (:func:`divide_exactly`, called by
``schedule_runner.finish_avg``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from collbench.errors import ConfigError

REDUCING_OPS = ("sum", "prod", "min", "max", "avg")
_EXACT_INTEGERS: dict[torch.dtype, int] = {
    torch.float16: 1 << 11,
    torch.bfloat16: 1 << 8,
    torch.float32: 1 << 24,
    torch.float64: 1 << 53,
}
"""The largest integer up to which every integer is exact in each floating dtype (its significand bits)."""


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


def divide_exactly(values: torch.Tensor, divisor: int) -> None:
    """``values /= divisor`` in place, correctly rounded (one rounding of the exact quotient) on every device.

    Why not ``values.div_(divisor)``: on CUDA, torch divides by a Python scalar as a multiplication by
    its reciprocal (``div_true_kernel_cuda`` in aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu: "if
    the second operand is a CPU scalar, compute a * reciprocal(b) ... may lose one bit of precision"),
    two roundings that for a divisor other than a power of two can land one ulp from the quotient
    (float32: 5 / 3, 9 / 5, 7 / 6, 3 / 7). Divided by a tensor on the same device, torch runs its
    ``DivFunctor`` (``a / b``: IEEE division in float32 and float64; float16 and bfloat16 divide in
    float32 and round again, which stays correctly rounded because float32 has at least twice their
    significand bits plus two, 24 >= 2 * 11 + 2). On the CPU, torch divides by a scalar already
    (``div_true_kernel`` in aten/src/ATen/native/cpu/BinaryOpsKernel.cpp).

    ``divisor`` must be at least 1; ``values`` a floating tensor. Raises ValueError otherwise.
    """
    if divisor < 1:
        raise ValueError(f"divisor must be at least 1, got {divisor}")
    if not values.dtype.is_floating_point:
        raise ValueError(f"divide_exactly needs a floating dtype, got {values.dtype}")
    if divisor == 1 or values.numel() == 0:
        return
    if values.device.type == "cpu":
        values.div_(divisor)
        return
    exact = _EXACT_INTEGERS.get(values.dtype, 0)
    if divisor <= exact:
        # The tensor takes values' dtype (the iterator casts a divisor of another dtype to it), which
        # holds the divisor exactly up to ``exact``.
        values.div_(values.new_full((), divisor))
        return
    # A divisor the dtype cannot hold (more than 256 ranks in bfloat16): divide in float32 and round
    # once to the dtype, as above.
    wide = values.float()
    wide.div_(wide.new_full((), divisor))
    values.copy_(wide)


NATIVE_REDOPS = {
    "sum": dist.ReduceOp.SUM,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "prod": dist.ReduceOp.PRODUCT,
}
"""torch.distributed's reduction for each of collbench's that the backend's own collective runs (avg is a
sum and a division: gloo has no AVG)."""


# torch.distributed's names (ReduceOp.RedOpType's members) for collbench's: PRODUCT is prod.
_TORCH_REDOPS = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "avg"}


def redop_name(op: object) -> str:
    """collbench's name for a reduction given as collbench names it (``"max"``) or as torch.distributed
    does: ``dist.ReduceOp.MAX`` (a ``ReduceOp.RedOpType`` member, with a ``name``) or a ``dist.ReduceOp``
    built from one (no name; it compares equal to its member). Raises ConfigError for another value,
    and for torch's reductions collbench has no schedule for (BAND, BOR, BXOR, PREMUL_SUM)."""
    known = ", ".join([*NATIVE_REDOPS, "avg"])
    if isinstance(op, str):
        key = op.strip().lower()
        if key not in (*NATIVE_REDOPS, "avg"):
            raise ConfigError(f"unknown reduction {op!r}; known: {known} (or torch's ReduceOp of one)")
        return key
    name = getattr(op, "name", None)
    if not isinstance(name, str) and isinstance(op, dist.ReduceOp):
        name = next((n for n, member in dist.ReduceOp.RedOpType.__members__.items() if op == member), None)
    if isinstance(name, str) and name in _TORCH_REDOPS:
        return _TORCH_REDOPS[name]
    if isinstance(name, str) and name in dist.ReduceOp.RedOpType.__members__:
        raise ConfigError(f"reduction ReduceOp.{name} is not one collbench runs; it runs {known}")
    raise ConfigError(f"unknown reduction {op!r}; known: {known} (or torch's ReduceOp of one)")
