"""Every command that prints a table, run as a user would at COLUMNS=80: no line is wider than 80
columns, no cell is cut short (Rich marks a cut with ``…``), and the numbers shown are the data's.

explain writes ``a0+…+d0`` on purpose (a run of pieces summed); that ellipsis sits between ``+``
signs, where Rich's truncation never puts one (it ends a cut cell)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.cli.render.models import format_time
from collbench.topology.nvidia_smi import read_nvidia_smi_topo
from collbench.units import format_bytes

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "fixtures" / "real"
TOPOLOGIES = REPO / "tests" / "fixtures" / "topologies"
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
H100_LOG = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"
NARROW = {"COLUMNS": "80", "NO_COLOR": "1"}
CUT = re.compile(r"…(?!\+)")


def run80(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=NARROW)
    assert result.exit_code == 0, result.output
    check_80(result.output)
    return result.output


def check_80(text: str) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= 80, f"{cell_len(line)} columns: {line!r}"
        assert not CUT.search(line), f"a cell cut short: {line!r}"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _matrix_rows(text: str, ids: set[str]) -> dict[str, list[str]]:
    """The matrix's cells per device, joined across the blocks it was printed in."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        tokens = line.split()
        if tokens and tokens[0] in ids and not line[0].isspace():  # a row, not the header above it
            rows.setdefault(tokens[0], []).extend(tokens[1:])
    return rows


@pytest.mark.parametrize(
    "path",
    [
        REAL / "a100-x8-nv12-17nics.topo.txt",
        REAL / "h200-x8-nv18-10nics-saved-whole.topo.txt",
        REAL / "v100-x8-nv1-nv2-18nics-glued-cells.topo.txt",
        TOPOLOGIES / "a100x4-nv4-nics.topo.txt",
    ],
    ids=lambda p: p.name.split(".")[0],
)
def test_discover_matrix_prints_in_blocks_with_every_cell(path: Path) -> None:
    run80("discover", "--from-nvidia-smi", str(path), "--bandwidth")
    out = run80("discover", "--from-nvidia-smi", str(path))
    topo = read_nvidia_smi_topo(path)
    devices = [*topo.rank_devices[:16], *topo.nics[:16]]
    rows = _matrix_rows(out, {d.id for d in devices})
    for row in devices:
        codes = [
            "X" if col.id == row.id else (lk.matrix_code if (lk := topo.link(row.id, col.id)) else "")
            for col in devices
        ]
        assert rows[row.id][: len(devices)] == [c for c in codes if c], row.id


def test_layout_and_explain() -> None:
    out = run80("layout", "--from-nvidia-smi", str(TOPOLOGIES / "pcie8-pix-pxb.topo.txt"))
    assert "GPU3 ─sys 10→ GPU4" in out  # a hop is never broken across lines
    out = run80("explain", "ring", "--op", "all-reduce", "--ranks", "4", "--size", "64M")
    assert "~10096.3 us" in out
    # 8 ranks: the whiteboard's pieces in blocks of columns, each repeating the rank column; every
    # cell of the last step whole (a7+…+h7 is explain's own notation, not a cut).
    out = run80("explain", "ring", "--ranks", "8")
    last = out[out.rindex("step 14") :]
    cells = [tok for ln in last.splitlines() if ln[:1] in "abcdefgh" and ln[:1].strip() for tok in ln.split()[1:]]
    assert len(cells) == 64 and all(re.fullmatch(r"[a-h]\d\+…\+[a-h]\d|Σ\d|[a-h]\d(\+[a-h]\d)*", c) for c in cells), (
        cells
    )
    run80("explain", "ring", "--ranks", "16")


