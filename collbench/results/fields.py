"""Checking a result row's fields as they are read back: type and range of each, by its annotation.

Result files come from users, from other tools and from crashed runs, so nothing in them is trusted:
every field is checked against the dataclass's own annotation (``int``, ``float``, ``bool``, ``str``,
or any of those ``| None``), numbers must be finite and in range, and names must be known (op,
algorithm, dtype, reduction). Fields other areas add to ``ResultRow`` are checked the same way
without touching this module; a field whose range is not "zero or more" says so in FIELD_RANGES.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from collbench.units import MAX_BYTES, MAX_RANKS, MAX_SECONDS

FIELD_RANGES: dict[str, tuple[float, float]] = {
    # Physical bounds (collbench.units): a size of 1e30 bytes or a million nodes is no measurement.
    "world_size": (1, MAX_RANKS - 1),
    "nodes": (0, MAX_RANKS - 1),  # 0: unknown (results.NODES_UNKNOWN), from a log that does not say
    "root": (0, MAX_RANKS - 1),
    "size_bytes": (0, MAX_BYTES - 1),
    "count": (0, MAX_BYTES - 1),
    "wrong": (-1, MAX_BYTES - 1),
    "segment_bytes": (1, MAX_BYTES - 1),
    "stall_fraction": (0.0, 1.0),
    "tune_round": (0, 1_000_000),  # a tune makes a handful of rounds
    "timed_samples": (1, math.inf),
    # More calls than a week holds at one a nanosecond: a -J file's actual_iterations of 1e300 was imported
    # as a 301-digit count that every reader of the rows then refused.
    "iters": (0, MAX_SECONDS * 10**9),
    # A time past a week a call, or a bandwidth past an exabyte a second, is no measurement either: a log's
    # 1e308 reached compare's sums (OverflowError) and the report's charts (math range error).
    **dict.fromkeys(("time_us", "time_us_mean", "time_us_min", "time_us_max", "time_us_p25"), (0, MAX_SECONDS * 1e6)),
    **dict.fromkeys(("algbw_gbps", "busbw_gbps"), (0, 1e9)),
    # Past the year 9999 (a row's timestamp of 1e20 s): the report's date of it was an OverflowError.
    "timestamp": (0, 253_402_300_799),
}
"""Inclusive (low, high) for numeric fields whose range is not [0, inf)."""

TIME_FIELDS = ("time_us_min", "time_us_p25", "time_us", "time_us_mean", "time_us_max")
MIN_TIME_US = 1e-3
"""No clock times a call below a nanosecond (collbench's CPU clock counts nanoseconds, CUDA events half
microseconds; nccl-tests prints two decimals of a microsecond): a row's time of 1e-12 us made a bandwidth
of 10^14 GB/s that fit took as a point. The one time that short a real log holds is a call that moved
nothing printed as 0.00 (``-b 0``: NCCL returns at once; published logs show 0.01 us), so an exact 0 is
a time of a 0-byte row only."""
_TIME_ORDER = (
    ("time_us_min", "time_us_p25"),
    ("time_us_p25", "time_us"),
    ("time_us_min", "time_us"),  # p25 is optional (older rows, imported logs)
    ("time_us", "time_us_max"),
    ("time_us_min", "time_us_mean"),
    ("time_us_mean", "time_us_max"),
)
_ORDER_SLACK = 1e-9
"""Relative: a mean of equal times, summed and divided, can land an ulp outside them."""


def time_problem(time_us: float, size_bytes: int) -> str | None:
    """Why ``time_us`` (microseconds) of a call of ``size_bytes`` is no measured time, or None."""
    if time_us >= MIN_TIME_US or (time_us == 0 and size_bytes == 0):
        return None
    if time_us == 0:
        return f"0 us for {size_bytes:,} bytes (a call that moves bytes takes time)"
    return f"{time_us:g} us is below a nanosecond, shorter than any clock times a call"


def check_times(fields: dict[str, Any]) -> None:
    """FieldError unless a row's times (checked fields, by name) are times of real calls and in order:
    min <= p25 <= median (``time_us``) <= max, min <= mean <= max, as any set of samples has them."""
    size = fields.get("size_bytes", 0)
    for name in TIME_FIELDS:
        value = fields.get(name)
        if value is not None and (problem := time_problem(value, size)) is not None:
            raise FieldError(name, problem)
    for low_name, high_name in _TIME_ORDER:
        low, high = fields.get(low_name), fields.get(high_name)
        if low is not None and high is not None and high < low * (1 - _ORDER_SLACK):
            raise FieldError(
                high_name,
                f"{high:g} us is below {low_name} {low:g} us (a row's times run min <= p25 <= time_us <= max, "
                "and min <= mean <= max)",
            )


CUDA_KERNEL = "cuda-kernel"
TORCH_OPS = "torch-ops"
REDUCE_PATHS = (CUDA_KERNEL, TORCH_OPS)
"""What ``ResultRow.reduce_path`` may say: how a GPU rank reduced (collbench's CUDA kernels, or torch's
own element-wise ops where the kernels could not be built)."""

_INT_TEXT = re.compile(r"^\s*[+-]?\d+(\.0*)?\s*$")
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


class FieldError(ValueError):
    """One field of one row is wrong; ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"field {field}: {problem}")


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    kind: type
    optional: bool
    required: bool
    default: Any


