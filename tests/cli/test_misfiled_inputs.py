"""One of collbench's own files, or a file users keep beside them, given where another kind is read: one
error line naming what the file is and what reads it. The files are the real ones (the example profile and
its rows, a published nccl-tests log and nvidia-smi paste, what fit --json and discover -O write from
them), copied under tmp_path by another name. Before: 'not YAML: expected '<document start>', but found
'{'' for rows given as a profile, 'not a valid collbench profile: $: 'backend' is a required property' for
a topology, 'profile schema_version None is not supported' for fits, 'not JSON: Extra data' for rows given
as fits or named .log, 'no nccl-tests result lines found' for a profile given to import."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.cli.render.results import rows_json
from collbench.filekinds import kind_of_text
from collbench.results.io import read_rows

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
LOG = REPO / "tests" / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
SMI = REPO / "tests" / "fixtures" / "real" / "a100-x8-nv12-17nics.topo.txt"
XML = REPO / "tests" / "fixtures" / "topologies" / "nccl-topo-2xa100-nvswitch-cx6.xml"
NVML = REPO / "tests" / "fixtures" / "nvml" / "h100-single.json"
RUNNER = CliRunner()

ROWS_IS = "this is collbench result rows (fit, report and compare read them)"
PROFILE_IS = "this is a collbench profile (export, predict --profile and report --profile read it)"
FITS_IS = "this is `collbench fit --json` output (predict --fits reads it)"
TOPOLOGY_IS = "this is a collbench topology (--from-file and --topology read it)"
LOG_IS = "this is nccl-tests output (import nccl-tests, fit, report and compare read it)"
SMI_IS = "this is `nvidia-smi topo -m` output (discover --from-nvidia-smi reads it)"
XML_IS = "this is an NCCL topology XML (discover --from-nccl-xml reads it)"
ARRAY_IS = (
    "this is a JSON array of collbench result rows (sweep --format json prints it; fit, report and compare"
    " read rows from .jsonl, .csv or .parquet, which sweep -O FILE.jsonl writes)"
)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files collbench writes from the real inputs: fits (fit --json) and a topology (discover -O)."""
    out = tmp_path_factory.mktemp("made")
    fits = RUNNER.invoke(app, ["fit", str(RESULTS), "--json"])
    assert fits.exit_code == 0, fits.output
    (out / "fits.json").write_text(fits.stdout)
    topo = RUNNER.invoke(app, ["discover", "--from-nvidia-smi", str(SMI), "-O", str(out / "topo.yaml")])
    assert topo.exit_code == 0, topo.output
    # What `sweep --format json` prints (its rows_json), kept with `> rows.json`: it was said as "no
    # nccl-tests result lines found" by fit, report and compare.
    (out / "array.json").write_text(rows_json(read_rows(RESULTS)[:3]) + "\n")
    return {
        "profile": PROFILE,
        "rows": RESULTS,
        "log": LOG,
        "smi": SMI,
        "xml": XML,
        **{p.stem: p for p in out.iterdir()},
    }


