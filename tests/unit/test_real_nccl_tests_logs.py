"""Every published nccl-tests log in tests/fixtures/real, imported and checked against the log itself.

Expected figures were read by eye from each file (SOURCES.md says where each was published): the
result lines, the op, the ranks and nodes, and the first and last times. Every row's time is also
compared with the log's own columns, found by a plain scan that knows nothing of launchers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.results.row import NODES_UNKNOWN

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


@dataclass(frozen=True)
class LogFacts:
    op: str
    lines: int
    """Result lines in the log; each gives an out-of-place and an in-place row."""
    ranks: int
    nodes: int
    first: tuple[float, float]
    last: tuple[float, float]
    iters: int = 0
    notes: tuple[str, ...] = ()


INFERRED_AR = "took all-reduce from the columns (redop sum with no root"
UNKNOWN_NODES = "node count left unknown"

FACTS: dict[str, LogFacts] = {
    "all_reduce_perf-2080ti-x2-autodl.log": LogFacts("all-reduce", 28, 2, 1, (12.25, 12.00), (268588, 268461), 20),
    "all_gather_perf-2080ti-x2-autodl.log": LogFacts("all-gather", 28, 2, 1, (0.33, 0.36), (141614, 139719), 20),
    "broadcast_perf-2080ti-x2-autodl.log": LogFacts("broadcast", 28, 2, 1, (11.65, 11.37), (96800, 96803), 20),
    "reduce_perf-2080ti-x2-autodl.log": LogFacts("reduce", 28, 2, 1, (10.39, 9.88), (96427, 96450), 20),
    "all_reduce_perf-h100-2node-mpirun-gcp.log": LogFacts("all-reduce", 31, 16, 2, (135.8, 123.5), (47535, 47743), 20),
    # -d int8: held since collbench's rows hold every type nccl-tests measures.
    "all_reduce_perf-gh200-2node-int8-olivia.log": LogFacts(
        "all-reduce", 28, 8, 2, (26.95, 22.40), (2309.49, 2182.20), 20
    ),
    "all_reduce_perf-h100-2node-mpirun-tag-output-eks.log": LogFacts(
        "all-reduce", 32, 16, 2, (85.14, 62.82), (66108, 66143), 0, (INFERRED_AR,)
    ),
    "all_reduce_perf-dgx-a100-4node-slurm-legacy.log": LogFacts(
        "all-reduce",
        13,
        32,
        NODES_UNKNOWN,
        (135.3, 132.7),
        (43557, 43440),
        0,
        (INFERRED_AR, "took 32 ranks from busbw/algbw", UNKNOWN_NODES),
    ),
    "all_reduce_perf-dgx-a100-2node-k8s-legacy.log": LogFacts(
        "all-reduce",
        30,
        16,
        NODES_UNKNOWN,
        (38.63, 38.85),
        (42715, 42677),
        0,
        (INFERRED_AR, "took 16 ranks from busbw/algbw", UNKNOWN_NODES),
    ),
    "all_reduce_perf-16rank-k8s-roce-legacy.log": LogFacts(
        "all-reduce",
        29,
        16,
        NODES_UNKNOWN,
        (2193.5, 132.2),
        (175667, 176189),
        0,
        (INFERRED_AR, "took 16 ranks from busbw/algbw", UNKNOWN_NODES),
    ),
    "all_reduce_perf-p5-2node-mpijob-readme-excerpt.log": LogFacts(
        "all-reduce",
        7,
        16,
        NODES_UNKNOWN,
        (15.51, 15.52),
        (9197.5, 9195.2),
        0,
        (INFERRED_AR, "took 16 ranks from busbw/algbw", UNKNOWN_NODES),
    ),
    # `srun --label` on two nodes: every line starts "0: "; the excerpt keeps only the table.
    "all_reduce_perf-p4de-2node-srun-label-readme-excerpt.log": LogFacts(
        "all-reduce",
        29,
        16,
        NODES_UNKNOWN,
        (164.3, 163.3),
        (51406, 51406),
        0,
        (INFERRED_AR, "took 16 ranks from busbw/algbw", UNKNOWN_NODES),
    ),
    "all_reduce_perf-p5-2node-srun-label-readme-excerpt.log": LogFacts(
        "all-reduce",
        32,
        16,
        NODES_UNKNOWN,
        (69.12, 72.43),
        (66132, 66109),
        0,
        (INFERRED_AR, "took 16 ranks from busbw/algbw", UNKNOWN_NODES),
    ),
    # One '# Rank' line kept of 72, 144 and 1440: the rank count is read, the node count is not guessed.
    "all_reduce_perf-gb200-72rank-one-rank-line.log": LogFacts(
        "all-reduce", 5, 72, NODES_UNKNOWN, (1806.7, 1835.9), (20299, 20006), 0, (INFERRED_AR, "host of 1 of 72 ranks")
    ),
    "all_reduce_perf-gb200-144rank-one-rank-line.log": LogFacts(
        "all-reduce",
        6,
        144,
        NODES_UNKNOWN,
        (2156.8, 2093.7),
        (42067, 41557),
        0,
        (INFERRED_AR, "host of 1 of 144 ranks"),
    ),
    "all_reduce_perf-gb200-1440rank-one-rank-line.log": LogFacts(
        "all-reduce",
        6,
        1440,
        NODES_UNKNOWN,
        (7108.4, 7145.8),
        (84625, 84828),
        0,
        (INFERRED_AR, "host of 1 of 1440 ranks"),
    ),
}

# rccl-tests (AMD): rank lines without "Group" and "RCCL version :" lines under them; the second paste
# keeps no footer, no test name and no nThread line.
FACTS["all_reduce_perf-mi300x-2node-rccl-tests-no-group.log"] = LogFacts(
    "all-reduce", 32, 16, 2, (256.5, 254.7), (90115, 90127), 20
)
FACTS["all_reduce_perf-mi355x-2node-rccl-tests-no-footer.log"] = LogFacts(
    "all-reduce", 31, 16, 2, (41.16, 39.80), (43643, 43639), 0, (INFERRED_AR,)
)
# A legacy table (no '#' before its header) whose one line failed validation: error 1e+00 both ways.
FACTS["all_gather_perf-v100-x8-failed-legacy-issue-excerpt.log"] = LogFacts(
    "all-gather",
    1,
    8,
    1,
    (29122, 29169),
    (29122, 29169),
    0,
    ("took 8 ranks from the columns", "starts one process (one process, -t 1, -g 8): took 1 node"),
)

# The other programs (SOURCES.md): all-to-all prints one rank's block as count, so the columns give
# the ranks where the paste keeps no rank lines; send/recv's ranks come from its command line.
FACTS["alltoall_perf-gb300-x4-nccl-tests.log"] = LogFacts("all-to-all", 2, 4, 1, (10308, 9568.2), (20527, 18929), 50)
FACTS["alltoall_perf-gb300-64rank-elided-rank-lines.log"] = LogFacts(
    "all-to-all", 2, 64, NODES_UNKNOWN, (13028, 12953), (25357, 25565), 50, ("host of 4 of 64 ranks",)
)
FACTS["alltoall_perf-b300-x8-no-rank-lines.log"] = LogFacts(
    "all-to-all",
    1,
    8,
    NODES_UNKNOWN,
    (11126, 11206),
    (11126, 11206),
    20,
    ("took 8 ranks from the columns", UNKNOWN_NODES),
)
FACTS["alltoall_perf-b300-2node-no-rank-lines.log"] = LogFacts(
    "all-to-all",
    1,
    16,
    NODES_UNKNOWN,
    (44498, 44500),
    (44498, 44500),
    50,
    ("took 16 ranks from the columns", UNKNOWN_NODES),
)
FACTS["alltoall_perf-mi355x-x8-rccl-tests.log"] = LogFacts("all-to-all", 2, 8, 1, (20837, 20817), (41593, 41618), 20)
FACTS["sendrecv_perf-a100-x8-command-line.log"] = LogFacts(
    "sendrecv", 4, 8, 1, (1211.2, 1211.8), (5503.4, 5490.5), 0, ("took 8 ranks from the command line", "took 1 node")
)

# GB200, 2 hosts of 4: the command above the table is a shell command spread over lines (`mpirun \`,
# ` --np 8 \`, ..., the program last); no rank lines, no test name, no host names (issue 34: read as 1
# rank, busbw 0). The first line's count is not size / 8 / 4 B (the 8 GiB line's count is size / 4 B),
# so the columns give no rank count and the command line does.
FACTS["alltoall_perf-gb200-2node-mpirun-continued-lines.log"] = LogFacts(
    "all-to-all",
    2,
    8,
    NODES_UNKNOWN,
    (11426, 11418),
    (22698, 22741),
    0,
    ("took 8 ranks from the command line (mpirun -np 8, -t 1, -g 1)", UNKNOWN_NODES),
)
# nccl-tests before 2.0, alltoall_perf of 8 GPUs in one process: no test name, a redop column the rows
# leave empty and no root (issue 34: refused, "pass --op"); the columns fit all-gather and all-to-all,
# and the file's name says which.
FACTS["alltoall-a100-x8-legacy-superbench.log"] = LogFacts(
    "all-to-all",
    34,
    8,
    1,
    (1.63, 1.38),
    (33508, 33234),
    20,
    ("took all-to-all from the file's name (alltoall-a100-x8-legacy-superbench.log)",),
)

# An excerpt with no test name whose columns (a root, size = 2 x count x 4 B) fit scatter and gather
# alike: under a name that names neither, collbench asks for --op rather than guess (tests/cli/test_import.py);
# here the import names it.
NEEDS_OP = {"gather_perf-a100-2node-issue-excerpt.log": "gather"}
FACTS["gather_perf-a100-2node-issue-excerpt.log"] = LogFacts(
    "gather", 8, 2, NODES_UNKNOWN, (3324.7, 3003.4), (27257, 23752), 0, ("host of 1 of 2 ranks",)
)

# nccl-tests before 2.0, 8 GPUs in one process: no test name, no redop column for broadcast and no
# redop or root column for all-gather, an NCCL line under the header.
for _name, _op, _first, _last in [
    ("reduce_scatter-a100-x8-legacy-superbench.log", "reduce-scatter", (34.88, 33.65), (32464, 32502)),
    ("all_gather-a100-x8-legacy-superbench.log", "all-gather", (34.27, 33.57), (33646, 32669)),
    ("broadcast-a100-x8-legacy-superbench.log", "broadcast", (34.61, 34.33), (36896, 36599)),
]:
    FACTS[_name] = LogFacts(_op, 34, 8, 1, _first, _last, 20, (f"took {_op} from the columns",))

# A result line as it reads on screen once Open MPI's tags are gone: size, count, type, redop, [root,]
# then time algbw busbw wrong, twice.
_TAG = re.compile(r"\[\d+,\d+\]<stdout>:")
# Slurm's `srun --label` puts the task number before every line: "0: ", " 0: ".
_SRUN_LABEL = re.compile(r"^\s*\d+: ")
_NUMBER = r"[0-9.]+"


# nccl-tests' type names (src/common.cu's test_typenames), written out here apart from the importer's.
_TYPE_NAMES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"}


def _log_times(path: Path) -> list[tuple[int, float, float]]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        words = _SRUN_LABEL.sub(" ", _TAG.sub(" ", raw)).split()
        if len(words) >= 11 and words[0].isdigit() and words[2] in _TYPE_NAMES:
            head = len(words) - 8  # two halves of time, algbw, busbw, wrong end every line
            assert re.fullmatch(_NUMBER, words[head]) and re.fullmatch(_NUMBER, words[head + 4])
            out.append((int(words[0]), float(words[head]), float(words[head + 4])))
    return out


def test_every_real_log_has_its_facts() -> None:
    assert sorted(p.name for p in REAL.glob("*.log")) == sorted(FACTS)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_real_log(name: str) -> None:
    facts = FACTS[name]
    notes: list[str] = []
    rows = read_nccl_tests(REAL / name, notes=notes, op=NEEDS_OP.get(name))
    assert len(rows) == 2 * facts.lines
    assert {r.op for r in rows} == {facts.op}
    assert {(r.world_size, r.nodes, r.iters) for r in rows} == {(facts.ranks, facts.nodes, facts.iters)}
    out_of_place, in_place = rows[0::2], rows[1::2]
    assert not any(r.in_place for r in out_of_place) and all(r.in_place for r in in_place)
    assert (out_of_place[0].time_us, in_place[0].time_us) == pytest.approx(facts.first)
    assert (out_of_place[-1].time_us, in_place[-1].time_us) == pytest.approx(facts.last)
    # Every row's time is the log's, line for line.
    log = _log_times(REAL / name)
    assert len(log) == facts.lines
    assert [(r.size_bytes, r.time_us) for r in out_of_place] == [(s, t) for s, t, _ in log]
    assert [(r.size_bytes, r.time_us) for r in in_place] == [(s, t) for s, _, t in log]
    assert len(notes) == len(facts.notes), notes
    for note, fragment in zip(notes, facts.notes, strict=True):
        assert fragment in note and "\n" not in note


def test_mid_line_tags_and_nccl_lines_give_ranks_and_hosts() -> None:
    # Open MPI tags each printf: "-1[1,0]<stdout>:    85.14". NCCL's "rank R nranks N" lines name every
    # rank's host (test-nccl-worker-0 and -1), which is where the node count comes from.
    rows = read_nccl_tests(REAL / "all_reduce_perf-h100-2node-mpirun-tag-output-eks.log")
    assert rows[0].host == "test-nccl-worker-0" and rows[0].nodes == 2


def test_named_log_and_root_column() -> None:
    rows = read_nccl_tests(REAL / "broadcast_perf-2080ti-x2-autodl.log")
    assert {r.root for r in rows} == {0} and {r.redop for r in rows} == {"none"}
    assert rows[0].device_name == "NVIDIA GeForce RTX 2080 Ti" and rows[0].host == "autodl-container-xxxxx"


def test_rows_that_failed_validation_are_marked_failed() -> None:
    # error 1e+00 is far beyond float's bound (1e-5): nccl-tests counted both halves out of bounds.
    rows = read_nccl_tests(REAL / "all_gather_perf-v100-x8-failed-legacy-issue-excerpt.log")
    assert [r.wrong for r in rows] == [1, 1]


def test_rccl_tests_logs_give_version_device_and_hosts() -> None:
    rows = read_nccl_tests(REAL / "all_reduce_perf-mi300x-2node-rccl-tests-no-group.log")
    assert {r.wrong for r in rows} == {0}
    assert (rows[0].backend_version, rows[0].device_name, rows[0].host) == ("2.22.3", "AMD Instinct MI300X", "gpu-53")
    rows = read_nccl_tests(REAL / "all_reduce_perf-mi355x-2node-rccl-tests-no-footer.log")
    assert (rows[0].backend_version, rows[0].host) == ("2.26.6", "mi355-gpu-23")
    # Its rank lines name no GPU: its 'rccl-tests: Version' and 'RCCL version :' lines say RCCL ran it
    # (2.26.6 is RCCL's version, not NCCL's), and every row says so, as the MI300X log's do.
    assert {r.backend for r in rows} == {"rccl"} and rows[0].device_name == ""
    assert {r.backend for r in read_nccl_tests(REAL / "all_reduce_perf-mi300x-2node-rccl-tests-no-group.log")} == {
        "rccl"
    }
    assert {r.backend for r in read_nccl_tests(REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log")} == {"nccl"}
