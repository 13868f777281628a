"""Results files as a journal: whole rows or nothing, one writer at a time, torn tails set aside.

A stream file is appended to while ranks measure, and read back by ``--resume``, ``fit`` and ``tune``.
Three things keep what it holds trustworthy:

- each row is one ``write`` of one complete line; if the write fails (a full disk) the file is cut
  back to where it was, so a row is on disk whole or not at all;
- a crash can still leave a line without its newline (the machine died mid-write): before anything
  is appended again, that fragment is moved to ``NAME.torn`` and the file ends on a whole row, so
  the next row never lands glued to it;
- one run writes a file at a time: an advisory lock (flock) on a lock file beside it, holding the
  writer's pid, host and command, makes a second run on the same file stop with one line instead of
  emptying it;
- a results file is never written through a symlink (one planted at ``collbench-sweep.jsonl``
  would have the run overwrite whatever it points to): every open says ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collbench.errors import ConfigError, InputFileError
from collbench.filekinds import is_row_line

_LOCK_TRIES = 5
_HELD_FOR_LIFE: set[Path] = set()
"""Files whose writer's lock a run of this process holds for its whole life (:func:`held_for_life`).
Process state, as the open lock files are: a second flock of one file from the same process would
refuse itself, so a tune holding its partial files lets its own rounds' sweeps write them. Any other
second writer, in this process or another, is refused as before."""
_NOT_A_LOCK = "is not a regular file (a FIFO, a directory, a device); the writer's lock must be one: remove it"
_HOLDER_BYTES = 1024
"""How much of a lock file is read back to name its holder; the command written there is cut to fit."""


def json_line(data: dict[str, Any]) -> bytes:
    """``data`` as one line of a JSONL file, as every writer of rows writes it (keys sorted, UTF-8, its
    newline). Raises ValueError for NaN or an infinity: they are not JSON, and no reader would take them."""
    return (json.dumps(data, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def append_line(path: Path, data: dict[str, Any]) -> None:
    """Append ``data`` as one JSON line, flushed to disk; on failure the file is left as it was.

    NaN and infinities are refused (ValueError): they are not JSON, and no reader would take them.
    Raises OSError (a full disk, ...) after cutting the file back to its length before the write.
    """
    line = json_line(data)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        before = os.fstat(fd).st_size
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            # Half a row on disk would be glued to the next one appended: take it back.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
            raise
    finally:
        os.close(fd)


def refuse_symlink(path: Path) -> None:
    """Raise InputFileError when ``path`` is a symlink: a results file is written in place, never
    through a link, which could point at any file this user may write."""
    if path.is_symlink():
        raise InputFileError(
            str(path), "is a symlink; collbench does not write results through one (remove it or give another file)"
        )


def count_lines(path: Path) -> int:
    """How many newline-ended lines ``path`` holds (0 when it does not exist), read in blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputFileError(str(path), "is not a regular file; results are written to plain files only")
        count = 0
        while block := os.read(fd, 1 << 20):
            count += block.count(b"\n")
        return count
    finally:
        os.close(fd)


def first_line_kind(path: Path) -> str:
    """What the first line of text in ``path`` is: ``"row"`` for a results row (a JSON object with a
    ``size_bytes``, or the torn start of one that is the file's only line: a sweep killed in its first
    write), ``"none"`` for a file of blank lines or none, ``"other"`` for anything else (a profile, a
    log, a CSV, binary, and JSON that is no row: ``fit --json``'s fits, a topology, an NVML recording).
    Reads at most the first 64 KiB; raises InputFileError when it cannot."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        head = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return "none"
    line, newline, _ = text.partition(b"\n")
    return "row" if is_row_line(line, torn=not newline) else "other"


def empty_file(path: Path) -> None:
    """Make ``path`` an empty file (created if absent), never following a symlink there.

    Raises InputFileError when it is a symlink or cannot be written.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_symlink(path)
        raise InputFileError(str(path), f"cannot write: {exc.strerror or exc}") from None
    os.close(fd)


