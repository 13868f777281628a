"""The threads of this process, for the settings Linux keeps per thread rather than per process.

CPU affinity (``affinity.pin_this_process``) and the scheduling policy (``rank_priority.realtime_rank``)
are both set one thread at a time: a rank sets them on every thread it already has, and the threads it
starts later inherit them from the thread that starts them.
"""

from __future__ import annotations

import os

TASKS = "/proc/self/task"


def own_threads() -> list[int]:
    """The ids of this process's threads; ``[0]`` (the calling thread) where /proc cannot be read."""
    try:
        return [int(tid) for tid in os.listdir(TASKS)]
    except OSError:
        return [0]