CASES = [
    (["export", "ompi-rules", "{F}"], "rows", "p.yaml", f"{ROWS_IS}, not a collbench profile"),
    (["export", "nccl-tuner", "{F}"], "fits", "p.yaml", f"{FITS_IS}, not a collbench profile"),
    (["export", "env", "{F}"], "topo", "p.yaml", f"{TOPOLOGY_IS}, not a collbench profile"),
    (["profile", "predict", "{F}", "--ranks", "8"], "log", "p.yaml", f"{LOG_IS}, not a collbench profile"),
    (["report", "{R}", "--profile", "{F}", "-O", "r.html"], "smi", "p.yaml", f"{SMI_IS}, not a collbench profile"),
    (
        ["predict", "--ranks", "8", "--fits", "{F}"],
        "rows",
        "fits.json",
        f"{ROWS_IS}, not `collbench fit --json` output",
    ),
    (["predict", "--ranks", "8", "--fits", "{F}"], "log", "fits.json", f"{LOG_IS}, not `collbench fit --json` output"),
    (["discover", "--from-file", "{F}"], "profile", "t.yaml", f"{PROFILE_IS}, not a collbench topology"),
    (["layout", "--from-file", "{F}"], "smi", "t.yaml", f"{SMI_IS}, not a collbench topology"),
    (["import", "nccl-tests", "{F}"], "profile", "x.log", f"{PROFILE_IS}, not nccl-tests output"),
    (["import", "nccl-tests", "{F}"], "rows", "x.log", f"{ROWS_IS}, not nccl-tests output"),
    (["fit", "{F}"], "topo", "run.log", f"{TOPOLOGY_IS}, not nccl-tests output or collbench results"),
    (["compare", "{F}", "{R}"], "fits", "base.log", f"{FITS_IS}, not nccl-tests output or collbench results"),
    (
        ["fit", "{F}"],
        "rows",
        "rows.log",
        "holds collbench result rows (JSONL): name it .jsonl; results are read by their suffix",
    ),
    # A paste or NCCL's XML given to --topology said only "unknown extension '.txt'".
    (["sweep", "--ranks", "2", "--topology", "{F}"], "smi", "topo.txt", f"{SMI_IS}, not a collbench topology"),
    (["tune", "--ranks", "2", "--quick", "--topology", "{F}"], "xml", "sys.xml", f"{XML_IS}, not a collbench topology"),
    # The topology's own sources said what failed inside them: 'no header line starting with GPU0' for a
    # topology YAML, 'not XML: not well-formed' for a paste, 'not JSON: Expecting value' for a profile.
    (["discover", "--from-nvidia-smi", "{F}"], "topo", "topo.txt", f"{TOPOLOGY_IS}, not `nvidia-smi topo -m` output"),
    (["layout", "--from-nvidia-smi", "{F}"], "xml", "topo.txt", f"{XML_IS}, not `nvidia-smi topo -m` output"),
    (["discover", "--from-nccl-xml", "{F}"], "smi", "topo.xml", f"{SMI_IS}, not an NCCL topology XML"),
    (["layout", "--from-nccl-xml", "{F}"], "profile", "topo.xml", f"{PROFILE_IS}, not an NCCL topology XML"),
    (["fit", "{F}"], "array", "rows.json", f"{ARRAY_IS}, not nccl-tests output"),
    (["compare", "{R}", "{F}"], "array", "new.json", f"{ARRAY_IS}, not nccl-tests output"),
    (["predict", "--ranks", "8", "--fits", "{F}"], "array", "f.json", f"{ARRAY_IS}, not `collbench fit --json` output"),
    (["discover", "--replay", "{F}"], "topo", "rec.json", f"{TOPOLOGY_IS}, not an NVML recording"),
    (["layout", "--replay", "{F}"], "rows", "rec.json", f"{ROWS_IS}, not an NVML recording"),
]


@pytest.mark.parametrize(("args", "source", "name", "message"), CASES)
def test_a_file_of_another_kind_is_named_for_what_it_is(
    args: list[str], source: str, name: str, message: str, made: dict[str, Path], tmp_path: Path
) -> None:
    given = tmp_path / name
    shutil.copyfile(made[source], given)
    argv = [a.format(F=given, R=RESULTS) for a in args]
    result = RUNNER.invoke(app, argv, env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {given}: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing written


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (PROFILE, "a collbench profile"),
        (RESULTS, "collbench result rows"),
        (LOG, "nccl-tests output"),
        (SMI, "`nvidia-smi topo -m` output"),
        (XML, "an NCCL topology XML"),
        (NVML, "an NVML recording"),
    ],
)
def test_each_real_file_is_told_for_what_it_is(path: Path, kind: str) -> None:
    found = kind_of_text(path.read_text(encoding="utf-8"))
    assert found is not None and found[0] == kind