def test_fit_and_predict(tmp_path: Path) -> None:
    fits = json.loads(CliRunner().invoke(app, ["fit", str(RESULTS), "--json"]).stdout)
    out = run80("fit", str(RESULTS))
    for fit in fits["fits"]:
        line = next(ln for ln in out.splitlines() if ln.startswith(fit["algo"] + " "))
        assert f"{fit['alpha_us']:.3g}" in line or f"{fit['alpha_us']:.0f}" in line, line
    fits_path = tmp_path / "h100.json"
    fits_path.write_text(CliRunner().invoke(app, ["fit", str(H100_LOG), "--json"]).stdout)
    args = ("predict", "--fits", str(fits_path), "--ranks", "1024", "--nodes", "128", "--sizes", "32K,1M,1G")
    out = run80(*args)
    run80("predict", "--fits", str(fits_path), "--ranks", "1024", "--hierarchy", "8")
    report = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    for p in report["predictions"]:
        row = next(
            ln for ln in out.splitlines() if ln.split()[:3] == [p["algo"], *format_bytes(p["size_bytes"]).split()]
        )
        assert format_time(p["time_us"]) in row, row


def test_profile_predict_rules_tables(tmp_path: Path) -> None:
    out = run80("profile", "predict", str(PROFILE), "--ranks", "8,64:8", "-O", str(tmp_path / "p.yaml"))
    assert "measured" in out and "∞" in out


def test_compare_and_import(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()[:60]]
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    base.write_text("".join(json.dumps(r) + "\n" for r in rows))
    new.write_text("".join(json.dumps(_slower(r, 1.5)) + "\n" for r in rows))
    out = run80("compare", str(base), str(new), "--fail-above", "200%")
    assert "verdict" in out
    out = run80("import", "nccl-tests", str(H100_LOG), "-O", str(tmp_path / "h100.jsonl"))


def _slower(row: dict, factor: float) -> dict:
    """The row as a run `factor` times slower makes it: every time scaled, the bandwidths divided (a row
    whose p50 alone moved past its max is refused as no real run's)."""
    times = {k: v * factor for k, v in row.items() if k.startswith("time_us")}
    rates = {k: v / factor for k, v in row.items() if k in ("algbw_gbps", "busbw_gbps")}
    return {**row, **times, **rates}


def test_sweep_table() -> None:
    out = run80("sweep", "--ranks", "2", "--backend", "gloo", "--algo", "ring,native", "-b", "8", "-e", "64", "-n", "2")
    assert "wrong elements: 0" in out


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_tune_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quick_made_small(monkeypatch, rounds=1, max_rounds=1)
    out = run80("tune", "--ranks", "2", "--quick", "--op", "all-reduce,barrier", "-O", str(tmp_path / "p.yaml"))
    assert "fitted models" in out and "profile:" in out
    # Every algorithm is named for both ops, in parts and rounds: what each op's lack is said once, the
    # op named first (it was a note per algorithm, each printed again by every part).
    skips = [ln for ln in out.splitlines() if ln.startswith("note: ") and ln.split(":")[1].strip() in OPS]
    assert sorted(ln.split(":")[1].strip() for ln in skips) == ["all-reduce", "barrier"], out


OPS = ("all-reduce", "barrier")


def test_skip_notes_read_back() -> None:
    from collbench.backends.base import parse_skip_note, skip_note

    assert parse_skip_note(skip_note("all-to-all", ["ring", "two-tree"])) == ("all-to-all", ["ring", "two-tree"])
    assert skip_note("barrier", ["ring"]) == "barrier: ring does not implement it; skipped"
    assert parse_skip_note("barrier moves no data: one point per algorithm at 0 bytes") is None


