"""What a profile persists per op: size ranges, each with the variant to run and the evidence for it.

Rules of one op cover ``[0, unbounded)`` with no gaps: rule ``i`` covers ``min_bytes..max_bytes``
inclusive (the NCCL tuner's convention), rule ``i + 1`` starts at ``max_bytes + 1``, and the last rule
has ``max_bytes = None`` (unbounded). ``tuning/selection/`` decides them; exports and the Python API
read them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collbench.nccl.variants import is_native
from collbench.schedules.ops import Op

NATIVE = "native"


class AlgoRef(str):
    """The algorithm a rule names, parsed once when the rule is made: one of collbench's own (``ring``), a
    backend library's own choice (``native``), or one of its variants forced (``native:segmented_ring``,
    NCCL's ``native:ring/ll128@4ch``, ``native@16ch``).

    It is its text, as read (a str, as :class:`Op` is: written back byte for byte, compared and printed as
    before); :attr:`name` and :attr:`variant` are its parts, so that no reader splits the text again.
    Whether a variant exists is the backends' to say when the profile is loaded
    (``profile.document.check_rule_algorithm``).
    """

    name: str
    """``native`` for a library's own collective (forced or not), else the collbench algorithm's name."""
    variant: str
    """What is forced of the library's own collective, the text after ``native:`` (``segmented_ring``,
    ``ring/ll128@4ch``) or after ``native`` (``@16ch``); empty for its own choice and for collbench's."""

    def __new__(cls, text: str) -> AlgoRef:
        if isinstance(text, AlgoRef):
            return text
        self = super().__new__(cls, text)
        key = text.strip().lower()
        native = is_native(key)
        # Not setattr (refused below): the parts are set once, here.
        self.__dict__.update(
            name=NATIVE if native else key,
            variant=key.removeprefix(NATIVE).removeprefix(":") if native else "",
        )
        return self

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"an algorithm reference is frozen: cannot set {key}")

    @property
    def native(self) -> bool:
        """Whether it names the library's own collective (its own choice or a variant forced)."""
        return self.name == NATIVE

    @property
    def forced(self) -> bool:
        """Whether it forces a variant of the library's own collective."""
        return bool(self.variant)

    @property
    def own_choice(self) -> bool:
        """Whether it leaves the choice to the library (plain ``native``)."""
        return self.native and not self.variant


OWN_PARAMS = ("segment_bytes", "layout", "segments", "channels", "protocol")
"""The ``params`` keys a rule of collbench's own algorithms takes: what its schedule is built with
(``torch.rules.plan_key``: the segment size or count, the layout measured), and the channels and protocol
NCCL's exports give NCCL's own ring or tree for it (``exporters.nccl_rules``)."""
NATIVE_PARAMS = ("segment_bytes", "layout", "channels", "protocol", "faninout")
"""The ``params`` keys a rule of a library's own collective (``native``, ``native:...``) takes: tune writes
segment_bytes and layout for every rule (:meth:`Variant.params`); NCCL's exports read channels and protocol
(``exporters.nccl_rules``), Open MPI's rules the segment size and fan-in/out (``exporters.ompi_measured``)."""


def params_problem(op: str, min_bytes: int, algo: AlgoRef, params: dict[str, Any]) -> str | None:
    """Why a rule's ``params`` hold a key no reader takes, or None. A key no reader takes would be ignored
    without a word (a typo, ``segmnet_bytes``, ran the rule unsegmented): it is refused, naming the key,
    the rule and the keys its algorithm takes."""
    keys = NATIVE_PARAMS if algo.native else OWN_PARAMS
    unknown = [str(k) for k in params if k not in keys]
    if not unknown:
        return None
    return f"{op} rule at {min_bytes} bytes: params key {unknown[0][:40]!r} is not one {algo} takes ({', '.join(keys)})"


@dataclass(frozen=True, slots=True)
class Variant:
    """An algorithm with the parameters it was measured with."""

    algo: str
    segment_bytes: int | None = None
    layout: str = "rank-order"

    def params(self) -> dict[str, Any]:
        return {"segment_bytes": self.segment_bytes, "layout": self.layout}

    def label(self) -> str:
        extra = [] if self.segment_bytes is None else [f"seg={self.segment_bytes}"]
        if self.layout not in ("rank-order", ""):
            extra.append(self.layout)
        return self.algo + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True, slots=True)
