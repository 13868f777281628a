"""Building the CUDA kernels out loud: what is happening, how long it took, why it fell back, how to fix.

Torch's loader (``torch.utils.cpp_extension.load``) is silent for the ~30 s of a first build, refuses
a system nvcc of another CUDA major version than torch's (``_check_cuda_version``: "The detected CUDA
version (X) mismatches the version that was used to compile PyTorch (Y)"), and serialises builds with
an empty lock file, ``<build dir>/lock`` (``_jit_compile``: ``FileBaton(os.path.join(build_directory,
'lock'))``; ``FileBaton.wait`` spins while the file exists, forever if its builder was killed).

So before torch is asked, this module says why it cannot work (CUDA major mismatch, no toolkit),
removes a lock whose builder is gone, and records its own owner file beside torch's lock (pid and
start time), because torch's lock names nobody. Each sweep's rows then say which reduction path ran
(``ResultRow.reduce_path``: ``cuda-kernel`` or ``torch-ops``; None for native rows and ops that do
not reduce).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

TORCH_LOCK = "lock"
"""The lock file torch's ``_jit_compile`` creates in the build directory (empty: it names no owner)."""
OWNER_FILE = "collbench-build.owner"
"""Ours beside it: ``<pid> <start time>`` of the collbench process building."""
STALE_LOCK_S = 1800.0
"""A lock with no living owner, or older than this, is a killed build's leftover (a real build takes minutes)."""

Say = Callable[[str], None]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (signal 0 checks without sending anything)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def clear_stale_lock(
    build_dir: Path, *, now: float | None = None, alive: Callable[[int], bool] = pid_alive
) -> str | None:
    """Remove torch's build lock when its builder is gone; one line saying so, or None when left alone.

    The builder is gone when our owner file names a pid that no longer runs, or when there is no owner
    file (a build not started by this collbench, or killed before writing it) and the lock is older
    than ``STALE_LOCK_S``, or when the lock is older than that whoever owns it.
    """
    lock = build_dir / TORCH_LOCK
    owner = build_dir / OWNER_FILE
    try:
        age_s = (time.time() if now is None else now) - lock.stat().st_mtime
    except FileNotFoundError:
        return None
    pid = _owner_pid(owner)
    if pid is not None and alive(pid) and age_s <= STALE_LOCK_S:
        return None
    if pid is None and age_s <= STALE_LOCK_S:
        return None
    gone = pid is not None and not alive(pid)
    why = f"its builder (pid {pid}) is gone" if gone else f"it is {age_s / 60:.0f} min old"
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    with contextlib.suppress(FileNotFoundError):
        owner.unlink()
    return f"removed a stale CUDA kernel build lock ({lock}): {why}"


def _owner_pid(owner: Path) -> int | None:
    try:
        first = owner.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    return int(first[0]) if first and first[0].isdigit() else None


@contextlib.contextmanager
def owning(build_dir: Path) -> Iterator[None]:
    """Mark this process as the builder while the ``with`` block builds (removed afterwards)."""
    owner = build_dir / OWNER_FILE
    owner.write_text(f"{os.getpid()} {time.time():.0f}\n", encoding="ascii")
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            owner.unlink()


_RELEASE_RE = re.compile(r"release (\d+)\.(\d+)")


def nvcc_version(cuda_home: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of ``$CUDA_HOME/bin/nvcc --version``; None when it cannot be run or read."""
    if not cuda_home:
        return None
    try:
        out = subprocess.run(
            [str(Path(cuda_home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = _RELEASE_RE.search(out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def mismatch_reason(torch_cuda: str | None, nvcc: tuple[int, int] | None, cuda_home: str | None) -> str | None:
    """Why torch's loader will refuse this toolkit (a different CUDA major version); None if it will not."""
    if not torch_cuda or nvcc is None:
        return None
    major = int(torch_cuda.split(".")[0])
    if nvcc[0] == major:
        return None
    return (
        f"the CUDA toolkit at {cuda_home} is CUDA {nvcc[0]}.{nvcc[1]} but this torch was built for CUDA "
        f"{torch_cuda}; set CUDA_HOME to a CUDA {major}.x toolkit"
    )


@dataclass(frozen=True, slots=True)
class BuildResult:
    module: ModuleType | None
    """The loaded extension; None when the kernels are not used (``reason`` says why)."""
    reason: str = ""
    seconds: float = 0.0


def built_library(build_dir: Path, name: str) -> Path:
    """Where torch's loader leaves the built library (``<build dir>/<name>.so``)."""
    return build_dir / f"{name}.so"


def build(
    build_dir: Path,
    name: str,
    load: Callable[[], ModuleType],
    say: Say,
    *,
    torch_cuda: str | None,
    cuda_home: str | None,
) -> BuildResult:
    """Build (or load from the cache) with ``load``, telling ``say`` what happens; never raises.

    Says, in one line each: a stale lock removed; that a first build starts and where; how long it
    took; or why the kernels are not used and how to fix it (the rows then record ``torch-ops``).
    """
    reason = mismatch_reason(torch_cuda, nvcc_version(cuda_home), cuda_home)
    if reason is not None:
        return fallback(say, reason)
    build_dir.mkdir(parents=True, exist_ok=True)
    cleared = clear_stale_lock(build_dir)
    if cleared:
        say(cleared)
    first = not built_library(build_dir, name).exists()
    if first:
        say(f"building collbench's CUDA reduction kernels into {build_dir} (first time only; about 30 s to minutes)")
    start = time.monotonic()
    try:
        with owning(build_dir):
            module = load()
    except Exception as exc:  # compiler and loader failures come in many types
        lines = str(exc).strip().splitlines()
        text = f"building them failed ({type(exc).__name__}: {lines[0] if lines else 'no message'})"
        if "CUDA_HOME" not in text:
            text += "; check CUDA_HOME (the toolkit of torch's CUDA version), or COLLBENCH_NO_CUDA_KERNELS=1"
        return fallback(say, text)
    seconds = time.monotonic() - start
    if first:
        say(f"built collbench's CUDA reduction kernels in {seconds:.0f} s")
    return BuildResult(module, seconds=seconds)


def fallback(say: Say, reason: str) -> BuildResult:
    """Say why the kernels are not used (one line) and give the result that says so."""
    say(f"collbench's CUDA reduction kernels are not used: {reason}; own algorithms reduce with torch's ops")
    return BuildResult(None, reason)
