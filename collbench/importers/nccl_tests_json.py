"""Read nccl-tests' ``-J`` JSON file (``util.cu``'s writer) into collbench result rows.

The file: ``{"args": [program, ...], "env": [...], "nccl_version": N,
"config": {"nthreads", "ngpus", "iterations", ..., "devices": [{"rank", "hostname", "device_info"},
...]}, "results": [{"size", "count", "type", "redop", "root", "out_of_place": {"time" | "cpu_time",
"alg_bw", "bus_bw", "nwrong"}, "in_place": {...}}], ...}``. Its ``devices`` holds the first device of
each process, so the rank count is ``len(devices) * nthreads * ngpus``.

The text reader (``nccl_tests.py``) shares the program-to-op lookup and the version spelling here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from collbench.errors import InputFileError
from collbench.importers.nccl_tests_ops import (
    PROGRAM_ALGOS,
    PROGRAM_OPS,
    UNMODELLED,
    canonical_dtype,
    factor_row,
    program_name,
)
from collbench.results.fields import FIELD_RANGES, time_problem
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op


def nccl_version_string(code: int) -> str:
    """NCCL_VERSION_CODE to ``2.19.3`` (codes since 2.9 are major*10000 + minor*100 + patch)."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _version(code: object, path: Path) -> str:
    """The version a -J file's ``nccl_version`` code says; InputFileError for one that is no such code (a
    hand-edited 'x' was int()'s ValueError traceback, -1 became '-1.9.99')."""
    try:
        number = int(str(code))
    except ValueError:
        number = 0
    if number < 1 or number >= 1_000_000:
        raise InputFileError(str(path), f"'nccl_version' {str(code)[:40]!r} is not NCCL's version code (22703: 2.27.3)")
    return nccl_version_string(number)


def op_from_program(program: str, path: Path) -> Op:
    name = program_name(program)
    if name in PROGRAM_OPS:
        return PROGRAM_OPS[name]
    if name in UNMODELLED:
        raise InputFileError(str(path), UNMODELLED[name])
    raise InputFileError(str(path), f"{program!r} is not an nccl-tests program collbench knows")


def choose_op(named: Op | None, override: Op | None, path: Path) -> Op | None:
    """The log's own op, or ``--op`` when the log names none; InputFileError when the two disagree."""
    if named is not None and override is not None and named != override:
        # Filing an all-reduce log as broadcast would silently corrupt every comparison made from it.
        raise InputFileError(
            str(path), f"the log measured {named.value}, not {override.value}; drop --op or import the right log"
        )
    return named or override


def parse_json(data: dict[str, Any], path: Path, op_override: Op | None) -> list[ResultRow]:
    args = data.get("args") or []
    op = choose_op(op_from_program(str(args[0]), path) if args else None, op_override, path)
    if op is None:
        raise InputFileError(str(path), "the JSON names no program (args); pass --op")
    config = data.get("config") or {}
    devices = (config.get("devices") or []) if isinstance(config, dict) else None
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise InputFileError(str(path), "'config.devices' is not a list of devices: not an nccl-tests -J file")
    if not devices:
        raise InputFileError(str(path), "the JSON lists no devices: cannot tell the number of ranks")
    # A field of another type (a hand-edited file, another tool's JSON) was int()'s ValueError traceback.
    try:
        world_size = len(devices) * int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
    except (TypeError, ValueError, OverflowError):
        raise InputFileError(
            str(path), "'config.nthreads' and 'config.ngpus' are not whole numbers: not an nccl-tests -J file"
        ) from None
    env = dict(e.split("=", 1) for e in data.get("env") or [] if isinstance(e, str) and "=" in e)
    version = _version(data["nccl_version"], path) if "nccl_version" in data else ""
    hosts = {str(d.get("hostname", "")) for d in devices}
    algo = PROGRAM_ALGOS.get(program_name(str(args[0])), "native") if args else "native"
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
                if not 0 <= time_us <= FIELD_RANGES["time_us"][1]:  # NaN fails it too; 1e308 broke compare
                    raise ValueError(f"time {time_us!r} is not a time (NaN, infinite, negative or past a week)")
                if (problem := time_problem(time_us, size)) is not None:
                    raise ValueError(f"time {time_us!r} is not a time ({problem})")
                nwrong = part.get("nwrong")
                wrong = -1 if nwrong is None or nwrong == "nan" else round(float(nwrong))
                row = factor_row(
                    op,
                    world_size,
                    size,
                    count,
                    canonical_dtype(str(rec["type"])),
                    # hypercube_perf's -J record holds "redop": "" (it reduces nothing), which its text
                    # table prints as an empty column and the text reader reads as none.
                    str(rec["redop"]).strip() or "none",
                    root,
                    in_place,
                    time_us,
                    wrong,
                )
                out.append(
                    replace(
                        row,
                        algo=algo,
                        iters=int(rec.get("actual_iterations", config.get("iterations", 0))),
                        nodes=len(hosts),
                        host=str(devices[0].get("hostname", "")),
                        device_name=str(devices[0].get("device_info", "")),
                        backend_version=version,
                        nccl_algo=env.get("NCCL_ALGO", ""),
                        nccl_proto=env.get("NCCL_PROTO", ""),
                    )
                )
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InputFileError(str(path), f"result {i} is not an nccl-tests result ({exc})") from exc
    if not out:
        raise InputFileError(str(path), "the JSON holds no results")
    return out