@functools.cache
def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        args = typing.get_args(hint) if union else ()
        optional = type(None) in args
        kinds = [a for a in args if a is not type(None)] if args else [hint]
        if len(kinds) != 1 or kinds[0] not in (int, float, bool, str):
            raise TypeError(f"{cls.__name__}.{f.name}: only int, float, bool, str (or | None) can be checked")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        specs.append(_FieldSpec(f.name, kinds[0], optional, required, None if required else f.default))
    return tuple(specs)


_MISSING = object()
_DEFAULT = object()
"""What the full check returns for an empty cell of a field with a default: the field is left out."""

_CACHED_NAME_CHARS = 64
"""Names longer than this are never remembered (no known name is as long): the memo of known names
stays a few hundred KB whatever a file holds."""

_FAST_INT_LIMIT = 1 << 62
"""Ints the fast path takes as they are: float() of any of them is finite, as the full check needs."""


@dataclasses.dataclass(frozen=True, slots=True)
class _FastPlan:
    """A class's fields by kind, for :func:`_fast_fields`: (name, required, optional, ...) each."""

    texts: tuple[tuple[str, bool, bool, bool, frozenset[str]], ...]
    """... whether the name must be known (_NAME_CHECKS), and the names its check lists as known."""
    ints: tuple[tuple[str, bool, bool, float, float], ...]
    """... and the inclusive range."""
    floats: tuple[tuple[str, bool, bool, float, float], ...]
    bools: tuple[tuple[str, bool, bool], ...]


@functools.cache
def _fast_plan(cls: type) -> _FastPlan:
    texts: list[tuple[str, bool, bool, bool, frozenset[str]]] = []
    ints: list[tuple[str, bool, bool, float, float]] = []
    floats: list[tuple[str, bool, bool, float, float]] = []
    bools: list[tuple[str, bool, bool]] = []
    for spec in _specs(cls):
        head = (spec.name, spec.required, spec.optional)
        if spec.kind is str:
            named = spec.name in _NAME_CHECKS
            # Only names the check itself accepts are looked up: the two never disagree.
            listed = _NAME_LISTS[spec.name]() if named else ()
            known = frozenset(n for n in listed if not _NAME_CHECKS[spec.name](n))
            texts.append((*head, named, known))
        elif spec.kind is bool:
            bools.append(head)
        else:
            low, high = FIELD_RANGES.get(spec.name, (0, math.inf))
            (ints if spec.kind is int else floats).append((*head, low, high))
    return _FastPlan(tuple(texts), tuple(ints), tuple(floats), tuple(bools))


