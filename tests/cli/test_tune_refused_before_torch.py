"""A ``tune`` refused for its options or files says so before it imports torch.

torch takes about 10 s to import on a loaded machine; a tune refused for a typo in its options, or for
a profile already at -O, waited for it before its one error line. Each refusal here runs the real
command in a fresh interpreter and reports whether torch was imported when it exited: a check of what
was loaded, not of a time (the ``--help`` check, test_help_imports.py, does the same).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = """
import atexit, sys
atexit.register(lambda: print("torch imported:", "torch" in sys.modules))
from collbench.cli.app import main
sys.argv = ["collbench", *sys.argv[1:]]
main()
"""

PROFILE = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=tmp_path, check=False, timeout=300
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--ranks", "2x"], "--ranks '2x': each value must be a whole number of ranks"),
        (["--ranks", "2", "-b", "3K+"], "-b/--min-bytes"),
        (["--ranks", "2", "-b", "6"], "-b/--min-bytes 6: tune measures float32 elements"),
        (["--ranks", "2", "--op", "gossip"], "unknown op 'gossip'"),
        (["--ranks", "2", "--backend", "glo"], "unknown backend 'glo'"),
        (["--ranks", "2", "--predict-ranks", "8:9"], "nodes must be 1..8 for 8 ranks"),
        (["--ranks", "2", "--resume", "--overwrite"], "give one of them"),
        (["--ranks", "2", "-O", "kept.yaml"], "kept.yaml holds a profile; pass --overwrite"),
        (["-O", "kept.yaml"], "kept.yaml holds a profile; pass --overwrite"),  # ranks left out: torch counts GPUs
        (["--ranks", "2,3", "-O", "kept.yaml"], "kept.yaml holds a profile; pass --overwrite"),
        (["--check", "missing.yaml"], "missing.yaml: no such profile"),
        (["--check", "typo.yaml"], "params key 'segmnet_bytes'"),
        (["--check", "typo.yaml", "--quick"], "--check re-measures the profile's own rules"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_refused_tune_does_not_import_torch(tmp_path: Path, argv: list[str], said: str) -> None:
    text = PROFILE.read_text()
    (tmp_path / "kept.yaml").write_text(text)  # another run's profile, at -O
    (tmp_path / "typo.yaml").write_text(text.replace("segment_bytes: 4194304", "segmnet_bytes: 4194304", 1))
    result = _run(tmp_path, "tune", *argv)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], result.stderr[-2000:]
    assert result.stdout.strip() == "torch imported: False", result.stdout
    assert (tmp_path / "kept.yaml").read_text() == text


def test_what_tune_imports_once_its_checks_pass_imports_torch(tmp_path: Path) -> None:
    # The check above is not empty: what tune imported first, before its checks moved ahead of it, loads torch.
    found = subprocess.run(
        [sys.executable, "-c", "import sys, collbench.tuning.shapes; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert found.stdout.strip() == "True"
