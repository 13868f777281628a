"""Building the CUDA kernels out loud: what is happening, how long it took, why it fell back, how to fix.

Torch's loader (``torch.utils.cpp_extension.load``) is silent for the ~30 s of a first build, refuses
a system nvcc of another CUDA major version than torch's (``_check_cuda_version``: "The detected CUDA
version (X) mismatches the version that was used to compile PyTorch (Y)"), and serialises builds with
an empty lock file, ``<build dir>/lock`` (``_jit_compile``: ``FileBaton(os.path.join(build_directory,
'lock'))``; ``FileBaton.wait`` spins while the file exists, forever if its builder was killed).

Torch's loader also needs two things it only reports mid-build: ``ninja``, which it runs by name from
``PATH`` on every load, cached or not (``_jit_compile`` builds whenever the extension is new to the
process; ``verify_ninja_availability``, ``_run_ninja_build``), and ``Python.h`` in
``sysconfig.get_path('include', scheme='posix_prefix')``, the include directory it compiles against
(``_write_ninja_file_to_build_library``), needed when it compiles.

So before torch is asked, this module says why it cannot work (CUDA major mismatch, no toolkit, no
ninja, no Python.h), removes a lock whose builder is gone, and records its own owner file beside
torch's lock (pid and start time), because torch's lock names nobody. Each sweep's rows then say
which reduction path ran (``ResultRow.reduce_path``: ``cuda-kernel`` or ``torch-ops``; None for
native rows and ops that do not reduce).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
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
class BuildTools:
    """What torch's extension loader runs and reads besides the CUDA toolkit, as found here."""

    ninja: Path | None
    """The ``ninja`` it will run (None: none found)."""
    python_h: Path
    """Where it expects ``Python.h`` (it may be missing)."""


def find_build_tools(
    path: str | None = None, python_bin: Path | None = None, include_dir: str | None = None
) -> BuildTools:
    """``ninja`` on ``path`` (default ``$PATH``), else beside this Python, and where ``Python.h`` should be.

    pip installs the ``ninja`` package's program beside the interpreter (``.venv/bin``), which is on
    ``PATH`` only in an activated environment: a ``.venv/bin/collbench`` run without activating it
    still finds it there. ``python_bin`` and ``include_dir`` (default: this interpreter's directory
    and ``sysconfig``'s posix_prefix include directory, the one torch compiles against) are for tests.
    """
    on_path = shutil.which("ninja", path=path)
    beside = (python_bin if python_bin is not None else Path(sys.executable).parent) / "ninja"
    ninja = Path(on_path) if on_path else (beside if os.access(beside, os.X_OK) else None)
    include = include_dir if include_dir is not None else sysconfig.get_path("include", scheme="posix_prefix")
    return BuildTools(ninja=ninja, python_h=Path(include) / "Python.h")


def missing_tools_reason(tools: BuildTools, *, compiles: bool) -> str | None:
    """One clause naming what is missing and how to get it; None when nothing is.

    ``compiles``: whether the loader will compile (no built library yet); loading a built one needs
    ninja only, as torch runs it on every load.
    """
    missing: list[str] = []
    fixes: list[str] = []
    if tools.ninja is None:
        missing.append("ninja")
        fixes.append("pip install ninja")
    if compiles and not tools.python_h.is_file():
        missing.append("Python.h")
        fixes.append(
            f"no {tools.python_h}: install this Python's development headers "
            f"(python{sys.version_info.major}.{sys.version_info.minor}-dev on Debian and Ubuntu)"
        )
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return f"{' and '.join(missing)} {verb} missing for torch's extension loader ({'; '.join(fixes)})"