def checked_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``cls`` from ``data``: every field converted and checked; others dropped.

    Accepts what JSON, CSV text cells and Parquet give: numbers as numbers or text, NaN/None/empty
    for a missing optional value. Raises FieldError naming the first bad field.

    A row as JSON gives it, every value already of its field's type and in range, takes a fast path
    that gives exactly what the full check would; on any doubt (text cells, NumPy numbers, anything
    wrong) the full check reads the whole row, and its error names the first bad field.
    """
    fast = _fast_fields(_fast_plan(cls), data)
    if fast is not None:
        return fast
    out: dict[str, Any] = {}
    for spec in _specs(cls):
        raw = data.get(spec.name, _MISSING)
        if raw is _MISSING:
            if spec.required:
                raise FieldError(spec.name, "missing")
            continue
        value = _checked_value(spec, raw)
        if value is not _DEFAULT:  # an empty cell of a field with a default: the default
            out[spec.name] = value
    return out


def _checked_value(spec: _FieldSpec, raw: Any) -> Any:
    """The full check of one field's value: the value to keep, _DEFAULT to leave it out, or FieldError."""
    value = _missing_to_none(raw, spec.kind, spec.optional)
    if value is None:
        if spec.optional:
            return None
        if spec.required:
            raise FieldError(spec.name, "empty")
        return _DEFAULT
    value = _convert(spec, value)
    _check_range(spec, value)
    return value


def _fast_fields(plan: _FastPlan, data: dict[str, Any]) -> dict[str, Any] | None:
    """What the full check gives for ``data`` when every value is plainly right, else None.

    Each field takes only values the full check keeps unchanged: an int in range for an int field, a
    finite float in range for a float field, a bool, text (a known name where one must be known),
    None where None is allowed; anything else, a missing required field included, is left to the
    full check. Rows from JSON are then read in a few microseconds instead of tens.
    """
    out: dict[str, Any] = {}
    get = data.get
    intern = sys.intern
    for name, required, optional, named, known in plan.texts:
        value = get(name, _MISSING)
        if value.__class__ is str:
            # An optional field reads blank text as None: the full check decides those.
            if optional and (not value or value[0].isspace() or value[-1].isspace()):
                return None
            if named and value not in known and (len(value) > _CACHED_NAME_CHARS or name_problem(name, value)):
                return None
            out[name] = intern(value)
        elif value is None and optional:
            out[name] = None
        elif value is not _MISSING or required:
            return None
    for name, required, optional, low, high in plan.ints:
        value = get(name, _MISSING)
        if value.__class__ is int:
            if not (low <= value <= high and -_FAST_INT_LIMIT < value < _FAST_INT_LIMIT):
                return None
            out[name] = value
        elif value is None and optional:
            out[name] = None
        elif value is not _MISSING or required:
            return None
    for name, required, optional, low, high in plan.floats:
        value = get(name, _MISSING)
        if value.__class__ is float:
            # value - value is 0.0 for every finite float, NaN for NaN and the infinities.
            if not (value - value == 0.0 and low <= value <= high):
                return None
            out[name] = value
        elif value is None and optional:
            out[name] = None
        elif value is not _MISSING or required:
            return None
    for name, required, optional in plan.bools:
        value = get(name, _MISSING)
        if value.__class__ is bool or (value is None and optional):
            out[name] = value
        elif value is not _MISSING or required:
            return None
    return out


@functools.lru_cache(maxsize=4096)
def name_problem(field: str, name: str) -> str:
    """What is wrong with ``name`` as a row's ``field`` (``op``, ``algo``, ``dtype``, ``redop``), listing
    the known names; "" when it is known. Other records naming the same things (stored fits) ask it too.
    Remembered: a file repeats the same few names on every row, and the names known never change while
    collbench runs."""
    return _NAME_CHECKS[field](name)


def _missing_to_none(value: Any, kind: type, optional: bool = False) -> Any:
    if value is None:
        return None
    # CSV writes None as an empty cell: empty text is missing, except in a text field that is never None.
    if isinstance(value, str) and (kind is not str or optional) and not value.strip():
        return None
    return value


