"""Commands that measure nothing never import torch.

torch takes about 10 s to import on a loaded machine, and the lent GPU machine's torch is not always
importable: a command that reads files and writes files (fit, predict, profile predict, every export,
report, compare, import, layout, discover of a saved or pasted topology) has no use for it, nor has a
sweep refused for its options before it measures. Each case runs the real command in a fresh interpreter
on small inputs under tmp_path and reports whether torch was in ``sys.modules`` when it exited: a check
of what was loaded, not of a time (as test_help_imports.py checks --help, and
test_tune_refused_before_torch.py a refused tune). 'profile predict' imported torch
through tuning/shapes.py (the tune pipeline) until its predictions moved to tuning/predicted_shapes.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import UserError
from collbench.exporters.nccl_plugin import c_compiler
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from tests.unit.test_mpich import BASE
from tests.unit.test_nccl_plugin import PROFILE as NCCL_PROFILE

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

_PROBE = """
import atexit, sys
atexit.register(lambda: print("torch imported:", "torch" in sys.modules))
from collbench.cli.app import main
sys.argv = ["collbench", *sys.argv[1:]]
main()
"""

INPUTS = {
    "gloo.yaml": REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml",
    "rows.jsonl": REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl",
    "nccl-tests.log": FIXTURES / "real" / "all_reduce_perf-2080ti-x2-autodl.log",
    "topo.txt": FIXTURES / "topologies" / "a100x4-nv4-nics.topo.txt",
    "topo.xml": FIXTURES / "topologies" / "nccl-topo-2xa100-nvswitch-cx6.xml",
    "nvml.json": FIXTURES / "nvml" / "h100-single.json",
}

# MPICH's exports take a profile measured over MPICH, with its own algorithms (test_mpich.py's kind).
MPICH_PROFILE = Profile(
    fingerprint="fp",
    host="h",
    backend="mpich",
    rule_sets=(
        RuleSet(
            4,
            1,
            (
                Rule("all-reduce", 0, 8191, "native", params={"segment_bytes": None, "layout": "rank-order"}),
                Rule(
                    "all-reduce",
                    8192,
                    None,
                    "native:recursive_doubling",
                    params={"segment_bytes": None, "layout": "rank-order"},
                    measured_us=90.0,
                    gain_vs_native=1.4,
                ),
                Rule("broadcast", 0, None, "native:binomial", params={"segment_bytes": None, "layout": "rank-order"}),
            ),
        ),
    ),
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every command's input files, and those one command makes for another (fits, a topology)."""
    here = tmp_path_factory.mktemp("inputs")
    for name, source in INPUTS.items():
        shutil.copyfile(source, here / name)
    NCCL_PROFILE.save(here / "nccl.yaml")
    MPICH_PROFILE.save(here / "mpich.yaml")
    (here / "base.json").write_text(json.dumps(BASE))
    for argv in (
        ["fit", str(here / "rows.jsonl"), "-O", str(here / "fits.json")],
        ["discover", "--from-nvidia-smi", str(here / "topo.txt"), "-O", str(here / "topo.yaml")],
    ):
        made = CliRunner().invoke(app, argv)
        assert made.exit_code == 0, made.output
    return here


