"""Files saved by Windows tools read as the same files: UTF-8 with a byte-order mark (Notepad) and UTF-16
with its mark (PowerShell's ``>`` and ``Out-File``). The real samples are re-encoded under tmp_path, never
edited in tests/fixtures. Before: a BOM'd fits file was 'not JSON: Unexpected UTF-8 BOM (decode using
utf-8-sig)', a UTF-16 nccl-tests log 'not text (byte 0 is not UTF-8)' to import and 'no nccl-tests
output in it' to fit, a BOM'd results stream 'not a JSON row'."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "tests" / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
SMI = REPO / "tests" / "fixtures" / "real" / "a100-x8-nv12-17nics.topo.txt"
ENCODINGS = {
    "utf-8 with BOM": lambda text: b"\xef\xbb\xbf" + text.encode("utf-8"),
    "utf-16-le with BOM": lambda text: text.encode("utf-16"),  # Python writes the machine's order: LE here
    "utf-16-be with BOM": lambda text: b"\xfe\xff" + text.encode("utf-16-be"),
}


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def saved_as(source: Path, encoding: str, tmp_path: Path, name: str | None = None) -> Path:
    out = tmp_path / (name or source.name)
    out.write_bytes(ENCODINGS[encoding](source.read_text(encoding="utf-8")))
    return out


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_an_nccl_tests_log_imports_and_fits_as_the_original(encoding: str, tmp_path: Path) -> None:
    log = saved_as(LOG, encoding, tmp_path)
    run("import", "nccl-tests", str(LOG), "-O", str(tmp_path / "plain.jsonl"))
    run("import", "nccl-tests", str(log), "-O", str(tmp_path / "saved.jsonl"))
    plain = (tmp_path / "plain.jsonl").read_text().splitlines()
    assert len(plain) == 62
    assert (tmp_path / "saved.jsonl").read_text().splitlines() == plain
    assert run("fit", str(log), "--json") == run("fit", str(LOG), "--json")


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_a_profile_and_a_fits_file_read_as_the_originals(encoding: str, tmp_path: Path) -> None:
    profile = saved_as(PROFILE, encoding, tmp_path)
    export = ("export", "nccl-tuner", "--from-other-backend")
    assert run(*export, str(profile)) == run(*export, str(PROFILE))
    (tmp_path / "fits.json").write_text(run("fit", str(RESULTS), "--json"))
    fits = saved_as(tmp_path / "fits.json", encoding, tmp_path, "saved-fits.json")
    predict = ("predict", "--ranks", "8", "--json", "--fits")
    assert run(*predict, str(fits)) == run(*predict, str(tmp_path / "fits.json"))


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_an_nvidia_smi_paste_reads_as_the_original(encoding: str, tmp_path: Path) -> None:
    paste = saved_as(SMI, encoding, tmp_path)
    saved, plain = (
        CliRunner().invoke(app, ["discover", "--json", "--from-nvidia-smi", str(path)]) for path in (paste, SMI)
    )
    assert saved.exit_code == plain.exit_code == 0, saved.output
    # The document (the notes on stderr wrap by the file's name), which names its source file too.
    assert saved.stdout.replace(str(paste), str(SMI)) == plain.stdout


def test_a_results_stream_opened_by_a_bom_reads_whole(tmp_path: Path) -> None:
    rows = saved_as(RESULTS, "utf-8 with BOM", tmp_path)
    assert run("fit", str(rows), "--json") == run("fit", str(RESULTS), "--json")


def test_a_results_stream_saved_as_utf16_says_so(tmp_path: Path) -> None:
    """Read a line at a time, UTF-16 rows are no text: 'not text (byte 0 is not UTF-8)' named no cause."""
    rows = saved_as(RESULTS, "utf-16-le with BOM", tmp_path)
    result = CliRunner().invoke(app, ["fit", str(rows)])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {rows}: is UTF-16 text (saved by a Windows tool); results are UTF-8: save it as UTF-8"
    )


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_a_paste_on_stdin_reads_as_the_file(encoding: str, tmp_path: Path) -> None:
    """stdin was decoded by the locale: a UTF-16 paste said 'no header line starting with GPU0'."""
    data = ENCODINGS[encoding](SMI.read_text(encoding="utf-8"))
    piped = CliRunner().invoke(app, ["discover", "--json", "--from-nvidia-smi", "-"], input=data)
    plain = CliRunner().invoke(app, ["discover", "--json", "--from-nvidia-smi", "-"], input=SMI.read_bytes())
    assert piped.exit_code == plain.exit_code == 0, piped.output
    assert piped.stdout == plain.stdout


def test_stdin_is_held_to_what_a_file_may_hold() -> None:
    """`cat /dev/zero | collbench discover --from-nvidia-smi -` was read without end."""
    from collbench.fileio import MAX_TEXT_FILE_BYTES

    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", "-"], input=b"GPU0" + b" " * MAX_TEXT_FILE_BYTES)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: <stdin>: larger than 64 MiB, the most collbench reads (expected the text of `nvidia-smi topo -m`)"
    )
