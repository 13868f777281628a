"""Issue 13, bounded work: ``collbench fit`` streams its input, so memory does not grow with the file.

The real CLI (``collbench fit --json FILE``) runs in a child process under ``tracemalloc``, which
counts every byte Python allocates, exactly and whatever the machine's load: on a file of a few
rounds of a sweep's points and on one of ten times as many rounds, the peak may differ by little,
where holding the rows (as ``fit`` did) costs about a kilobyte a row. CSV is read in chunks, set small
here so that both files span many of them. ``benchmarks/bench_fit_memory.py`` measures the process's
RSS on files of 50 to 400 MB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collbench.results.io import write_rows
from collbench.results.row import ResultRow
from tests.faults._run import DEADLINE_S, env
from tests.synthetic_rows import point_row

_CHILD = """
import contextlib, io, json, sys, tracemalloc
from collbench.cli.app import app
from collbench.results import io as results

results.TABLE_CHUNK_ROWS = 64


def peak(path):
    out = io.StringIO()
    tracemalloc.start()
    with contextlib.redirect_stdout(out):
        try:
            app(["fit", "--json", path])
        except SystemExit as exc:
            if exc.code:
                raise
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    json.loads(out.getvalue())
    return traced


for small, large in zip(sys.argv[1::2], sys.argv[2::2]):
    # The small file twice: the first run pays for lazy imports (pandas for CSV), which is no growth.
    peak(small)
    print("PEAKS", json.dumps([peak(small), peak(large)]), file=sys.stderr)
"""

# What holding a row costs (tracemalloc measured 826 B a row of JSONL when fit read files whole), taken low.
_ROW_BYTES = 600
_GROWTH_BOUND = 160 << 10


def _rounds(rounds: int) -> list[ResultRow]:
    """``rounds`` repeats of 2 algorithms x 12 sizes x 2 modes (48 points), each round with its own times."""
    rows = []
    for r in range(rounds):
        for algo in ("ring", "recursive-doubling"):
            for k in range(6, 18):
                for in_place in (False, True):
                    p50 = (20.0 + (1 << k) / 2e3) * (1.0 + 0.01 * ((r * 7 + k) % 13))
                    p25 = p50 * (0.9 + 0.005 * ((r * 5 + k) % 11))
                    # min and max 10% either side of p50: p25 lies within them, as any run's does.
                    row = point_row(algo, 1 << k, p50, spread=0.1, world_size=4, in_place=in_place, time_us_p25=p25)
                    rows.append(row)
    return rows


@pytest.mark.slow  # 97 s on 2 busy cores (fit of 4 files in a child): CI runs it in its second step
def test_fit_memory_does_not_grow_with_the_rows_of_its_file(tmp_path: Path) -> None:
    files = []
    for suffix in (".jsonl", ".csv"):
        files += [tmp_path / f"small{suffix}", tmp_path / f"large{suffix}"]
        write_rows(files[-2], _rounds(5))
        write_rows(files[-1], _rounds(50))
    extra_rows = len(_rounds(50)) - len(_rounds(5))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, files)], capture_output=True, text=True, timeout=DEADLINE_S,
        env=env(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = [json.loads(x.removeprefix("PEAKS ")) for x in done.stderr.splitlines() if x.startswith("PEAKS ")]
    assert len(found) == 2, done.stderr
    # Holding the 2,160 extra rows would add about 1.7 MiB of JSONL rows (5 MiB through CSV's frames) as
    # fit did when it read files whole; streaming adds next to nothing (measured < 60 KiB).
    assert extra_rows * _ROW_BYTES > 6 * _GROWTH_BOUND
    for suffix, (small_peak, large_peak) in zip((".jsonl", ".csv"), found, strict=True):
        assert large_peak - small_peak < _GROWTH_BOUND, (suffix, small_peak, large_peak)
