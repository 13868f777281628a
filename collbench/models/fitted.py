"""A fitted cost model as a value: what ``fit.py`` finds, what profiles keep, what predictions read.

A :class:`Fit` is one (op, algorithm, backend, world size)'s alpha, beta and gamma, with the figures
that say how well they explain the measurements, and optionally :class:`Segment` s where one line did
not (protocol switches), each with its own alpha and beta. It prices a size at its own world size or
at another (the closed forms in ``costs.py`` re-evaluated there), and says when it must not be used
(:meth:`Fit.distrust`): a fit that misses one of its own points by more than 25%, or its points at
the median by more than 10%, is shown with the reason and used for nothing else.

Files hold per-byte costs as bandwidths (GB/s, a reader's unit); a fit holds them as us/byte (the
fitter's unit). ``to_dict``/``from_dict`` convert at the file's edge, and nowhere else.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collbench.errors import UserError
from collbench.models.costs import cost_terms, segments_of
from collbench.results.row import DEFAULT_SOURCE, NCCL_TESTS_SOURCE
from collbench.schedules.cost import CostTerms
from collbench.schedules.ops import Op

R2_MIN = 0.5
"""Below this R^2 (on log time) a fit is shown as not explaining its data, and not extrapolated."""

POINT_ERROR_BOUND_PCT = 25.0
"""A fit is usable only when the model is within this of every point it kept (percent of the time)..."""
MEDIAN_ERROR_BOUND_PCT = 10.0
"""...and within this of its points at the median (percent)."""

_REFERENCE_BYTES = float(1 << 20)
"""A size at which a cost formula's per-byte coefficient is read (formulas are linear in the size)."""


def op_has_payload(op: str) -> bool:
    """Whether ``op`` moves data (every op but barrier); an unknown name is taken to (its formula says)."""
    try:
        return Op.parse(op).spec.payload
    except UserError:
        return True


def bound_failure(median_abs_pct_error: float, max_abs_pct_error: float) -> str:
    """Why error figures break the usability bounds (empty when they keep them).

    A model that misses one of its own points by more than ``POINT_ERROR_BOUND_PCT`` does not describe
    the machine there, whatever its median says; one whose median misses by more than
    ``MEDIAN_ERROR_BOUND_PCT`` describes it nowhere well.
    """
    if not max_abs_pct_error <= POINT_ERROR_BOUND_PCT:
        return f"misses a point by {max_abs_pct_error:.0f}% (bound {POINT_ERROR_BOUND_PCT:g}% at every point)"
    if not median_abs_pct_error <= MEDIAN_ERROR_BOUND_PCT:
        return f"median error {median_abs_pct_error:.1f}% (bound {MEDIAN_ERROR_BOUND_PCT:g}%)"
    return ""


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
    return 0 if value is None else _as_whole(key, value)


def _as_whole(key: str, value: Any) -> int:
    """``value`` as a whole number; ValueError naming ``key`` where it is none (a hand-edited file's
    ``.inf`` made int() raise OverflowError, a list TypeError: neither said which field)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{key} is {value!r}; it must be a whole number") from None


def _segments(data: Mapping[str, Any]) -> list[Any]:
    """A fit's segments; absent or null is none. ValueError where they are not a list."""
    value = data.get("segments")
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"segments is {value!r}; it must be a list (null: one segment)")
    return value


MIXED_SOURCES = "mixed"
"""``Fit.source`` of a fit whose rows came from more than one source (a log's and collbench's own)."""
_SOURCE_WORDS = {
    NCCL_TESTS_SOURCE: "an nccl-tests log",
    DEFAULT_SOURCE: "collbench's own rows",
    MIXED_SOURCES: "an nccl-tests log and collbench's own rows together",
}


def _source(data: Mapping[str, Any]) -> str:
    """A fit's source; absent or null (files from before fits kept it) is empty. Raises ValueError for
    one that is not text."""
    value = data.get("source")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"source is {value!r}; it must be text")
    return value


def fitted_from(fit: Fit) -> str:
    """``fitted from an nccl-tests log`` (or collbench's own rows, ...): what measured the fit's points, in
    words for predict's basis; empty where the fit does not say."""
    if not fit.source:
        return ""
    return f"fitted from {_SOURCE_WORDS.get(fit.source, f'rows whose source is {fit.source[:40]!r}')}"


def _nodes(data: Mapping[str, Any]) -> int | None:
    """A fit's measured node count; absent, null or below 1 (files from before fits kept it, a source that
    did not say) is None. Raises ValueError for a value that is not a whole number."""
    value = data.get("nodes")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"nodes is {value!r}; it must be a whole number")
    return value if value >= 1 else None


