"""``native`` and its NCCL variants (``native:ring``, ``native:tree/ll128``, ``native:ring/simple@16ch``).

``native`` is the backend's own collective; ``native:<algorithm>[/<protocol>][@<N>ch]`` is NCCL's forced
to one algorithm and/or protocol and/or channel count, per communicator. Facts from NCCL's source
(NVIDIA/nccl, v2.17 to v2.30):

* ``NCCL_ALGO``/``NCCL_PROTO`` are read with ``ncclGetEnv`` (no cache) in ``ncclTopoTuneModel``
  (``src/graph/tuning.cc``), which runs for every communicator NCCL sets up: set while a communicator
  is created, they force that communicator.
* ``NCCL_MIN_NCHANNELS``/``NCCL_MAX_NCHANNELS`` are ``NCCL_PARAM``s (``src/graph/connect.cc``), and an
  ``NCCL_PARAM`` keeps the first value it reads in a function-local static (``src/include/param.h``):
  they are read once per *process*, so a second communicator of the same process cannot get other
  values through them. The per-communicator bound is ``ncclConfig_t``'s ``minCTAs``/``maxCTAs``
  (from 2.17), which ``ncclTopoPostset`` (``src/graph/connect.cc``, "Honor NCCL_MIN/MAX_CTAS and
  NCCL_MIN/MAX_NCHANNELS") combines with them: ``nChannels = max(minCTAs, min(nChannels, maxCTAs))``
  (NVLS: ``nvlsChannels`` likewise, ``src/transport/nvls.cc``). torch passes it as
  ``ProcessGroupNCCL.Options().config.min_ctas``/``max_ctas`` (``torch/csrc/distributed/c10d/init.cpp``).
  So a channel count is forced with :func:`channel_bounds` on the communicator's options, and
  :func:`variant_process_env` is for a fresh process only (a job's environment).

Names and versions are :mod:`collbench.nccl.algorithms`'; what a variant can run is
:mod:`collbench.nccl.support`'; the channel bounds :mod:`collbench.nccl.channels`'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collbench.errors import ConfigError, UnknownNameError
from collbench.nccl.algorithms import (
    ALGORITHM_SINCE,
    ALGORITHMS,
    PROTOCOLS,
    NcclVersion,
    algorithms_for,
    canonical_algo,
    canonical_proto,
)
from collbench.nccl.channels import MAX_CHANNELS, MAX_CHANNELS_SINCE

COMM_CHANNELS_SINCE: NcclVersion = (2, 17, 0)
"""The first NCCL whose ``ncclConfig_t`` has ``minCTAs``/``maxCTAs`` (the per-communicator channel bound)."""
_CHANNELS_RE = re.compile(r"^\s*([0-9]+)\s*ch\s*$", re.IGNORECASE | re.ASCII)
"""ASCII digits only: ``\\d`` would also take Arabic-Indic and other digits, which ``int`` reads."""
_CHANNEL_DIGITS_MAX = 6
"""More digits than this is past :data:`MAX_CHANNELS` whatever they say; ``int`` is not asked to read
them (it refuses past 4,300 digits with a bare ValueError)."""


def is_native(name: str) -> bool:
    """Whether an algorithm name is ``native`` or one of its NCCL variants (``native:...``), in any case."""
    key = name.strip().lower()
    return key == "native" or key.startswith(("native:", "native@"))


@dataclass(frozen=True, slots=True)
class NativeVariant:
    """NCCL's own collective, optionally forced to one algorithm, protocol and/or channel count
    (None: NCCL's choice)."""

    algo: str | None = None
    """One of :data:`ALGORITHMS`, as NCCL spells it."""
    proto: str | None = None
    """One of :data:`PROTOCOLS`, as NCCL spells it."""
    channels: int | None = None
    """The communicator's channel count (``minCTAs = maxCTAs``), 1 to :data:`MAX_CHANNELS`."""

    def __post_init__(self) -> None:
        if self.algo is not None and self.algo not in ALGORITHMS:
            raise UnknownNameError("NCCL algorithm", self.algo, ALGORITHMS)
        if self.proto is not None and self.proto not in PROTOCOLS:
            raise UnknownNameError("NCCL protocol", self.proto, PROTOCOLS)
        if self.channels is not None and (
            isinstance(self.channels, bool)
            or not isinstance(self.channels, int)
            or not 1 <= self.channels <= MAX_CHANNELS
        ):
            raise ConfigError(
                f"an NCCL channel count is 1 to {MAX_CHANNELS} (NCCL's MAXCHANNELS), got {self.channels!r}"
            )

    @property
    def name(self) -> str:
        """The canonical ``--algo`` spelling: ``native``, ``native:ring``, ``native:tree/ll128``,
        ``native:*/ll``, ``native:ring/simple@16ch``, ``native:*@8ch``."""
        suffix = "" if self.channels is None else f"@{self.channels}ch"
        if self.algo is None and self.proto is None:
            return "native" if self.channels is None else f"native:*{suffix}"
        algo = self.algo.lower() if self.algo else "*"
        return f"native:{algo}" + (f"/{self.proto.lower()}" if self.proto else "") + suffix

    @property
    def forced(self) -> bool:
        """Whether anything is forced (plain ``native`` leaves the choice to NCCL)."""
        return self.algo is not None or self.proto is not None or self.channels is not None


def parse_native_variant(name: str) -> NativeVariant:
    """Parse ``native``, ``native:ring``, ``native:tree/ll128``, ``native:*/ll128``, ``native:ring/simple@16ch``,
    ``native@8ch`` (any case).

    Algorithm names also accept dashes or underscores (``native:collnet-direct``, ``native:nvls_tree``).
    ``*`` or an empty algorithm leaves the algorithm to NCCL; ``@<N>ch`` forces the communicator's
    channel count. Raises UnknownNameError listing the known algorithms or protocols, ConfigError for a
    variant that forces nothing or a channel count that is not 1 to :data:`MAX_CHANNELS`.
    """
    text, at, suffix = name.strip().partition("@")
    channels = _parse_channels(suffix, name) if at else None
    head, sep, rest = text.strip().partition(":")
    if head.strip().lower() != "native":
        raise UnknownNameError("native variant", name, ["native", *(f"native:{a.lower()}" for a in ALGORITHMS)])
    if not sep:
        return NativeVariant(channels=channels)
    algo_text, slash, proto_text = rest.partition("/")
    algo: str | None = None
    if algo_text.strip() not in ("", "*"):
        algo = canonical_algo(algo_text)
        if algo is None:
            raise UnknownNameError("NCCL algorithm", algo_text.strip(), [a.lower() for a in ALGORITHMS])
    proto: str | None = None
    if slash:
        proto = canonical_proto(proto_text)
        if proto is None:
            raise UnknownNameError("NCCL protocol", proto_text.strip(), [p.lower() for p in PROTOCOLS])
    if algo is None and proto is None and channels is None:
        raise ConfigError(f"{name!r} forces nothing; write 'native', 'native:<algorithm>' or 'native:*/<protocol>'")
    return NativeVariant(algo, proto, channels)


def _parse_channels(text: str, name: str) -> int:
    shown = name if len(name) <= 80 else f"{name[:60]}...({len(name)} characters)"
    match = _CHANNELS_RE.match(text)
    if match is None:
        raise ConfigError(f"{shown!r}: a channel count is written @<N>ch in ASCII digits, e.g. native:ring/simple@16ch")
    digits = match.group(1).lstrip("0")
    count = int(digits) if digits and len(digits) <= _CHANNEL_DIGITS_MAX else (0 if not digits else MAX_CHANNELS + 1)
    if not 1 <= count <= MAX_CHANNELS:
        raise ConfigError(f"{shown!r}: an NCCL channel count is 1 to {MAX_CHANNELS} (NCCL's MAXCHANNELS)")
    return count


def all_variants() -> list[NativeVariant]:
    """``native`` and every forced algorithm (protocol left to NCCL), in :data:`ALGORITHMS` order."""
    return [NativeVariant(), *(NativeVariant(a) for a in ALGORITHMS)]


def variant_env(variant: NativeVariant) -> dict[str, str]:
    """The environment that forces ``variant``'s algorithm and protocol on a communicator created under
    it: ``NCCL_ALGO`` and/or ``NCCL_PROTO`` (empty for ``native``). Never the channel count, which
    NCCL reads once per process (:func:`channel_bounds` forces it per communicator).

    The values apply to every collective of a communicator created under them (the form without a
    ``allreduce:`` prefix, which every NCCL version reads). NCCL versions before 2.24 keep Ring for the
    collectives that cannot run the forced algorithm; later ones fail the call instead.
    """
    env: dict[str, str] = {}
    if variant.algo is not None:
        env["NCCL_ALGO"] = variant.algo
    if variant.proto is not None:
        env["NCCL_PROTO"] = variant.proto
    return env


def channel_bounds(variant: NativeVariant) -> tuple[int, int] | None:
    """``(minCTAs, maxCTAs)`` of the communicator that runs ``variant``; None where NCCL keeps its own count."""
    if variant.channels is None:
        return None
    return variant.channels, variant.channels


def variant_process_env(variant: NativeVariant) -> dict[str, str]:
    """:func:`variant_env` plus ``NCCL_MIN_NCHANNELS``/``NCCL_MAX_NCHANNELS``: for a process NCCL has
    not started in yet (a job's environment), where the channel variables still take effect."""
    env = variant_env(variant)
    if variant.channels is not None:
        env["NCCL_MIN_NCHANNELS"] = env["NCCL_MAX_NCHANNELS"] = str(variant.channels)
    return env


def max_channels_for(nccl_version: NcclVersion) -> int:
    """``MAXCHANNELS`` of NCCL ``nccl_version``: the most channels a communicator of it holds."""
    most = MAX_CHANNELS_SINCE[0][1]
    for since, count in MAX_CHANNELS_SINCE:
        if nccl_version >= since:
            most = count
    return most


def parse_version(text: str) -> NcclVersion:
    """``"2.21.5"`` -> ``(2, 21, 5)``; missing parts are 0. Raises ValueError on other text."""
    parts = [int(p) for p in text.strip().split(".") if p != ""]
    if not parts or len(parts) > 3:
        raise ValueError(f"not a version: {text!r}")
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def check_variant_supported(variant: NativeVariant, nccl_version: NcclVersion) -> None:
    """Raise UnknownNameError when NCCL ``nccl_version`` would reject ``variant``'s NCCL_ALGO, ConfigError
    when it cannot hold its channel count per communicator.

    (NCCL itself fails communicator creation with "Unrecognized element token" on an unknown name, and
    limits a larger channel count to its ``MAXCHANNELS`` with a warning: the variant would not run
    what its name says.)
    """
    version = ".".join(str(v) for v in nccl_version)
    if variant.channels is not None:
        if nccl_version < COMM_CHANNELS_SINCE:
            raise ConfigError(
                f"{variant.name}: NCCL {version} has no per-communicator channel count (ncclConfig_t "
                f"minCTAs/maxCTAs arrived in {COMM_CHANNELS_SINCE[0]}.{COMM_CHANNELS_SINCE[1]})"
            )
        most = max_channels_for(nccl_version)
        if variant.channels > most:
            raise ConfigError(f"{variant.name}: NCCL {version} holds at most {most} channels (MAXCHANNELS)")
    if variant.algo is None:
        return
    known = algorithms_for(nccl_version)
    if variant.algo not in known:
        first = ".".join(str(v) for v in ALGORITHM_SINCE[variant.algo][:2])
        raise UnknownNameError(
            f"NCCL algorithm for NCCL {version} (it arrived in {first})",
            variant.algo.lower(),
            [a.lower() for a in known],
        )
