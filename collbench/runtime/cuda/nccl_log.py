"""NCCL's TUNING log on for one untimed call per native point, off while timing.

With ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING`` rank 0 writes a line per collective on the launch
path (~1 us and ~100 bytes each), so native small-message times would include NCCL's logging.
NCCL reads ``NCCL_DEBUG``/``NCCL_DEBUG_FILE`` once per process (``ncclDebugInit``, src/debug.cc),
but from 2.24 it exports ``ncclResetDebugInit()`` ("Use this after changing NCCL_DEBUG and related
parameters in the environment"; deprecated in 2.30 but still exported): the next log call re-reads
the environment. Re-opening ``NCCL_DEBUG_FILE`` truncates it (``fopen(debugFn, "w")``), so every
window gets a file name of its own.

Where the symbol is missing (NCCL before 2.24, or an NCCL linked so that it cannot be found) the
log stays on while timing and the run says so once; and a run that still sees TUNING lines logged
during timing says that too (so a switch that did not work is never silent).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collbench.nccl.tuning_log import TuningChoice
    from collbench.runtime.cuda.nccl import TuningLogReader

log = logging.getLogger(__name__)

RESET_SYMBOL = "ncclResetDebugInit"


def find_reset() -> Callable[[], None] | None:
    """NCCL's ``ncclResetDebugInit`` from the NCCL this process loaded (torch's), or None."""
    candidates: list[str | None] = [None, "libnccl.so.2", ctypes.util.find_library("nccl")]
    for name in candidates:
        try:
            lib = ctypes.CDLL(name, mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        func = getattr(lib, RESET_SYMBOL, None)
        if func is not None:
            func.restype = None
            func.argtypes = []
            reset: Callable[[], None] = func
            return reset
    return None


class NcclLogSwitch:
    """Turns this process's NCCL TUNING log on (into a fresh file under ``log_dir``) and off.

    ``reset`` is NCCL's ``ncclResetDebugInit`` (None: it cannot be switched; ``on``/``off`` then
    change nothing and ``switchable`` is False).
    """

    def __init__(self, log_dir: Path, reset: Callable[[], None] | None) -> None:
        self.log_dir = log_dir
        self._reset = reset
        self._window = 0

    @property
    def switchable(self) -> bool:
        return self._reset is not None

    def on(self) -> None:
        """Log TUNING lines again, into a new file (NCCL truncates the file it re-opens)."""
        if self._reset is None:
            return
        self._window += 1
        os.environ["NCCL_DEBUG"] = "INFO"
        os.environ["NCCL_DEBUG_SUBSYS"] = "TUNING"
        # NCCL expands %h and %p; the window number keeps earlier windows' lines.
        os.environ["NCCL_DEBUG_FILE"] = str(self.log_dir / f"nccl.%h.%p.{self._window}.log")
        self._reset()

    def off(self) -> None:
        """Keep NCCL's warnings (into their own file), drop the per-call INFO lines."""
        if self._reset is None:
            return
        os.environ["NCCL_DEBUG"] = "WARN"
        os.environ["NCCL_DEBUG_FILE"] = str(self.log_dir / f"nccl.%h.%p.{self._window}.warn.log")
        self._reset()


class ChoiceLearner:
    """Per native point: NCCL's choice from one untimed call with the log on; timing with it off.

    Every rank switches its own log (``switch``); rank 0, whose NCCL writes the TUNING lines, also
    reads them (``reader``; None on other ranks).
    """

    def __init__(self, switch: NcclLogSwitch, reader: TuningLogReader | None = None) -> None:
        self.switch = switch
        self.reader = reader
        self._learned: list[TuningChoice] = []
        self.leaked = False
        """Whether TUNING lines were logged while timing (the switch did not hold)."""

    @classmethod
    def of_log(cls, log_dir: Path, rank: int) -> ChoiceLearner:
        """Every rank's learner over NCCL's log in ``log_dir``; rank 0's also reads the log."""
        from collbench.runtime.cuda.nccl import TuningLogReader

        switch = NcclLogSwitch(log_dir, find_reset())
        switch.off()  # on only for each native point's untimed call
        return cls(switch, TuningLogReader(log_dir) if rank == 0 else None)

    def before_untimed(self) -> None:
        if self.reader is not None:
            self.reader.new_choices()  # what earlier points logged; this point's comes from its own call
        self.switch.on()

    def after_untimed(self) -> None:
        self.switch.off()
        self._learned = self.reader.new_choices() if self.reader is not None else []

    def choices(self) -> list[TuningChoice]:
        """After timing: the untimed call's choices, plus any logged while timing (noted in ``leaked``)."""
        timed = self.reader.new_choices() if self.reader is not None else []
        if timed and self.switch.switchable:
            self.leaked = True
        return [*self._learned, *timed]
