"""A fitted cost model as a value: what ``fit.py`` finds, what profiles keep, what predictions read.

A :class:`Fit` is one (op, algorithm, backend, world size)'s alpha, beta and gamma, with the figures
that say how well they explain the measurements, and optionally :class:`Segment` s where one line did
not (protocol switches). It prices a size at its own world size or at another (the closed forms in
``costs.py`` re-evaluated there), and says when it must not be extrapolated (:meth:`Fit.distrust`).

Files hold per-byte costs as bandwidths (GB/s, a reader's unit); a fit holds them as us/byte (the
fitter's unit). ``to_dict``/``from_dict`` convert at the file's edge, and nowhere else.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collbench.models.costs import cost_terms

R2_MIN = 0.5
"""Below this R^2 (on log time) a fit is shown as not explaining its data, and not extrapolated."""


def gbps_from_us_per_byte(cost_us_per_byte: float) -> float | None:
    """1/cost in GB/s (10^9 bytes/s); None for a zero cost (no bandwidth limit measurable)."""
    if cost_us_per_byte <= 0:
        return None
    return 1e-3 / cost_us_per_byte


def us_per_byte_from_gbps(gbps: float | None) -> float:
    """The inverse of :func:`gbps_from_us_per_byte`; None or infinity give 0."""
    if gbps is None or gbps <= 0 or math.isinf(gbps):
        return 0.0
    return 1e-3 / gbps


def _as_stored(cost_us_per_byte: float) -> float:
    """A per-byte cost as its bandwidth in a file gives it back.

    1e-3 / (1e-3 / x) is not always x in binary floating point: the last bit may move.
    """
    return us_per_byte_from_gbps(gbps_from_us_per_byte(cost_us_per_byte))


def _number(data: Mapping[str, Any], key: str, default: float) -> float:
    """An optional number of a fit's mapping; absent or null (the schema allows both) is ``default``."""
    value = data.get(key)
    return default if value is None else float(value)


def _whole(data: Mapping[str, Any], key: str) -> int:
    """An optional count of a fit's mapping; absent or null is 0."""
    value = data.get(key)
    return 0 if value is None else int(value)