def _segment_bytes(data: Mapping[str, Any]) -> int | None:
    """A fit's pipeline segment size; absent or null (files from before fits kept it, unsegmented) is
    None. Raises ValueError for a value that is not a whole number of bytes from 1 up."""
    value = data.get("segment_bytes")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"segment_bytes is {value!r}; it must be a whole number of bytes, 1 or more")
    return value


def _unusable_because(data: Mapping[str, Any]) -> str:
    """The reason a fit's mapping gives for not using it; a file from before fits said so is judged by
    its error figures (which then counted every point, so the judgement is if anything strict)."""
    if "usable" in data:
        return "" if data.get("usable") else str(data.get("unusable_because") or "not usable")
    return bound_failure(_number(data, "median_abs_pct_error", 0.0), _number(data, "max_abs_pct_error", 0.0))


@dataclass(frozen=True, slots=True)
class Segment:
    """A size range with its own alpha and beta (gamma stays the group's).

    A fit's segments meet where they hand over (the geometric middle of the gap between one's
    ``max_bytes`` and the next's ``min_bytes``): each has its own latency and per-byte cost, both
    non-negative, and they agree there, so the model is continuous and never decreases with size.
    """

    min_bytes: int
    max_bytes: int
    alpha_us: float
    beta_us_per_byte: float
    median_abs_pct_error: float
    offset_us: float = 0.0
    """Added to the segment's alpha-beta time. Fits made now leave it 0 (each segment's own alpha and
    beta join it to its neighbours); files written before that carry the offset that joined them."""

    @property
    def beta_gbps(self) -> float | None:
        """The per-byte cost as a bandwidth (GB/s); None for a zero cost, as :attr:`Fit.beta_gbps`."""
        return gbps_from_us_per_byte(self.beta_us_per_byte)

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "alpha_us": self.alpha_us,
            "beta_gbps": self.beta_gbps,
            "median_abs_pct_error": self.median_abs_pct_error,
            "offset_us": self.offset_us,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Segment:
        return cls(
            min_bytes=_as_whole("min_bytes", data["min_bytes"]),
            max_bytes=_as_whole("max_bytes", data["max_bytes"]),
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
    """Latency per step; with segments, the first segment's (the smallest messages')."""
    beta_us_per_byte: float
    """Cost per byte; with segments, the last segment's (the largest messages')."""
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
    """Points set aside because their own measurement marks them (every row's time among its stalls
    or in the upper of two modes; ``fit_points.py``); the note names them. Not in ``points`` and
    not in the quality figures, which describe the points the model was made from."""
    unusable_because: str = ""
    """Why the model does not describe its own points well enough to be used (``bound_failure``), or
    empty. An unusable fit is shown with its reason and used for nothing else (:meth:`distrust`)."""
    nodes: int | None = None
    """The nodes its points were measured on, where every row of the group says the same count; None
    where they do not say (a pasted log without host names), so that no reader takes a guess for a fact."""
    device: str = ""
    """The GPU its points were measured on (the rows' ``device_name``), where every row of the group
    names the same one; empty where they do not. predict reads the GPU's generation and links from it."""
    source: str = ""
    """Who measured its points: the rows' ``source`` (``collbench``, or ``nccl-tests`` for a log imported),
    where every row of the group says the same; :data:`MIXED_SOURCES` where they differ; empty where
    nothing said (a file from before fits kept it). predict's basis says it (:func:`fitted_from`)."""
    segment_bytes: int | None = None
    """The pipeline segment size its points ran with (the rows' ``segment_bytes``, the one most of its
    points name), or None (one segment: unsegmented, or no size given, as the sweep then built it). A
    pipelined algorithm (the trees) takes a step a segment: its closed form is priced with the
    segments a size has (:meth:`terms`)."""

    @property
    def beta_gbps(self) -> float | None:
        return gbps_from_us_per_byte(self.beta_us_per_byte)

    @property
    def gamma_gbps(self) -> float | None:
        return None if self.gamma_us_per_byte is None else gbps_from_us_per_byte(self.gamma_us_per_byte)

    def to_dict(self) -> dict[str, Any]:
        """The ``fit --json`` fit object (and a profile's ``fits:`` entry)."""
        return (
            {
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
                "usable": not self.distrust(),
                "unusable_because": self.distrust(),
            }
            | ({} if self.nodes is None else {"nodes": self.nodes})
            | ({"device": self.device} if self.device else {})
            | ({"source": self.source} if self.source else {})
            | ({} if self.segment_bytes is None else {"segment_bytes": self.segment_bytes})
        )

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
                segments=tuple(Segment.from_dict(s) for s in _segments(data)),
                gamma_folded=bool(data.get("gamma_folded", False)),
                points=_whole(data, "points"),
                note=str(data.get("note", "")),
                outliers=_whole(data, "outliers"),
                unusable_because=_unusable_because(data),
                nodes=_nodes(data),
                device=str(data.get("device") or ""),
                source=_source(data),
                segment_bytes=_segment_bytes(data),
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

    def terms(self, size_bytes: float, world_size: int | None = None) -> CostTerms:
        """The closed form's coefficients at a size on ``world_size`` ranks (default the fit's own), with
        the pipeline segments that size ran in (``costs.segments_of``: one a ``segment_bytes``)."""
        p = self.world_size if world_size is None else world_size
        segments = segments_of(self.algo, size_bytes, self.segment_bytes)
        return cost_terms(self.op, self.algo, p, size_bytes, segments=segments)

    def params_at(self, size_bytes: float, world_size: int | None = None) -> tuple[float, float]:
        """(alpha_us, beta_us_per_byte) in force at a size (at ``world_size``, default the fit's own):
        its segment's, or the single line's."""
        segment = self.segment_at(size_bytes, world_size)
        if segment is None:
            return self.alpha_us, self.beta_us_per_byte
        return segment.alpha_us, segment.beta_us_per_byte

    def segment_at(self, size_bytes: float, world_size: int | None = None) -> Segment | None:
        """The segment in force at a size (None for a single line), at ``world_size`` ranks (default:
        the fit's own).

        Segments hand over at the geometric midpoint of the gap between their measured ranges. At
        another world size the hand-over moves with the algorithm's bytes per step (:meth:`own_size`):
        two lines ``alpha_k A + beta_k B`` meet where ``B / A`` takes one value at every world size, so
        the model stays continuous and non-decreasing there too.
        """
        if not self.segments:
            return None
        size = self.own_size(size_bytes, world_size)
        chosen = self.segments[0]
        for seg in self.segments:
            if size >= seg.min_bytes:
                chosen = seg
        idx = self.segments.index(chosen)
        if idx + 1 < len(self.segments) and size > chosen.max_bytes:
            nxt = self.segments[idx + 1]
            if size > math.sqrt(max(chosen.max_bytes, 1) * max(nxt.min_bytes, 1)):
                chosen = nxt
        return chosen

    def own_size(self, size_bytes: float, world_size: int | None = None) -> float:
        """The size at the fit's own world size with the bytes per step that ``size_bytes`` has at
        ``world_size``: where a segment's range is read at another world size (the size itself at the
        fit's own, or where the formula has no steps or no bytes)."""
        if world_size is None or world_size == self.world_size or not self.segments:
            return size_bytes
        # One segment here: the mapping takes bytes per step as proportional to the size, which a
        # pipelined schedule's segments (a step a segment) would break.
        there = cost_terms(self.op, self.algo, world_size, size_bytes)
        here = cost_terms(self.op, self.algo, self.world_size, _REFERENCE_BYTES)
        if there.alpha <= 0 or here.alpha <= 0 or here.beta <= 0:
            return size_bytes
        return there.beta / there.alpha * here.alpha * _REFERENCE_BYTES / here.beta

    def predict_us(self, size_bytes: float, world_size: int | None = None) -> float:
        """Predicted time (us) at ``size_bytes``; at another world size the formula is re-evaluated at it."""
        terms = self.terms(size_bytes, world_size)
        alpha, beta = self.params_at(size_bytes, world_size)
        gamma = self.gamma_us_per_byte or 0.0
        segment = self.segment_at(size_bytes, world_size)
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

    @property
    def usable(self) -> bool:
        """Whether anything may use this fit beyond showing it (:meth:`distrust` is empty)."""
        return not self.distrust()

    def distrust(self) -> str:
        """Why this fit must not be used (empty when it may): for crossovers, predictions, predicted
        rules and the report's curves alike.

        A fit that misses one of its own points by more than ``POINT_ERROR_BOUND_PCT`` (or whose median
        error is above ``MEDIAN_ERROR_BOUND_PCT``) does not describe the machine there
        (``unusable_because``). One whose R^2 (on log time) is below ``R2_MIN`` explains little of its
        data, and one whose bandwidth term came out 0 has nothing to say about large messages: using
        any of them would present noise as a finding. A barrier has no bandwidth term by nature: its
        fit is usable when its latency is positive.
        """
        try:
            cost_terms(self.op, self.algo, max(self.world_size, 2), 1.0)
        except UserError as exc:  # an algorithm with no formula for the op (a stored fit of it)
            return str(exc)
        if self.unusable_because:
            return self.unusable_because
        if not self.r2 >= R2_MIN:
            # round() keeps the sign of a value that rounds to zero from below; + 0.0 drops it (-0.00).
            return f"R^2 {round(self.r2, 2) + 0.0:.2f} is below {R2_MIN:g}"
        if not op_has_payload(self.op):
            # A barrier's time is latency only: no bandwidth term to find, by its nature.
            return "" if self.alpha_us > 0 else "no latency measured (alpha fitted as 0)"
        if not self.has_size_term():
            return "no bandwidth term measurable (beta fitted as 0)"
        return ""