class Rule:
    """One size range of one op and what to run there.

    ``max_bytes`` is inclusive; None means unbounded. ``predicted_us``/``measured_us`` are at
    ``at_bytes`` (a measured size inside the range, when there is one). ``gain_vs_native`` is the time
    of ``native`` divided by the chosen algorithm's at ``at_bytes`` (2.0: twice as fast as the default;
    1.0 when the rule is native itself); None where native was neither measured nor fitted.
    """

    op: Op
    """Typed at load (``"all-reduce"`` becomes ``Op.ALL_REDUCE``); written back as its name."""
    min_bytes: int
    max_bytes: int | None
    algo: AlgoRef
    """Typed at load (``"native:ring"`` becomes an :class:`AlgoRef`); written back as its text."""
    params: dict[str, Any] = field(default_factory=dict)
    at_bytes: int | None = None
    predicted_us: float | None = None
    measured_us: float | None = None
    gain_vs_native: float | None = None
    tie_with: tuple[str, ...] = ()
    """Variants (labels) that could not be told apart from this one at a measured size of the range: the
    rule took the simpler choice (native first, then the algorithm already in use)."""
    separation: float | None = None
    """At ``at_bytes``: the fastest other variant's time over this one's, less 1 (0.2: the runner-up is 20%
    slower; negative when a tie kept a slightly slower, simpler choice)."""
    noise: float | None = None
    """At ``at_bytes``: the relative difference the measurements could not resolve (the switch threshold)."""
    gain_err: float | None = None
    """One standard error of ``gain_vs_native`` (``tuning.selection.ratio_error``: both times' noise), where
    both were measured at ``at_bytes``; None where one is a model's (or native is the rule itself)."""

    def __post_init__(self) -> None:
        # Op is a str: "all-reduce" and Op.ALL_REDUCE are one rule; keep the member, the type says so.
        object.__setattr__(self, "op", Op(self.op))
        object.__setattr__(self, "algo", AlgoRef(self.algo))
        if self.min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, got {self.min_bytes}")
        if self.max_bytes is not None and self.max_bytes < self.min_bytes:
            raise ValueError(f"max_bytes {self.max_bytes} is below min_bytes {self.min_bytes}")
        problem = params_problem(self.op.value, self.min_bytes, self.algo, self.params)
        if problem is not None:
            raise ValueError(problem)

    def covers(self, nbytes: int) -> bool:
        return self.min_bytes <= nbytes and (self.max_bytes is None or nbytes <= self.max_bytes)

    @property
    def variant(self) -> Variant:
        return Variant(
            self.algo,
            self.params.get("segment_bytes"),
            str(self.params.get("layout") or "rank-order"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op.value,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "algo": str(self.algo),
            "params": dict(self.params),
            "at_bytes": self.at_bytes,
            "predicted_us": self.predicted_us,
            "measured_us": self.measured_us,
            "gain_vs_native": self.gain_vs_native,
            **self._evidence(),
        }

    def _evidence(self) -> dict[str, Any]:
        """The tie evidence keys, only where there is evidence (older readers never see new keys)."""
        out: dict[str, Any] = {}
        if self.gain_err is not None:
            out["gain_err"] = self.gain_err
        if self.tie_with:
            out["tie_with"] = list(self.tie_with)
        if self.separation is not None:
            out["separation"] = self.separation
        if self.noise is not None:
            out["noise"] = self.noise
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rule:
        return cls(
            op=Op(str(data["op"])),
            min_bytes=int(data["min_bytes"]),
            max_bytes=None if data.get("max_bytes") is None else int(data["max_bytes"]),
            algo=AlgoRef(str(data["algo"])),
            params=dict(data.get("params") or {}),
            at_bytes=None if data.get("at_bytes") is None else int(data["at_bytes"]),
            predicted_us=_opt_float(data.get("predicted_us")),
            measured_us=_opt_float(data.get("measured_us")),
            gain_vs_native=_opt_float(data.get("gain_vs_native")),
            gain_err=_opt_float(data.get("gain_err")),
            tie_with=tuple(str(v) for v in data.get("tie_with") or ()),
            separation=_opt_float(data.get("separation")),
            noise=_opt_float(data.get("noise")),
        )


GAIN_LEGEND = "vs native: native's time / the rule's at 'at', ± one standard error"
"""What the gain's column says, under tune's table and the report's: as a check's title says its regret."""


def gain_text(rule: Rule) -> str:
    """The rule's gain over native as tune's table and the report show it: ``1.32±0.04x`` (one standard
    error, as a check's regret is said), ``1.32x`` where a model gave one of the times, ``-`` for none."""
    if rule.gain_vs_native is None:
        return "-"
    if rule.gain_err is None:
        return f"{rule.gain_vs_native:.2f}x"
    return f"{rule.gain_vs_native:.2f}±{rule.gain_err:.2f}x"


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def check_coverage(rules: Sequence[Rule]) -> None:
    """Assert the invariant every profile keeps: per op, contiguous ranges from 0 to unbounded.

    Raises ValueError naming the op and the gap or overlap.
    """
    by_op: dict[Op, list[Rule]] = defaultdict(list)
    for rule in rules:
        by_op[rule.op].append(rule)
    for op, op_rules in by_op.items():
        expected = 0
        for i, rule in enumerate(op_rules):
            if rule.min_bytes != expected:
                raise ValueError(f"{op}: rule {i} starts at {rule.min_bytes} bytes, expected {expected}")
            if rule.max_bytes is None:
                if i != len(op_rules) - 1:
                    raise ValueError(f"{op}: rule {i} is unbounded but is not the last")
                break
            expected = rule.max_bytes + 1
        else:
            raise ValueError(f"{op}: the last rule must be unbounded (max_bytes null)")
