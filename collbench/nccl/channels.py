"""How many channels NCCL can take from a tuner: the largest count a config line may name.

Facts from NCCL's source (NVIDIA/nccl), tags v2.19.3-1 to v2.30.7-1, the releases with tuner plugins:

* ``MAXCHANNELS`` (``src/include/device.h``) is 32 up to 2.24 and 64 from 2.25: NCCL's per-channel
  arrays hold that many, and its CollNet path uses a tuner's count as it is.
* From 2.22 the count is kept in ``int32_t nMaxChannels:8`` (``struct ncclTaskColl``,
  ``src/include/comm.h``; ``ncclGetAlgoInfo`` in ``src/enqueue.cc`` copies the tuner's ``int`` there
  unchecked), so 128 would become -128 and 256 would become 0.
"""

from __future__ import annotations

from collbench.nccl.algorithms import NcclVersion

MAX_CHANNELS_SINCE: tuple[tuple[NcclVersion, int], ...] = (((2, 19, 0), 32), ((2, 25, 0), 64))
"""``MAXCHANNELS`` from the first release of each value on, oldest first."""
MAX_CHANNELS = MAX_CHANNELS_SINCE[-1][1]
"""The most channels any NCCL release holds: the bound of a profile's and a tuner config's counts."""
MAX_CHANNELS_OLDEST = MAX_CHANNELS_SINCE[0][1]
"""What every NCCL with a tuner plugin holds; a larger count applies only from the release that raised it."""


def since_text(count: int) -> str:
    """The first release that holds ``count`` channels, as text (``"2.25"``); ValueError above the most."""
    for since, most in MAX_CHANNELS_SINCE:
        if count <= most:
            return f"{since[0]}.{since[1]}"
    raise ValueError(f"no NCCL release holds {count} channels (at most {MAX_CHANNELS})")