def _convert(spec: _FieldSpec, value: Any) -> Any:
    kind = spec.kind
    if kind is str:
        if not isinstance(value, str):
            raise FieldError(spec.name, f"expected text, got {_show(value)}")
        return sys.intern(value)  # thousands of rows repeat the same few names
    if _is_bool(value):
        if kind is bool:
            return bool(value)
        raise FieldError(spec.name, f"expected a number, got {_show(value)}")
    if kind is bool:
        if isinstance(value, str) and value.strip().lower() in (*_TRUE, *_FALSE):
            return value.strip().lower() in _TRUE
        # Compared as they are: float() of an int past 1e308 raises OverflowError, not ValueError.
        if _is_number(value) and value in (0, 1):
            return bool(value)
        raise FieldError(spec.name, f"expected true or false, got {_show(value)}")
    if isinstance(value, str):
        if "_" in value:  # float() reads "1_0" as 10; no table writes numbers that way
            raise FieldError(spec.name, f"expected a number, got {_show(value)}")
        try:
            number = float(value) if kind is float or not _INT_TEXT.match(value) else int(value.strip().split(".")[0])
        except ValueError:
            raise FieldError(spec.name, f"expected a number, got {_show(value)}") from None
    elif _is_number(value):
        number = value
    else:
        raise FieldError(spec.name, f"expected a number, got {_show(value)}")
    try:
        as_float = float(number)
    except OverflowError:
        raise FieldError(spec.name, f"{_show(value)} is out of range") from None
    if not math.isfinite(as_float):
        raise FieldError(spec.name, f"{_show(value)} is not a finite number")
    if kind is int:
        # An int as it is (a float would round one past 2**53); a float only when it is whole.
        if not isinstance(number, int) and not as_float.is_integer():
            raise FieldError(spec.name, f"expected a whole number, got {_show(value)}")
        return int(number)
    return as_float


def _check_range(spec: _FieldSpec, value: Any) -> None:
    if spec.kind in (int, float):
        low, high = FIELD_RANGES.get(spec.name, (0, math.inf))
        if not low <= value <= high:
            bound = f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
            raise FieldError(spec.name, f"{_show(value)} is out of range (must be {bound})")
        return
    if spec.name in _NAME_CHECKS:
        # Remembered per name, as on the fast path: a CSV's rows come this way, each naming the same few.
        problem = name_problem(spec.name, value)
        if problem:
            raise FieldError(spec.name, problem)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) or getattr(getattr(value, "dtype", None), "kind", "") in ("i", "u", "f")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _op_names() -> tuple[str, ...]:
    from collbench.schedules.ops import Op

    return tuple(op.value for op in Op)


def _algo_names() -> tuple[str, ...]:
    """collbench's own algorithms; ``native`` and its NCCL variants are parsed (_known_algo)."""
    from collbench.schedules.registry import algorithm_names

    return tuple(algorithm_names())


def _dtype_names() -> tuple[str, ...]:
    from collbench.schedules.ops import DTYPE_SIZES

    return tuple(DTYPE_SIZES)


def _redop_names() -> tuple[str, ...]:
    from collbench.schedules.ops import REDOPS

    # nccl-tests prints "none" in the redop column of collectives that do not reduce (all-gather,
    # broadcast), and its imported rows keep it.
    return (*REDOPS, "none")


def _reduce_path_names() -> tuple[str, ...]:
    return REDUCE_PATHS


def _known_op(name: str) -> str:
    known = _op_names()
    return "" if name in known else f"unknown op {_show(name)}; known: {', '.join(known)}"


def _known_algo(name: str) -> str:
    from collbench.backends import forced_problem
    from collbench.nccl.variants import is_native

    if is_native(name):
        # A variant of a backend library's own collective, forced: the backends know their own spellings.
        return "" if forced_problem(name) is None else f"unknown native variant {_show(name)}"
    known = _algo_names()
    # native is a registered spec, so the list names it already (adding it again read "..., native, native").
    return "" if name in known else f"unknown algorithm {_show(name)}; known: {', '.join(known)}"


def _known_dtype(name: str) -> str:
    known = _dtype_names()
    return "" if name in known else f"unknown dtype {_show(name)}; known: {', '.join(known)}"


def _known_redop(name: str) -> str:
    known = _redop_names()
    return "" if name in known else f"unknown reduction {_show(name)}; known: {', '.join(known)}"


def _known_reduce_path(name: str) -> str:
    known = _reduce_path_names()
    return "" if name in known else f"unknown reduce path {_show(name)}; known: {', '.join(known)}"


_NAME_CHECKS: dict[str, Callable[[str], str]] = {
    "op": _known_op,
    "algo": _known_algo,
    "dtype": _known_dtype,
    "redop": _known_redop,
    "reduce_path": _known_reduce_path,
}
"""Text fields whose value must be a known name: each gives the problem, or "" when it is known."""

_NAME_LISTS: dict[str, Callable[[], tuple[str, ...]]] = {
    "op": _op_names,
    "algo": _algo_names,
    "dtype": _dtype_names,
    "redop": _redop_names,
    "reduce_path": _reduce_path_names,
}
"""The names each name check lists as known (the set the fast path looks names up in)."""
