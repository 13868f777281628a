"""``native`` and its NCCL variants (``native:ring``, ``native:tree/ll128``, ``native:*/ll``): their spelling.

``native`` is the backend's own collective; ``native:<algorithm>[/<protocol>]`` is NCCL's forced to
one algorithm and/or protocol through ``NCCL_ALGO``/``NCCL_PROTO``, which ``ncclTopoTuneModel``
(``src/graph/tuning.cc``) reads for every communicator it sets up. Names and versions are
:mod:`collbench.nccl.algorithms`'; what a variant can run is :mod:`collbench.nccl.support`'.
"""

from __future__ import annotations

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


def is_native(name: str) -> bool:
    """Whether an algorithm name is ``native`` or one of its NCCL variants (``native:...``), in any case."""
    key = name.strip().lower()
    return key == "native" or key.startswith("native:")


@dataclass(frozen=True, slots=True)
class NativeVariant:
    """NCCL's own collective, optionally forced to one algorithm and/or protocol (None: NCCL's choice)."""

    algo: str | None = None
    """One of :data:`ALGORITHMS`, as NCCL spells it."""
    proto: str | None = None
    """One of :data:`PROTOCOLS`, as NCCL spells it."""

    def __post_init__(self) -> None:
        if self.algo is not None and self.algo not in ALGORITHMS:
            raise UnknownNameError("NCCL algorithm", self.algo, ALGORITHMS)
        if self.proto is not None and self.proto not in PROTOCOLS:
            raise UnknownNameError("NCCL protocol", self.proto, PROTOCOLS)

    @property
    def name(self) -> str:
        """The canonical ``--algo`` spelling: ``native``, ``native:ring``, ``native:tree/ll128``, ``native:*/ll``."""
        if self.algo is None and self.proto is None:
            return "native"
        algo = self.algo.lower() if self.algo else "*"
        return f"native:{algo}" + (f"/{self.proto.lower()}" if self.proto else "")

    @property
    def forced(self) -> bool:
        """Whether anything is forced (plain ``native`` leaves the choice to NCCL)."""
        return self.algo is not None or self.proto is not None


def parse_native_variant(name: str) -> NativeVariant:
    """Parse ``native``, ``native:ring``, ``native:tree/ll128``, ``native:*/ll128`` (any case).

    Algorithm names also accept dashes or underscores (``native:collnet-direct``, ``native:nvls_tree``).
    ``*`` or an empty algorithm leaves the algorithm to NCCL. Raises UnknownNameError listing the known
    algorithms or protocols, ConfigError for a variant that forces nothing.
    """
    text = name.strip()
    head, sep, rest = text.partition(":")
    if head.lower() != "native":
        raise UnknownNameError("native variant", name, ["native", *(f"native:{a.lower()}" for a in ALGORITHMS)])
    if not sep:
        return NativeVariant()
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
    if algo is None and proto is None:
        raise ConfigError(f"{name!r} forces nothing; write 'native', 'native:<algorithm>' or 'native:*/<protocol>'")
    return NativeVariant(algo, proto)


def all_variants() -> list[NativeVariant]:
    """``native`` and every forced algorithm (protocol left to NCCL), in :data:`ALGORITHMS` order."""
    return [NativeVariant(), *(NativeVariant(a) for a in ALGORITHMS)]


def variant_env(variant: NativeVariant) -> dict[str, str]:
    """The environment that forces ``variant``: ``NCCL_ALGO`` and/or ``NCCL_PROTO`` (empty for ``native``).

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


def parse_version(text: str) -> NcclVersion:
    """``"2.21.5"`` -> ``(2, 21, 5)``; missing parts are 0. Raises ValueError on other text."""
    parts = [int(p) for p in text.strip().split(".") if p != ""]
    if not parts or len(parts) > 3:
        raise ValueError(f"not a version: {text!r}")
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def check_variant_supported(variant: NativeVariant, nccl_version: NcclVersion) -> None:
    """Raise UnknownNameError when NCCL ``nccl_version`` would reject ``variant``'s NCCL_ALGO.

    (NCCL itself fails communicator creation with "Unrecognized element token" on an unknown name.)
    """
    if variant.algo is None:
        return
    known = algorithms_for(nccl_version)
    if variant.algo not in known:
        version = ".".join(str(v) for v in nccl_version)
        first = ".".join(str(v) for v in ALGORITHM_SINCE[variant.algo][:2])
        raise UnknownNameError(
            f"NCCL algorithm for NCCL {version} (it arrived in {first})",
            variant.algo.lower(),
            [a.lower() for a in known],
        )