@dataclass(frozen=True, slots=True)
class Segment:
    """A size range with its own alpha and beta (gamma stays the group's)."""

    min_bytes: int
    max_bytes: int
    alpha_us: float
    beta_us_per_byte: float
    median_abs_pct_error: float
    offset_us: float = 0.0
    """Added to the segment's alpha-beta time so that it starts where the previous segment ends
    (``piecewise.chain_pieces``): the piecewise model is continuous and never decreases with size."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "alpha_us": self.alpha_us,
            "beta_gbps": gbps_from_us_per_byte(self.beta_us_per_byte),
            "median_abs_pct_error": self.median_abs_pct_error,
            "offset_us": self.offset_us,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Segment:
        return cls(
            min_bytes=int(data["min_bytes"]),
            max_bytes=int(data["max_bytes"]),
            alpha_us=float(data["alpha_us"]),
            beta_us_per_byte=us_per_byte_from_gbps(data.get("beta_gbps")),
            median_abs_pct_error=_number(data, "median_abs_pct_error", 0.0),
            offset_us=float(data.get("offset_us") or 0.0),
        )


@dataclass(frozen=True, slots=True)
class Fit:
    """A fitted cost model for one (op, algorithm, backend, world size)."""

    op: str
    algo: str
    backend: str
    world_size: int
    alpha_us: float
    beta_us_per_byte: float
    gamma_us_per_byte: float | None
    """None when gamma could not be told apart from beta (folded into beta) or nothing is reduced."""
    r2: float
    """Coefficient of determination on log(time) (times span decades; raw R^2 only sees the largest)."""
    median_abs_pct_error: float
    max_abs_pct_error: float
    min_bytes: int
    max_bytes: int
    segments: tuple[Segment, ...] = ()
    gamma_folded: bool = False
    points: int = 0
    note: str = ""
    outliers: int = 0
    """Points set aside as outliers (measured far above the model) when fitting; still in the quality figures."""

    @property
    def beta_gbps(self) -> float | None:
        return gbps_from_us_per_byte(self.beta_us_per_byte)

    @property
    def gamma_gbps(self) -> float | None:
        return None if self.gamma_us_per_byte is None else gbps_from_us_per_byte(self.gamma_us_per_byte)

    def to_dict(self) -> dict[str, Any]:
        """The ``fit --json`` fit object (and a profile's ``fits:`` entry)."""
        return {
            "op": self.op,
            "algo": self.algo,
            "backend": self.backend,
            "world_size": self.world_size,
            "alpha_us": self.alpha_us,
            "beta_gbps": self.beta_gbps,
            "gamma_gbps": self.gamma_gbps,
            "r2": self.r2,
            "median_abs_pct_error": self.median_abs_pct_error,
            "max_abs_pct_error": self.max_abs_pct_error,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "segments": [s.to_dict() for s in self.segments],
            "gamma_folded": self.gamma_folded,
            "points": self.points,
            "note": self.note,
            "outliers": self.outliers,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fit:
        """Rebuild a fit from :meth:`to_dict`'s object. Raises ValueError naming a missing key, TypeError
        or ValueError for a value that is not a number where one is needed."""
        try:
            gamma = data.get("gamma_gbps")
            return cls(
                op=str(data["op"]),
                algo=str(data["algo"]),
                backend=str(data["backend"]),
                world_size=int(data["world_size"]),
                alpha_us=float(data["alpha_us"]),
                beta_us_per_byte=us_per_byte_from_gbps(data.get("beta_gbps")),
                gamma_us_per_byte=None if gamma is None else us_per_byte_from_gbps(gamma),
                r2=_number(data, "r2", math.nan),
                median_abs_pct_error=_number(data, "median_abs_pct_error", math.nan),
                max_abs_pct_error=_number(data, "max_abs_pct_error", math.nan),
                min_bytes=_whole(data, "min_bytes"),
                max_bytes=_whole(data, "max_bytes"),
                segments=tuple(Segment.from_dict(s) for s in data.get("segments") or ()),
                gamma_folded=bool(data.get("gamma_folded", False)),
                points=_whole(data, "points"),
                note=str(data.get("note", "")),
                outliers=_whole(data, "outliers"),
            )
        except KeyError as exc:
            raise ValueError(f"a fit needs the key {exc.args[0]!r}") from exc

    def as_stored(self) -> Fit:
        """This fit as its file form reads back (``from_dict(to_dict())``, without the mapping).

        Per-byte costs go through their bandwidth, whose reciprocal may differ in the last bit. A
        profile holds its fits so: what it predicts now, it predicts to the bit after a save and a load.
        """
        gamma = self.gamma_us_per_byte
        return dataclasses.replace(
            self,
            beta_us_per_byte=_as_stored(self.beta_us_per_byte),
            gamma_us_per_byte=None if gamma is None or gbps_from_us_per_byte(gamma) is None else _as_stored(gamma),
            segments=tuple(
                dataclasses.replace(s, beta_us_per_byte=_as_stored(s.beta_us_per_byte)) for s in self.segments
            ),
        )

    def params_at(self, size_bytes: float) -> tuple[float, float]:
        """(alpha_us, beta_us_per_byte) in force at a size: its segment's, or the single line's."""
        segment = self.segment_at(size_bytes)
        if segment is None:
            return self.alpha_us, self.beta_us_per_byte
        return segment.alpha_us, segment.beta_us_per_byte

    def segment_at(self, size_bytes: float) -> Segment | None:
        """The segment in force at a size (None for a single line)."""
        if not self.segments:
            return None
        chosen = self.segments[0]
        for seg in self.segments:
            if size_bytes >= seg.min_bytes:
                chosen = seg
        # Between two segments' measured ranges, switch at the geometric midpoint of the gap.
        idx = self.segments.index(chosen)
        if idx + 1 < len(self.segments) and size_bytes > chosen.max_bytes:
            nxt = self.segments[idx + 1]
            if size_bytes > math.sqrt(max(chosen.max_bytes, 1) * max(nxt.min_bytes, 1)):
                chosen = nxt
        return chosen

    def predict_us(self, size_bytes: float, world_size: int | None = None) -> float:
        """Predicted time (us) at ``size_bytes``; at another world size the formula is re-evaluated at it."""
        p = self.world_size if world_size is None else world_size
        terms = cost_terms(self.op, self.algo, p, size_bytes)
        alpha, beta = self.params_at(size_bytes)
        gamma = self.gamma_us_per_byte or 0.0
        segment = self.segment_at(size_bytes)
        offset = segment.offset_us if segment is not None else 0.0
        return terms.time_us(alpha, beta, gamma) + offset

    def has_size_term(self) -> bool:
        """Whether the model's time grows with size: a transfer cost (beta, or a segment's), or a
        reduction cost (gamma, fitted across the op's algorithms) that this algorithm pays."""
        if self.beta_us_per_byte > 0 or any(s.beta_us_per_byte > 0 for s in self.segments):
            return True
        if not self.gamma_us_per_byte:
            return False
        return cost_terms(self.op, self.algo, self.world_size, max(self.max_bytes, 1)).gamma > 0

    def distrust(self) -> str:
        """Why this fit must not be used to extrapolate (empty when it may).

        A fit whose R^2 (on log time) is below ``R2_MIN`` explains little of its data, and one whose
        bandwidth term came out 0 has nothing to say about large messages: extrapolating either one to
        other sizes or world sizes would present noise as a finding.
        """
        if not self.r2 >= R2_MIN:
            return f"R^2 {self.r2:.2f} is below {R2_MIN:g}"
        if not self.has_size_term():
            return "no bandwidth term measurable (beta fitted as 0)"
        return ""