def set_torn_tail_aside(path: Path) -> str:
    """Move a last line without its newline (a write cut by a crash) to ``NAME.torn``.

    Returns a note saying what was set aside and where, or "" when the file ends on a whole line.
    The ``.torn`` file is appended to, never followed through a symlink. Raises InputFileError when
    the file cannot be read or repaired.
    """
    try:
        with path.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return ""
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return ""
            start = _last_line_start(f, size)
            f.seek(start)
            fragment = f.read()
            torn = path.with_name(path.name + ".torn")
            fd = os.open(torn, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            try:
                os.write(fd, fragment + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            f.truncate(start)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise InputFileError(str(path), f"cannot set its torn last line aside: {exc.strerror or exc}") from None
    return (
        f"{path}: its last line was cut short ({len(fragment)} bytes, a crash mid-write); "
        f"set aside in {torn}, the whole rows before it are kept"
    )


def _last_line_start(f: Any, size: int) -> int:
    """Offset just after the last newline of the open file ``f`` of ``size`` bytes (0 when none)."""
    block = 1 << 16
    end = size
    while end > 0:
        start = max(0, end - block)
        f.seek(start)
        chunk = f.read(end - start)
        at = chunk.rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


@contextlib.contextmanager
def exclusive_writer(paths: list[Path]) -> Iterator[None]:
    """Hold the writer's lock of every file in ``paths`` for the block (in a fixed order); a file a run
    of this process holds for its life (:func:`held_for_life`) is left to that run.

    Raises ConfigError naming the pid (and host) of the run that holds one of them. The lock is
    advisory (flock): it keeps collbench runs apart, on one machine or on a file system whose
    flock reaches every client; it is released when the holder exits, however it exits.
    """
    unique = sorted({p.resolve() for p in paths})
    with contextlib.ExitStack() as stack:
        for path in unique:
            if path in _HELD_FOR_LIFE:
                continue  # the run around this one holds it (a tune around its rounds' sweeps)
            stack.enter_context(_locked(path))
        yield


@contextlib.contextmanager
def held_for_life(paths: list[Path]) -> Iterator[None]:
    """Hold the writer's lock of ``paths`` for the block, as :func:`exclusive_writer` does, and let the
    writers this process runs inside the block (and only those) write them."""
    unique = sorted({p.resolve() for p in paths})
    with exclusive_writer(unique):
        _HELD_FOR_LIFE.update(unique)
        try:
            yield
        finally:
            _HELD_FOR_LIFE.difference_update(unique)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(f".{path.name}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _acquire(lock, path)
    try:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, _holder_line().encode()[:_HOLDER_BYTES])
        except OSError as exc:
            raise InputFileError(str(lock), f"cannot write the writer's lock: {exc.strerror or exc}") from None
        yield
    finally:
        # Unlinked while still held: a run that opened the old file sees it is gone and retries.
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


def _acquire(lock: Path, path: Path) -> int:
    for _ in range(_LOCK_TRIES):
        try:
            # O_NONBLOCK: a FIFO planted at the lock's name would otherwise block the open.
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputFileError(str(lock), "is a symlink; collbench will not follow it for its lock") from None
            if exc.errno == errno.EISDIR:
                raise InputFileError(str(lock), _NOT_A_LOCK) from None
            raise InputFileError(str(path), f"cannot lock for writing: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InputFileError(str(lock), _NOT_A_LOCK)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise ConfigError(
                f"{path} is being written by another collbench run ({holder}); "
                "wait for it to finish, or give another file"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise InputFileError(str(path), f"cannot lock for writing: {exc.strerror or exc}") from None
        try:
            same = os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed it as we opened it: take the new one
    raise ConfigError(f"{path}: could not take its writer's lock ({lock} keeps changing); try again")


def _holder_line() -> str:
    """What a lock file holds: ``PID HOST COMMAND``, so a refused run can say who holds the file."""
    if not sys.argv:
        return f"{os.getpid()} {socket.gethostname()}\n"
    program = Path(sys.argv[0])
    # ``python -m collbench.cli.app`` runs the same command as the ``collbench`` script: say so.
    name = "collbench" if program.parts[-3:] == ("collbench", "cli", "app.py") else program.name
    command = " ".join([name, *map(shlex.quote, sys.argv[1:])])
    return f"{os.getpid()} {socket.gethostname()} {' '.join(command.split())}\n"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, _HOLDER_BYTES, 0).decode("utf-8", "replace").split(maxsplit=2)
    except OSError:
        text = []
    if len(text) >= 2 and text[0].isdecimal():
        command = f": {text[2].strip()}" if len(text) == 3 and text[2].strip() else ""
        return f"pid {text[0]} on {text[1]}{command}"
    return "pid unknown"