def _rows(times: dict[int, tuple[float, float]]) -> str:
    """Result rows at 2 ranks: size -> (p50 us, stall fraction)."""
    template = json.loads(RESULTS.read_text().splitlines()[0])
    rows = [
        dict(
            template,
            size_bytes=size,
            time_us=t,
            time_us_min=t * 0.98,
            time_us_p25=t * 0.99,
            time_us_mean=t * 1.01,
            time_us_max=t * 1.5,
            stall_fraction=f,
        )
        for size, (t, f) in times.items()
    ]
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_compare_marks_stalled_points_and_does_not_call_them_regressions(tmp_path: Path) -> None:
    """The issue's case: stall_fraction 0.92 at two points that doubled. Their time is the machine's load
    (results.noise: a point with STALL_MARK of its iterations over 3x its fastest is stalled)."""
    sizes = [2**k for k in range(8, 20)]
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    base.write_text(_rows({s: (100.0 + s / 1000, 0.0) for s in sizes}))
    stalled = {sizes[3], sizes[7]}
    new.write_text(
        _rows({s: ((100.0 + s / 1000) * (2 if s in stalled else 1), 0.92 if s in stalled else 0.0) for s in sizes})
    )
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--fail-above", "5%"], env=NARROW)
    assert result.exit_code == 0, result.output
    check_80(result.output)
    marked = [ln for ln in result.output.splitlines() if ln.split()[:2] in (["ring", str(s)] for s in stalled)]
    assert len(marked) == 2 and all("*" in ln and ln.rstrip().endswith("stalled") for ln in marked), marked
    assert "no point regressed" in result.output and "*: stalled, 2 points" in result.output
    report = json.loads(CliRunner().invoke(app, ["compare", str(base), str(new), "--json"]).stdout)
    assert sorted(p["size_bytes"] for p in report["points"] if p["stalled"]) == sorted(stalled)
    # The same slowdown without the stall is a regression.
    new.write_text(_rows({s: ((100.0 + s / 1000) * (2 if s in stalled else 1), 0.0) for s in sizes}))
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--fail-above", "5%"], env=NARROW)
    assert result.exit_code == 1 and "2 points regressed" in result.output, result.output


def test_compare_summary_split_at_80_columns_names_the_algorithm(tmp_path: Path) -> None:
    """With a stalled point and a long algorithm name the summary prints in two parts at 80 columns; the
    second ("stalled") part said only the op, so two algorithms' counts read as two lines of one op."""
    sizes = [2**k for k in range(8, 20)]
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    rd = '"algo": "recursive-doubling"'
    base.write_text(_rows({s: (100.0 + s / 1000, 0.0) for s in sizes}).replace('"algo": "ring"', rd))
    new.write_text(
        _rows({s: (100.0 + s / 1000, 0.92 if s == sizes[3] else 0.0) for s in sizes}).replace('"algo": "ring"', rd)
    )
    result = CliRunner().invoke(app, ["compare", str(base), str(new)], env=NARROW)
    assert result.exit_code == 0, result.output
    check_80(result.output)
    lines = result.output.splitlines()
    # The part that holds the stalled counts repeats op and algo (it was "op  stalled" alone).
    header = next(i for i, ln in enumerate(lines) if ln.split()[-1:] == ["stalled"] and "op" in ln.split())
    assert lines[header].split() == ["op", "algo", "stalled"], result.output
    assert lines[header + 2].split() == ["all-reduce", "recursive-doubling", "1"], result.output


def test_sweep_progress_bar_labels_elapsed_and_remaining() -> None:
    """At 80 columns the counts and times stay whole (they were cut to "1…" and "0:0…" beside a long
    point), and the point measured now has the line below."""
    from io import StringIO

    from rich.console import Console

    from collbench.cli.sweep import progress_bar

    target = Console(file=StringIO(), width=80, color_system=None)
    bar = progress_bar(target)
    task = bar.add_task("sweep", total=3470, now="all-reduce recursive-doubling 256 KiB out-of-place")
    bar.update(task, completed=1230)
    target.print(bar.get_renderable())
    text = target.file.getvalue()  # type: ignore[attr-defined]
    check_80(text)
    counts, point = (ln.rstrip() for ln in text.splitlines())
    assert re.search(r"^sweep .* 1230/3470 \d+:\d\d:\d\d elapsed, (\d+:\d\d:\d\d|-:--:--) left$", counts), text
    assert point == "  all-reduce recursive-doubling 256 KiB out-of-place", text