CASES: list[tuple[list[str], int, str]] = [
    (["fit", "rows.jsonl"], 0, "ring"),
    (["fit", "rows.jsonl", "-O", "out.json", "--plot", "out.png"], 0, "wrote fits to out.json"),
    (["fit", "nccl-tests.log"], 0, "native"),
    (["predict", "--fits", "fits.json", "--ranks", "64"], 0, "rabenseifner"),
    (["predict", "--profile", "gloo.yaml", "--ranks", "64", "--json"], 0, '"world_size": 64'),
    (["predict", "--fits", "fits.json", "--ranks", "64", "--hierarchy", "8"], 0, "hierarchical"),
    (["profile", "predict", "gloo.yaml", "--ranks", "8", "-O", "out.yaml"], 0, "wrote out.yaml"),
    (["profile", "predict", "gloo.yaml", "--ranks", "2x", "-O", "out.yaml"], 2, "error: --ranks '2x'"),
    (["profile", "predict", "gloo.yaml", "--ranks", "2", "-O", "out.yaml"], 2, "are measured already"),
    (["profile", "merge", "gloo.yaml", "nccl.yaml", "-O", "out.yaml"], 2, "error: "),
    (["export", "nccl-tuner", "nccl.yaml"], 0, "allreduce,"),
    (["export", "nccl-tuner", "gloo.yaml"], 2, "--from-other-backend"),
    (["export", "env", "nccl.yaml"], 0, "NCCL"),
    (["export", "nccl-plugin", "--show", "nccl.yaml"], 0, "ring/simple"),
    (["export", "ompi-rules", "gloo.yaml", "--from-other-backend"], 0, "rule"),
    (["export", "ompi-rankfile", "gloo.yaml"], 0, "rank"),
    (["export", "mpich-json", "mpich.yaml", "--base", "base.json"], 0, "MPIR_Allreduce_intra_recursive_doubling"),
    (["export", "mpich-env", "mpich.yaml"], 0, "MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial"),
    (["report", "rows.jsonl", "--profile", "gloo.yaml", "--topology", "topo.yaml", "-O", "out.html"], 0, "out.html"),
    (["compare", "rows.jsonl", "rows.jsonl"], 0, "within noise"),
    (["compare", "rows.jsonl", "rows.jsonl", "--json"], 0, "{"),
    (["import", "nccl-tests", "nccl-tests.log", "-O", "out.csv"], 0, "56 rows"),
    (["layout", "--from-nvidia-smi", "topo.txt", "--nccl-graph-xml", "out.xml"], 0, "out.xml"),
    (["layout", "--topology", "topo.yaml", "--json"], 0, '"rings"'),
    (["discover", "--from-nvidia-smi", "topo.txt"], 0, "GPU"),
    (["discover", "--from-nccl-xml", "topo.xml", "--json"], 0, '"devices"'),
    (["discover", "--topology", "topo.yaml", "--bandwidth"], 0, "GPU"),
    (["discover", "--replay", "nvml.json"], 0, "H100"),
    (["explain", "ring", "--ranks", "3"], 0, "step"),
    # A sweep refused for its options measures nothing either (a refused tune: test_tune_refused_before_torch.py).
    (["sweep", "--ranks", "2", "--op", "gossip"], 2, "unknown op 'gossip'"),
    (["sweep", "--ranks", "2", "-b", "3K+"], 2, "-b/--min-bytes '3K+' is not a size"),
    (["sweep", "--ranks", "2", "--backend", "glo"], 2, "unknown backend 'glo'"),
    (["sweep", "--ranks", "2", "-b", "1K", "-e", "512"], 2, "--min-bytes 1024 is above --max-bytes 512"),
]


@pytest.mark.parametrize(("argv", "code", "said"), CASES, ids=[" ".join(argv) for argv, _, _ in CASES])
def test_a_command_that_measures_nothing_does_not_import_torch(
    inputs: Path, tmp_path: Path, argv: list[str], code: int, said: str
) -> None:
    for source in inputs.iterdir():
        shutil.copyfile(source, tmp_path / source.name)
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
        timeout=300,
    )
    *printed, last = result.stdout.splitlines() or [""]
    # The command did its work (or refused in one line): a command that fell over early imports nothing.
    assert result.returncode == code, result.stderr[-2000:]
    assert said in "\n".join([*printed, result.stderr]), (result.stdout[-2000:], result.stderr[-2000:])
    if code != 0:
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert last == "torch imported: False", result.stdout[-2000:]


def test_building_the_nccl_plugin_does_not_import_torch(inputs: Path, tmp_path: Path) -> None:
    try:
        c_compiler()
    except UserError:
        pytest.skip("no C compiler here to build the plugin")
    shutil.copyfile(inputs / "nccl.yaml", tmp_path / "nccl.yaml")
    argv = ["export", "nccl-plugin", "nccl.yaml", "-O", "plugin"]
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=tmp_path, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "plugin" / "libnccl-tuner-collbench.so").stat().st_size > 0
    assert result.stdout.splitlines()[-1] == "torch imported: False", result.stdout[-2000:]