def ninja_on_path(ninja: Path) -> None:
    """Put ``ninja``'s directory on this process's ``PATH``: torch runs ``ninja`` by name."""
    here = os.environ.get("PATH", "")
    if shutil.which("ninja", path=here) is None:
        os.environ["PATH"] = str(ninja.parent) + (os.pathsep + here if here else "")


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
    tools: BuildTools | None = None,
) -> BuildResult:
    """Build (or load from the cache) with ``load``, telling ``say`` what happens; never raises.

    Says, in one line each: a stale lock removed; that a first build starts and where; how long it
    took; or why the kernels are not used and how to fix it (the rows then record ``torch-ops``):
    a first build without ``$CUDA_HOME/bin/nvcc``, a toolkit of another CUDA major version, ninja or
    Python.h missing, or the build failing (then with the compiler's own error lines, and its whole
    output kept in the build directory: :func:`build_failed`). ``tools``: ninja and Python.h as found here
    (``find_build_tools``), checked before ``load``; None for a ``load`` that runs neither (tests'
    fakes of torch's loader).
    """
    first = not built_library(build_dir, name).exists()
    nvcc = Path(cuda_home) / "bin" / "nvcc" if cuda_home else None
    if first and nvcc is not None and not nvcc.is_file():
        # torch takes $CUDA_HOME as given and would fail mid-build running its bin/nvcc.
        return fallback(say, f"no nvcc at {nvcc} (set CUDA_HOME to the directory holding bin/nvcc)")
    reason = mismatch_reason(torch_cuda, nvcc_version(cuda_home), cuda_home)
    if reason is not None:
        return fallback(say, reason)
    if tools is not None:
        missing = missing_tools_reason(tools, compiles=first)
        if missing is not None:
            return fallback(say, missing)
        if tools.ninja is not None:
            ninja_on_path(tools.ninja)
    build_dir.mkdir(parents=True, exist_ok=True)
    cleared = clear_stale_lock(build_dir)
    if cleared:
        say(cleared)
    if first:
        say(f"building collbench's CUDA reduction kernels into {build_dir} (first time only; about 30 s to minutes)")
    start = time.monotonic()
    try:
        with owning(build_dir):
            module = load()
    except Exception as exc:  # compiler and loader failures come in many types
        return build_failed(say, exc, build_dir)
    seconds = time.monotonic() - start
    if first:
        say(f"built collbench's CUDA reduction kernels in {seconds:.0f} s")
    return BuildResult(module, seconds=seconds)


FAILURE_LOG = "collbench-build-failure.log"
"""The whole of a failed build's output, kept in the build directory (the last failure's)."""
MAX_ERROR_LINES = 12
"""Compiler error lines said after the fallback line; the rest are in FAILURE_LOG."""
_ERROR_LINE = re.compile(
    r"(: (fatal )?error\b|\(\d+\): (catastrophic )?error\b|\berror: ld returned|undefined reference to|"
    r"^(nvcc|c\+\+|g\+\+|gcc|cc1plus|collect2|ld)(: fatal)?: error\b)",
    re.IGNORECASE,
)
"""A compiler's or linker's error line: gcc and clang ``file:line:col: error: ...``, nvcc ``file(line):
error: ...``, ld's ``undefined reference to``, a driver's ``nvcc fatal   : ...`` (matched below)."""


def compiler_errors(output: str) -> list[str]:
    """The compiler's and linker's own error lines in a build's output, in order, without repeats.

    Torch's loader raises ``RuntimeError("Error building extension 'NAME': " + ninja's output)``
    (``_run_ninja_build`` in torch/utils/cpp_extension.py); ninja's output starts with the first
    command it ran (``[1/3] c++ ...``), which says nothing about what went wrong.
    """
    found: list[str] = []
    for raw in output.splitlines():
        line = raw.strip()
        if not line or line.startswith(("[", "FAILED:", "ninja:")):
            continue
        if (_ERROR_LINE.search(line) or line.lower().startswith("nvcc fatal")) and line not in found:
            found.append(line)
    return found


def build_failed(say: Say, exc: BaseException, build_dir: Path) -> BuildResult:
    """The fallback after a failed build: the compiler's own error lines said, the whole output kept.

    The first error line goes into the fallback line, each further one (up to MAX_ERROR_LINES) is said
    after it, and torch's whole message (every command ninja ran and all their output) is written to
    ``<build dir>/collbench-build-failure.log``, named in the fallback line.
    """
    output = str(exc).strip()
    log = build_dir / FAILURE_LOG
    try:
        log.write_text(f"{type(exc).__name__}: {output}\n", encoding="utf-8")
        kept = f"; the whole build output is in {log}"
    except OSError as write_error:
        kept = f"; its output could not be kept ({write_error.strerror or write_error})"
    errors = compiler_errors(output)
    if errors:
        more = f" ({len(errors)} compiler error lines, below)" if len(errors) > 1 else ""
        text = f"building them failed: {errors[0]}{more}{kept}"
    else:
        lines = output.splitlines()
        text = f"building them failed ({type(exc).__name__}: {lines[0] if lines else 'no message'}){kept}"
        if "CUDA_HOME" not in text:
            text += "; check CUDA_HOME (the toolkit of torch's CUDA version), or COLLBENCH_NO_CUDA_KERNELS=1"
    result = fallback(say, text)
    for line in errors[1:MAX_ERROR_LINES]:
        say(f"  {line}")
    if len(errors) > MAX_ERROR_LINES:
        say(f"  ... {len(errors) - MAX_ERROR_LINES} more in {log}")
    return result


def fallback(say: Say, reason: str) -> BuildResult:
    """Say why the kernels are not used (one line) and give the result that says so."""
    say(f"collbench's CUDA reduction kernels are not used: {reason}; own algorithms reduce with torch's ops")
    return BuildResult(None, reason)
