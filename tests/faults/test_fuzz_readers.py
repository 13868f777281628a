"""Every reader of user files, fed mutated real files and hostile text: one clear error or a result.

Each reader gets the real file it is meant for, cut, spliced and with tokens swapped for hostile
values (NaN, infinities, negatives, huge numbers, YAML aliases and tags, CPU ranges), and arbitrary
text. Whatever it is given, it either returns or raises a collbench error of one line: never a
traceback (another exception), never unbounded memory (checked with tracemalloc), and within
hypothesis' deadline.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.errors import CollbenchError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
MAX_PEAK_BYTES = 64 << 20
"""Peak Python memory one reader may take for these inputs (all under 100 KB)."""

HOSTILE = [
    "nan", "NaN", "-nan", "inf", "Infinity", "-Infinity", "1e999", "-1", "-0.5", "0",
    "99999999999999999999999999", "", "null", "~", "[]", "{}", "true", "&a [*a]", "*a",
    "!!python/object/apply:os.system ['true']", "0-100000000", "\x00", "\ufeff", "é", "<!--", "<a>",
    '"', "'", ",", "\t", "\n", "|", "N/A", "NV18", "SYS", "all_reduce_perf", "#", "{{", "]]",
]  # fmt: skip
_TOKEN = re.compile(r"[A-Za-z0-9_.+\-]+")


@st.composite
def mutated(draw: st.DrawFn, seed: str) -> str:
    """``seed`` with one to four edits: a token swapped for a hostile one, a slice cut, doubled or spliced."""
    text = seed
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["token", "token", "cut", "dup", "insert"]))
        if kind == "token":
            spans = [m.span() for m in _TOKEN.finditer(text)]
            if not spans:
                continue
            a, b = spans[draw(st.integers(0, len(spans) - 1))]
            text = text[:a] + draw(st.sampled_from(HOSTILE)) + text[b:]
            continue
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 300)))
        if kind == "cut":
            text = text[:i] + text[j:]
        elif kind == "dup":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.text(max_size=40)) + text[i:]
    return text


def _any_text(seed: str) -> st.SearchStrategy[str]:
    return st.one_of(mutated(seed), st.text(max_size=300))


def _assert_clean(read: Callable[[], Any]) -> None:
    tracemalloc.start()
    try:
        read()
    except CollbenchError as exc:
        message = str(exc)
        assert message and "\n" not in message, f"error is not one line: {message!r}"
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MAX_PEAK_BYTES, f"peak {peak / 2**20:.0f} MiB"


FUZZ = settings(
    max_examples=20,
    deadline=None,  # the first call compiles the profile schema (no wall time is asserted: tests check correctness)
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


def _seed_rows_text(suffix: str) -> str:
    from collbench.results.io import read_rows, write_rows

    src = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    rows = read_rows(src)[:4]
    out = Path(pytest.importorskip("tempfile").mkdtemp()) / f"seed{suffix}"
    write_rows(out, rows)
    text = out.read_text()
    out.unlink()
    out.parent.rmdir()
    return text


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_result_rows(tmp_path: Path, suffix: str) -> None:
    from collbench.results.io import read_rows

    seed = _seed_rows_text(suffix)

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        path = _write(tmp_path, f"r{suffix}", text)
        _assert_clean(lambda: read_rows(path))

    check()


def test_profiles(tmp_path: Path) -> None:
    from collbench.profile.document import Profile

    seed = (REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text()

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        path = _write(tmp_path, "p.yaml", text)
        _assert_clean(lambda: Profile.load(path))

    check()


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((None, 1024), {}),
        ((7, 1024), {}),
        ((["all-reduce"], 1024), {}),
        (("all-reduce", None), {}),
        (("all-reduce", 1024), {"world_size": "4"}),
        (("all-reduce", 1024), {"nodes": 1.5}),
    ],
)
def test_profile_select_refuses_what_is_not_an_op_or_size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    from collbench import Profile

    profile = Profile.load(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml")
    with pytest.raises(ValueError, match="must be"):
        profile.select(*args, **kwargs)


def test_fits_for_predict(tmp_path: Path) -> None:
    # `fit --json` output; a profile's fits are Profile.load's (test_profiles above), which predict reads.
    import yaml

    from collbench.models.stored import load_fits

    profile = yaml.safe_load((REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text())
    seed = json.dumps({"fits": profile["fits"]}, indent=1)

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        path = _write(tmp_path, "fits.json", text)
        _assert_clean(lambda: load_fits(path))

    check()


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_topologies(tmp_path: Path, fmt: str) -> None:
    from collbench.topology.io import dumps_topology, load_topology
    from collbench.topology.nvidia_smi import parse_nvidia_smi_topo

    topo = parse_nvidia_smi_topo((FIXTURES / "topologies" / "a100x4-nv4-nics.topo.txt").read_text())
    seed = dumps_topology(topo, fmt)

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        path = _write(tmp_path, f"t.{fmt}", text)
        _assert_clean(lambda: load_topology(path))

    check()


@pytest.mark.parametrize("name", ["a100x4-nv4-nics.topo.txt", "pcie8-pix-pxb.topo.txt"])
def test_nvidia_smi_text(name: str) -> None:
    from collbench.topology.nvidia_smi import parse_nvidia_smi_topo

    seed = (FIXTURES / "topologies" / name).read_text()

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        _assert_clean(lambda: parse_nvidia_smi_topo(text, "smi.txt", []))

    check()


def test_nccl_topology_xml() -> None:
    from collbench.topology.nccl_xml import parse_nccl_xml

    seed = (FIXTURES / "topologies" / "nccl-topo-2xa100-nvswitch-cx6.xml").read_text()

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        _assert_clean(lambda: parse_nccl_xml(text, "topo.xml"))

    check()


@pytest.mark.parametrize("name", ["all_reduce_perf_8gpu.log", "all_reduce_perf_2node_legacy.log"])
def test_nccl_tests_logs(tmp_path: Path, name: str) -> None:
    from collbench.importers.nccl_tests import read_nccl_tests

    seed = (FIXTURES / "nccl_tests" / name).read_text()

    @FUZZ
    @given(text=_any_text(seed))
    def check(text: str) -> None:
        path = _write(tmp_path, "log.txt", text)
        _assert_clean(lambda: read_nccl_tests(path, notes=[]))

    check()


@pytest.mark.parametrize(
    ("ranks", "message"),
    [
        (",".join(str(n) for n in range(8, 20_008)), "20000 shapes given; at most 64"),
        # A whole number of too many ranks is said so (it was "must be a whole number of ranks, at least 2").
        ("9" * 5000, "--ranks '" + "9" * 57 + "...': a predicted shape takes fewer than 2^20"),
        ("1000000000", "--ranks 1000000000: a predicted shape takes fewer than 2^20 (1,048,576) ranks"),
        ("2x", "--ranks '2x': each value must be a whole number of ranks, at least 2, got '2x'"),
        ("8:" + "9" * 5000, "nodes must be"),
    ],
)
def test_profile_predict_bounds_the_shapes_it_is_given(tmp_path: Path, ranks: str, message: str) -> None:
    from typer.testing import CliRunner

    from collbench.cli.app import app

    result = CliRunner().invoke(
        app,
        ["profile", "predict", str(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"), "--ranks", ranks,
         "--output", str(tmp_path / "p.yaml")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "p.yaml").exists()
