"""collbench's CUDA reduction kernels (csrc/), built on first use as a torch extension, cached per user.

Two entry points, both asynchronous on the current CUDA stream like torch's own ops:

* :func:`reduce_many_cuda` is what ``collbench.runtime.executor.reduce.reduce_many`` calls on CUDA tensors, with
  the same meaning as its torch loop: ``dst = dst (op) sources[0] (op) sources[1] ...`` in one pass
  (dst's old content is the first input; ``avg`` sums, as there, the executor divides once at the
  end). A tree's reduce step (local data plus two children) is one kernel launch with three inputs.
* :func:`reduce_cuda` is the kernel's own form: ``dst = op(sources)`` (dst's old content not read unless
  dst is itself one of ``sources``; ``avg`` divides by ``len(sources)``).

Both return False, so that the caller falls back to torch's ops, when the extension cannot be built or
loaded here (no CUDA toolkit, a toolkit of another CUDA major version, no compiler, no ninja: said
once per process, naming the cause and the fix; see ``kernel_build``), when
``COLLBENCH_NO_CUDA_KERNELS=1`` is set, and when the tensors are outside what the kernels take (a
dtype other than float32, float16, bfloat16; non-contiguous tensors; tensors not all on one CUDA
device with one dtype and one element count). Partial overlap between dst and a source is a bug of
the caller and raises RuntimeError.

Build: ``torch.utils.cpp_extension.load`` compiles ``csrc/reduce_kernels.cu`` and
``csrc/reduce_binding.cpp`` (shipped inside the package as ``collbench/csrc``) for the GPUs present
(or ``TORCH_CUDA_ARCH_LIST``), into ``$COLLBENCH_CACHE_DIR`` or ``~/.cache/collbench`` (a directory per
torch and CUDA version; torch rebuilds when the sources change and locks the directory, so ranks that
start together build once; a lock left by a killed build is removed, see ``kernel_build``).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import torch

from collbench.fileio import csrc_dir
from collbench.results.fields import CUDA_KERNEL, TORCH_OPS
from collbench.runtime.cuda import kernel_build

log = logging.getLogger(__name__)

REDOP_CODES: dict[str, int] = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4}
"""The C API's numbering (csrc/collbench_reduce.h, enum cbRedOp)."""
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EXTENSION_NAME = "collbench_reduce_ext"
SOURCE_FILES = ("reduce_kernels.cu", "reduce_binding.cpp")


def cache_dir() -> Path:
    """Where built extensions live, one directory per torch, CUDA and Python version.

    Under ``$COLLBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/collbench``, else ``~/.cache/collbench``.
    """
    root = os.environ.get("COLLBENCH_CACHE_DIR")
    if root:
        base = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "collbench"
    torch_tag = str(torch.__version__).replace("+", "_")
    cuda_tag = (torch.version.cuda or "nocuda").replace(".", "")
    py_tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return base / "torch_extensions" / f"torch{torch_tag}-cu{cuda_tag}-{py_tag}"


def kernels_disabled() -> bool:
    """Whether the user turned the kernels off (``COLLBENCH_NO_CUDA_KERNELS=1``)."""
    return os.environ.get("COLLBENCH_NO_CUDA_KERNELS", "").strip().lower() in ("1", "true", "yes")


def unavailable_reason() -> str | None:
    """Why the extension cannot be built here without trying (None: worth trying)."""
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build"
    sources = [csrc_dir() / name for name in SOURCE_FILES]
    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        return f"the CUDA sources are missing ({', '.join(missing)})"
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        return "no CUDA toolkit found (set CUDA_HOME to the directory holding bin/nvcc)"
    return None


def _load_module() -> ModuleType:
    from torch.utils import cpp_extension

    module: ModuleType = cpp_extension.load(
        name=EXTENSION_NAME,
        sources=[str(csrc_dir() / name) for name in SOURCE_FILES],
        extra_include_paths=[str(csrc_dir())],
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3", "-std=c++17"],
        build_directory=str(cache_dir()),
        verbose=False,
    )
    return module


