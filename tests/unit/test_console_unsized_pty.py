"""The consoles treat a pty whose window size was never set as no terminal: Open MPI's mpirun gives
each rank's stdout such a pty (ompi 4.1: ``os.get_terminal_size`` of a rank's stdout is 0 x 0, isatty
True, whatever mpirun's own stdout is) and copies it to mpirun's stdout, which is often a file. There
rank 0's tables came out in colour escapes, wrapped at 80 columns. A sized pty (a terminal a person
reads) keeps colour."""

from __future__ import annotations

import fcntl
import os
import struct
import termios
from collections.abc import Iterator

import pytest

from collbench.cli import console as console_module
from collbench.cli.console import _DataSafeConsole

ESC = "\x1b["


@pytest.fixture
def pty_file(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    for name in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    main, follower = os.openpty()
    file = os.fdopen(follower, "w", encoding="utf-8")
    os.set_blocking(main, False)
    try:
        yield file
    finally:
        file.close()
        os.close(main)


def _set_size(file: object, columns: int, lines: int) -> None:
    fd = file.fileno()  # type: ignore[attr-defined]
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))


def test_a_pty_of_no_size_is_no_terminal(pty_file: object) -> None:
    assert os.isatty(pty_file.fileno())  # type: ignore[attr-defined]
    assert tuple(os.get_terminal_size(pty_file.fileno())) == (0, 0)  # type: ignore[attr-defined]
    out = _DataSafeConsole(file=pty_file)  # type: ignore[arg-type]
    assert not out.is_terminal
    assert out.color_system is None
    assert out.width == console_module._PIPE_WIDTH
    with out.capture() as captured:
        out.print("[bold]wrong elements:[/bold] 0 (OK)")
    assert ESC not in captured.get()


def test_a_sized_pty_is_a_terminal(pty_file: object) -> None:
    _set_size(pty_file, 100, 30)
    out = _DataSafeConsole(file=pty_file)  # type: ignore[arg-type]
    assert out.is_terminal
    assert out.color_system is not None


def test_force_terminal_still_rules(pty_file: object) -> None:
    out = _DataSafeConsole(file=pty_file, force_terminal=True)  # type: ignore[arg-type]
    assert out.is_terminal