def test_fitted_models_of_several_shapes_have_a_ranks_column() -> None:
    """`tune --ranks 2,4`: a fit per algorithm and rank count; the table said each algorithm twice with
    nothing to tell the two rows apart."""
    from dataclasses import replace
    from io import StringIO

    from rich.console import Console

    from collbench.cli.render.profile import render_fits
    from collbench.profile.document import Profile

    profile = Profile.load(PROFILE)
    two = replace(profile, fits=(*profile.fits, *(replace(f, world_size=4) for f in profile.fits)))
    target = Console(file=StringIO(), width=80, color_system=None)
    target.print(render_fits(two))
    text = target.file.getvalue()  # type: ignore[attr-defined]
    check_80(text)
    assert any(ln.split()[:3] == ["algorithm", "ranks", "alpha"] for ln in text.splitlines()), text
    rows = [
        ln.split()[:2] for ln in text.splitlines() if ln.split()[:1] and ln.split()[0] in {f.algo for f in profile.fits}
    ]
    assert sorted(map(tuple, rows)) == sorted({(f.algo, str(n)) for f in profile.fits for n in (2, 4)})
    target = Console(file=StringIO(), width=80, color_system=None)
    target.print(render_fits(profile))
    assert "fitted models of all-reduce, 2 ranks" in target.file.getvalue()  # type: ignore[attr-defined]


def test_a_multi_shape_tune_names_the_shape_of_each_note_and_stall_line(tmp_path: Path) -> None:
    """`tune --ranks 2,4`: each shape's stall lines and "4 rounds ..." note followed the other's with
    nothing to tell them apart; one shape alone is not labelled."""
    from dataclasses import replace

    from collbench.cli import console as consoles
    from collbench.cli.tune import print_outcome_notes
    from collbench.profile.document import Profile
    from collbench.results.io import read_rows
    from collbench.tuning.pipeline import TuneOutcome

    profile = Profile.load(PROFILE)
    rows = [replace(r, stall_fraction=0.5) for r in read_rows(RESULTS)[:4]]

    def outcome(ranks: int) -> TuneOutcome:
        shape = replace(profile, rule_sets=(replace(profile.rule_sets[0], world_size=ranks, layout=None),))
        return TuneOutcome(
            profile=shape,
            rows=[replace(r, world_size=ranks) for r in rows],
            fits=[],
            notes=["4 rounds"],
            profile_path=tmp_path / "p.yaml",
            results_path=tmp_path / f"p-{ranks}.jsonl",
            plot_path=None,
            elapsed_s=1.0,
        )

    def printed(outcomes: list[TuneOutcome]) -> list[str]:
        with consoles.err_console.capture() as captured:
            print_outcome_notes(outcomes, marked="")
        return captured.get().splitlines()

    labels = [ln.split(":")[0] for ln in printed([outcome(2), outcome(4)])]
    # (How many stall lines depends on what the machine grants: a hint line where it refuses.)
    two, four = labels.index("note (2 ranks)"), labels.index("note (4 ranks)")
    assert set(labels[:two]) == {"stalls (2 ranks)"} and set(labels[two + 1 : four]) == {"stalls (4 ranks)"}, labels
    assert four == len(labels) - 1
    alone = [ln.split(":")[0] for ln in printed([outcome(2)])]
    assert alone[-1] == "note" and set(alone[:-1]) == {"stalls"}, alone


def test_sweep_legend_speaks_of_barrier_only_where_one_was_measured() -> None:
    from dataclasses import replace

    from collbench.cli.render.results import table_legend
    from collbench.results.io import read_rows

    row = read_rows(RESULTS)[0]
    assert "barrier" not in table_legend([row])  # an all-reduce sweep's legend named barrier too
    assert "(none for barrier: no data)" in table_legend([row, replace(row, op="barrier", size_bytes=0, count=0)])