def build_extension(say: kernel_build.Say) -> kernel_build.BuildResult:
    """Build (first time) and load the extension, saying what happens through ``say``; never raises.

    ``say`` hears, one line each: a stale build lock removed, a first build starting and how long it
    took, or why the kernels are not used and how to fix it (see ``kernel_build``).
    """
    reason = unavailable_reason()
    if reason is not None:
        return kernel_build.fallback(say, reason)
    from torch.utils import cpp_extension

    return kernel_build.build(
        cache_dir(),
        EXTENSION_NAME,
        _load_module,
        say,
        torch_cuda=torch.version.cuda,
        cuda_home=cpp_extension.CUDA_HOME,
        tools=kernel_build.find_build_tools(),
    )


@functools.cache
def load_extension() -> ModuleType | None:
    """The extension, built on first use; None when it cannot be, with its reasons as warnings (once per process)."""

    def warn(text: str) -> None:
        warnings.warn(text, RuntimeWarning, stacklevel=5)

    return build_extension(warn).module


def reduce_path(device: torch.device, dtype: torch.dtype) -> str:
    """Which path the executor's reductions take for tensors of ``dtype`` on ``device``.

    ``cuda-kernel`` where :func:`reduce_many_cuda` runs (CUDA, a kernel dtype, kernels not disabled
    and loaded), ``torch-ops`` otherwise (CPU, or the fallback). Loads the extension on CUDA.
    """
    if device.type != "cuda" or dtype not in KERNEL_DTYPES or kernels_disabled():
        return TORCH_OPS
    return CUDA_KERNEL if load_extension() is not None else TORCH_OPS


def _kernel_inputs_ok(dst: torch.Tensor, sources: Sequence[torch.Tensor]) -> bool:
    if not dst.is_cuda or dst.dtype not in KERNEL_DTYPES or not dst.is_contiguous():
        return False
    for s in sources:
        if s.device != dst.device or s.dtype != dst.dtype or s.numel() != dst.numel() or not s.is_contiguous():
            return False
    return True


def reduce_cuda(dst: torch.Tensor, sources: Sequence[torch.Tensor], redop: str) -> bool:
    """``dst = op(sources)`` elementwise, float32 accumulation, one rounding per 8 sources.

    ``redop`` in sum, prod, min, max, avg (mean of the sources). dst may be one of the sources (the
    same tensor memory) but must not partially overlap one. Returns False when the kernels cannot run
    this (see the module's docstring); raises ValueError for an unknown ``redop`` or no sources.
    """
    code = REDOP_CODES.get(redop)
    if code is None:
        raise ValueError(f"unknown reduction {redop!r}; known: {', '.join(REDOP_CODES)}")
    if not sources:
        raise ValueError("reduce_cuda needs at least one source")
    if kernels_disabled() or not _kernel_inputs_ok(dst, sources):
        return False
    ext = load_extension()
    if ext is None:
        return False
    if dst.numel() == 0:
        return True
    ext.reduce_many(dst, list(sources), code)
    return True


def reduce_many_cuda(dst: torch.Tensor, sources: Sequence[torch.Tensor], redop: str) -> bool:
    """``dst = dst (op) sources[0] (op) ...`` in one pass; the CUDA form of ``reduce.reduce_many``.

    ``avg`` sums (the executor divides by the world size once, at the end). Returns False when the
    kernels cannot run this (the caller then uses torch's ops); raises ValueError for an unknown
    ``redop``. With no sources there is nothing to do: True.
    """
    if redop not in REDOP_CODES:
        raise ValueError(f"unknown reduction {redop!r}; known: {', '.join(REDOP_CODES)}")
    if not sources:
        return True
    return reduce_cuda(dst, [dst, *sources], "sum" if redop == "avg" else redop)
