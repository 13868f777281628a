"""predict says each algorithm's basis once: from the published GCP H100 2-node log asked at 1,024
ranks, NCCL's model, its fitted latency scale and bus bandwidth and its channels were printed again
for every size (8 paragraphs of 4-5 lines for the 8 default sizes); now once, with what changes by
size (NCCL's pick, what the model misses there) in a table of one row a size, at 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

from fits_files import fits_file
from typer.testing import CliRunner

from collbench.cli.app import app

GCP = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
NARROW = {"COLUMNS": "80", "NO_COLOR": "1"}


def test_the_basis_prints_once_and_each_size_its_own_words(tmp_path: Path) -> None:
    fits = fits_file(GCP, tmp_path / "h100.json")
    result = CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "1024"], env=NARROW)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("latencies x5.4 (fitted)") == 1 and out.count("16 channels assumed") == 1
    words = " ".join(out.split())  # the paragraph wraps at 80 columns wherever its words fall
    assert "picks [1]" in words and "[2] for what it misses at the measured shape" in words
    assert max(len(line) for line in out.splitlines()) <= 80
    # The JSON keeps each size's whole basis: the table's words are what differs between them.
    doc = json.loads(CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "1024", "--json"]).stdout)
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:3] == ["size", "[1]", "[2]"])
    rows = [line.split() for line in lines[head + 2 : head + 2 + len(doc["predictions"])]]
    for p, row in zip(doc["predictions"], rows, strict=True):
        size, pick, miss = " ".join(row[:2]), row[2], row[3]
        assert f"picks {pick};" in p["basis"] and f"; {miss} for what it misses" in p["basis"], (size, p["basis"])
    assert len({p["basis"] for p in doc["predictions"]}) > 1  # the sizes' bases do differ


def test_a_basis_that_holds_at_every_size_prints_as_one_paragraph() -> None:
    # The example profile's own algorithms are priced from their structure, one basis at every size:
    # one paragraph each, no gaps and no table.
    profile = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    args = ["predict", "--profile", str(profile), "--ranks", "4096", "--nodes", "512", "--sizes", "1M,256M"]
    result = CliRunner().invoke(app, args, env=NARROW)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "[1]" not in out and "by size:" not in out
    for algo in ("direct", "ring", "rabenseifner", "two-tree"):
        assert out.count(f"all-reduce {algo} gloo x2 on 1 node; its own structure:") == 1, algo


def test_the_words_print_as_written_never_as_markup() -> None:
    from io import StringIO

    from rich.console import Console, Group

    from collbench.cli.render.models import _bases

    at_sizes = [("1 KiB", "shared words here [red]x[/red] and more"), ("8 KiB", "shared words here y and more")]
    out = StringIO()
    Console(file=out, width=80, color_system=None).print(Group(*_bases("native", "a fit", at_sizes)))
    text = out.getvalue()
    assert "native: a fit; shared words here [1] and more; by size:" in text
    assert "[red]x[/red]" in text and "[1]" in text.splitlines()[1]
