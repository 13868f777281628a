"""Read nccl-tests output (its text table, or the ``-J`` JSON file) into collbench result rows.

Text: the header names the program (``# Collective test starting: all_reduce_perf`` since 2.13, or the
command line a user pasted above it), ``# nThread .. iters: 20 ..``, and one ``#  Rank  N Group  G
Pid .. on HOST device D [BUS] NAME`` line per rank (older versions: no ``Group``). Each data line is
``size count type redop [root]`` then ``time algbw busbw #wrong`` twice: out-of-place, then in-place
(``#wrong`` is ``N/A`` with ``-c 0``; versions before 2.0 print a float ``error`` instead). NCCL's
INFO lines may be interleaved; several tests may follow each other in one log.

JSON (nccl-tests' ``util.cu`` writer): ``{"args": [program, ...], "env": [...], "nccl_version": N,
"config": {"nthreads", "ngpus", "iterations", ..., "devices": [{"rank", "hostname", "device_info"},
...]}, "results": [{"size", "count", "type", "redop", "root", "out_of_place": {"time" | "cpu_time",
"alg_bw", "bus_bw", "nwrong"}, "in_place": {...}}], ...}``. Its ``devices`` holds the first device of
each process, so the rank count is ``len(devices) * nthreads * ngpus``.

Times are nccl-tests' averages over iterations; collbench's p50/mean/min/max all take that value.
algbw and busbw are recomputed from size and time with collbench's factors (the table rounds them to
two decimals, which loses small sizes).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collbench.errors import InputFileError
from collbench.fileio import read_text_file
from collbench.runtime.results import ResultRow
from collbench.schedules.ops import DTYPE_SIZES, Op, parse_dtype

PROGRAM_OPS: dict[str, Op] = {
    "all_reduce_perf": Op.ALL_REDUCE,
    "all_gather_perf": Op.ALL_GATHER,
    "reduce_scatter_perf": Op.REDUCE_SCATTER,
    "broadcast_perf": Op.BROADCAST,
    "reduce_perf": Op.REDUCE,
}
_UNMODELLED = ("alltoall_perf", "alltoallv_perf", "sendrecv_perf", "gather_perf", "scatter_perf", "hypercube_perf")

_PROGRAM_RE = re.compile(r"\b(\w+_perf)(?:_mpi)?\b")
# The block header of `collbench sweep --format nccl-tests`: one block per (op, algorithm).
_COLLBENCH_RE = re.compile(r"^#\s*collbench\s+(\S+)\s+algo\s+(\S+)\s+backend\s+(\S+)\s+nranks\s+(\d+)")
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_RANK_RE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$"
)
# "warmup iters: 5 iters: 20 agg iters: 1": the timed count is the one after a number.
_ITERS_RE = re.compile(r"\d\s+iters:\s*(\d+)")
_NTHREAD_RE = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_VERSION_RE = re.compile(r"nccl-library=(\d+)")
_DTYPE_NAMES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16"}


def nccl_version_string(code: int) -> str:
    """NCCL_VERSION_CODE to ``2.19.3`` (codes since 2.9 are major*10000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _canonical_dtype(name: str) -> str:
    key = _DTYPE_NAMES.get(name, name)
    try:
        return parse_dtype(key)
    except Exception:
        return name


def _op_from_program(program: str, path: Path) -> Op:
    name = Path(program).name.removesuffix("_mpi")
    if name in PROGRAM_OPS:
        return PROGRAM_OPS[name]
    if name in _UNMODELLED:
        raise InputFileError(str(path), f"{name} measures a collective collbench does not model")
    raise InputFileError(str(path), f"{program!r} is not an nccl-tests program collbench knows")


@dataclass
class _Run:
    """What the header of one test says, and its table rows so far."""

    op: Op | None = None
    iters: int = 0
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    version: str = ""
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    collbench: tuple[str, str, int] | None = None
    """(algorithm, backend, ranks) from a ``# collbench <op> algo A backend B nranks N`` block header."""
    has_root: bool | None = None


def _factor_row(
    op: Op,
    world_size: int,
    size: int,
    count: int,
    dtype: str,
    redop: str,
    root: int,
    in_place: bool,
    time_us: float,
    wrong: int,
) -> ResultRow:
    algbw = size / time_us / 1e3 if time_us > 0 else 0.0
    # nccl-tests prints the per-rank count for all-gather and reduce-scatter; collbench's count is the
    # elements of the larger buffer (size / dtype size) for every op, as DESIGN.md fixes it.
    if dtype in DTYPE_SIZES:
        count = size // DTYPE_SIZES[dtype]
    return ResultRow(
        op=op.value,
        algo="native",
        backend="nccl",
        world_size=world_size,
        dtype=dtype,
        redop=redop,
        in_place=in_place,
        size_bytes=size,
        count=count,
        iters=0,
        time_us=time_us,
        time_us_mean=time_us,
        time_us_min=time_us,
        time_us_max=time_us,
        algbw_gbps=algbw,
        busbw_gbps=algbw * op.spec.busbw_factor(world_size),
        wrong=wrong,
        root=max(root, 0),
        source="nccl-tests",
    )


def _wrong(token: str, legacy_error: bool) -> int:
    if token.upper() == "N/A":
        return -1
    value = float(token)
    if legacy_error:
        # Old versions print the largest error, not a count: zero means all right, else unknown count.
        return 0 if value == 0 else -1
    return round(value)


def _choose_op(named: Op | None, override: Op | None, path: Path) -> Op | None:
    """The log's own op, or ``--op`` when the log names none; InputFileError when the two disagree."""
    if named is not None and override is not None and named != override:
        # Filing an all-reduce log as broadcast would silently corrupt every comparison made from it.
        raise InputFileError(
            str(path), f"the log measured {named.value}, not {override.value}; drop --op or import the right log"
        )
    return named or override


def _parse_text(text: str, path: Path, op_override: Op | None) -> list[ResultRow]:
    runs: list[_Run] = [_Run()]
    legacy_error = False
    fallback_program: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            run = runs[-1]
            if m := _COLLBENCH_RE.match(stripped):
                if run.rows or run.op is not None:
                    run = _Run()
                    runs.append(run)
                run.op = Op.parse(m.group(1))
                run.collbench = (m.group(2), m.group(3), int(m.group(4)))
            elif m := _STARTING_RE.match(stripped):
                if run.rows or run.op is not None:
                    run = _Run(version=run.version)
                    runs.append(run)
                run.op = _op_from_program(m.group(1), path)
            elif m := _VERSION_RE.search(stripped):
                if run.rows:
                    run = _Run()
                    runs.append(run)
                run.version = nccl_version_string(int(m.group(1)))
            elif m := _RANK_RE.match(line.rstrip()):
                run.ranks[int(m.group(1))] = (m.group(2), m.group(3).strip())
            elif (m := _ITERS_RE.search(stripped)) and "nThread" in stripped:
                run.iters = int(m.group(1))
            elif "redop" in stripped and "size" in stripped:
                run.has_root = " root " in f" {stripped} "
                legacy_error = "#wrong" not in stripped and " error" in stripped
            continue
        tokens = stripped.split()
        if not tokens[0].isdigit():
            if m := _PROGRAM_RE.search(stripped):
                fallback_program = m.group(1)
            continue
        runs[-1].rows.append((len(runs[-1].rows), tokens))
    out: list[ResultRow] = []
    for run in runs:
        if not run.rows:
            continue
        named = run.op
        if named is None and fallback_program is not None:
            named = _op_from_program(fallback_program, path)
        op = _choose_op(named, op_override, path)
        if op is None:
            raise InputFileError(str(path), "cannot tell which collective the log measured; pass --op")
        if run.collbench is not None:
            algo, backend, world_size = run.collbench
            out.extend(
                replace(r, algo=algo, backend=backend, source="collbench")
                for tokens in (t for _, t in run.rows)
                for r in _text_row(tokens, run, op, world_size, legacy_error, path)
            )
            continue
        if not run.ranks:
            raise InputFileError(str(path), "no '#  Rank N ... device' lines: cannot tell the number of ranks")
        world_size = max(run.ranks) + 1
        hosts = {h for h, _ in run.ranks.values()}
        first_host, device = run.ranks[min(run.ranks)]
        run_rows: list[ResultRow] = []
        for _, tokens in run.rows:
            run_rows.extend(_text_row(tokens, run, op, world_size, legacy_error, path))
        out.extend(
            replace(
                r, iters=run.iters, nodes=len(hosts), host=first_host, device_name=device, backend_version=run.version
            )
            for r in run_rows
        )
    if not out:
        raise InputFileError(str(path), "no nccl-tests result lines found")
    return out


def _text_row(tokens: list[str], run: _Run, op: Op, world_size: int, legacy_error: bool, path: Path) -> list[ResultRow]:
    has_root = run.has_root if run.has_root is not None else len(tokens) >= 13
    head = 5 if has_root else 4
    body = tokens[head:]
    try:
        size, count = int(tokens[0]), int(tokens[1])
        dtype, redop = _canonical_dtype(tokens[2]), tokens[3]
        root = int(tokens[4]) if has_root else -1
        halves = [body[i : i + 4] for i in range(0, 8, 4) if len(body[i : i + 4]) == 4]
        rows = [
            _factor_row(
                op, world_size, size, count, dtype, redop, root, i == 1, float(h[0]), _wrong(h[3], legacy_error)
            )
            for i, h in enumerate(halves)
            if h[0].upper() != "N/A"  # that mode was not measured
        ]
    except (ValueError, IndexError) as exc:
        raise InputFileError(str(path), f"cannot read the result line {' '.join(tokens)!r} ({exc})") from exc
    if not rows:
        raise InputFileError(str(path), f"the result line {' '.join(tokens)!r} has no time columns")
    return rows


def _parse_json(data: dict[str, Any], path: Path, op_override: Op | None) -> list[ResultRow]:
    args = data.get("args") or []
    op = _choose_op(_op_from_program(str(args[0]), path) if args else None, op_override, path)
    if op is None:
        raise InputFileError(str(path), "the JSON names no program (args); pass --op")
    config = data.get("config") or {}
    devices = config.get("devices") or []
    if not devices:
        raise InputFileError(str(path), "the JSON lists no devices: cannot tell the number of ranks")
    world_size = len(devices) * int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
    env = dict(e.split("=", 1) for e in data.get("env") or [] if isinstance(e, str) and "=" in e)
    version = nccl_version_string(int(data["nccl_version"])) if "nccl_version" in data else ""
    hosts = {str(d.get("hostname", "")) for d in devices}
    out: list[ResultRow] = []
    for i, rec in enumerate(data.get("results") or []):
        try:
            size, count = int(rec["size"]), int(rec["count"])
            root = int(str(rec.get("root", "-1")).strip())
            for in_place, key in ((False, "out_of_place"), (True, "in_place")):
                part = rec.get(key)
                if part is None:
                    continue
                time_us = float(part.get("time", part.get("cpu_time")))
                nwrong = part.get("nwrong")
                wrong = -1 if nwrong is None or nwrong == "nan" else round(float(nwrong))
                row = _factor_row(
                    op,
                    world_size,
                    size,
                    count,
                    _canonical_dtype(str(rec["type"])),
                    str(rec["redop"]),
                    root,
                    in_place,
                    time_us,
                    wrong,
                )
                out.append(
                    replace(
                        row,
                        iters=int(rec.get("actual_iterations", config.get("iterations", 0))),
                        nodes=len(hosts),
                        host=str(devices[0].get("hostname", "")),
                        device_name=str(devices[0].get("device_info", "")),
                        backend_version=version,
                        nccl_algo=env.get("NCCL_ALGO", ""),
                        nccl_proto=env.get("NCCL_PROTO", ""),
                    )
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputFileError(str(path), f"result {i} is not an nccl-tests result ({exc})") from exc
    if not out:
        raise InputFileError(str(path), "the JSON holds no results")
    return out


def read_nccl_tests(path: Path | str, *, algo: str = "native", op: str | None = None) -> list[ResultRow]:
    """Result rows from an nccl-tests log (text table) or its ``-J`` JSON file.

    ``algo`` names the algorithm the rows are filed under (``native``, or what the user forced, such as
    ``native:ring``); ``op`` overrides the collective when the log does not name its program.
    Raises InputFileError for a missing file, a file that is not nccl-tests output, or one with no rows.
    """
    path = Path(path)
    if not path.exists():
        raise InputFileError(str(path), "no such file")
    text = read_text_file(path, "nccl-tests output")
    op_override = Op.parse(op) if op else None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputFileError(str(path), f"not JSON ({exc.msg})", line=exc.lineno) from exc
        if not isinstance(data, dict) or "results" not in data:
            raise InputFileError(str(path), "not an nccl-tests JSON file (no 'results')")
        rows = _parse_json(data, path, op_override)
    else:
        rows = _parse_text(text, path, op_override)
    # Blocks that collbench itself printed name their algorithm; nccl-tests' rows take the user's.
    return [r if r.source == "collbench" else replace(r, algo=algo) for r in rows]


def looks_like_nccl_tests(path: Path) -> bool:
    """Whether a file is nccl-tests output rather than collbench results (by extension, then content)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".csv", ".parquet"):
        return False
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        return False
    markers = ("nccl-tests", "out-of-place", "Avg bus bandwidth", "_perf", '"results"')
    return any(m in head for m in markers)


__all__ = ["PROGRAM_OPS", "looks_like_nccl_tests", "nccl_version_string", "read_nccl_tests"]
