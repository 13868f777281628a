"""Nothing measured is lost: a tune's partial rows are its own for its whole life, and a --resume never
drops rows it does not use without a word.

The attacker's runs: a ``sweep --stream <tune's partial> --resume`` started mid-tune was accepted and
appended 12 rows, which the tune deleted on success; ``tune --resume`` (``--backend auto``) over rows of
another backend re-measured and deleted them; a ``--quick`` tune resumed without ``--quick`` was accepted.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.results.io import read_rows
from collbench.tuning import pipeline
from collbench.tuning.config import TuneConfig, check_config, partial_paths
from collbench.tuning.placement import Placement
from collbench.tuning.resume import partial_depth_path
from tests.faults._run import SWEEP, cli, error_line

GOLDEN_ROWS = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "tune-quick-results.jsonl"


def _stopped_tune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, during: list[object] | None) -> TuneConfig:
    """A 2-rank quick tune whose first round streams the golden rows, then stops while saving (exit 143).

    ``during`` (when given) receives, from inside the round, what a second collbench run trying the
    partial file said.
    """
    config = TuneConfig(ranks=2, output=tmp_path / "p.yaml", quick=True)
    part = partial_paths(config)[0]
    rows = read_rows(GOLDEN_ROWS)

    def measured(*_args: object) -> list[object]:
        part.write_bytes(GOLDEN_ROWS.read_bytes())
        if during is None:
            return list(rows)
        # Another process, as the attacker's: the real sweep command, resuming into the tune's partial file.
        sweep = cli([*SWEEP, "--stream", str(part), "--resume", "-b", "1K", "-e", "1K"], tmp_path)
        during.append(sweep)
        return list(rows)

    monkeypatch.setattr(pipeline, "plan_placement", lambda *_args: Placement())
    monkeypatch.setattr(pipeline, "fixed_rounds", measured)
    monkeypatch.setattr(pipeline, "extra_rounds", lambda *_args: ([], None))

    def stopped(_profile: object) -> None:
        raise SystemExit(143)

    with pytest.raises(SystemExit):
        pipeline.run_tune(config, save=stopped)
    return config


def test_a_sweep_into_a_running_tunes_partial_file_is_refused_and_its_rows_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    during: list[object] = []
    config = _stopped_tune(tmp_path, monkeypatch, during)
    sweep = during[0]
    assert sweep.returncode == 2, sweep.stderr  # type: ignore[attr-defined]
    assert "is being written by another collbench run" in error_line(sweep.stderr)  # type: ignore[attr-defined]
    part = partial_paths(config)[0]
    assert part.read_bytes() == GOLDEN_ROWS.read_bytes()  # not one row added
    # The stopped tune's lock went with it: the same sweep may resume the file now.
    assert not part.with_name(f".{part.name}.lock").exists()


def test_a_quick_tunes_rows_are_not_resumed_by_a_thorough_tune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _stopped_tune(tmp_path, monkeypatch, None)
    assert partial_depth_path(config.rows_path).read_text() == "--quick\n"
    resumed = dataclasses.replace(config, resume=True)
    check_config(resumed)  # the same depth resumes
    part = partial_paths(config)[0]
    before = part.read_bytes()
    with pytest.raises(ConfigError, match=r"measured --quick, not a thorough tune \(no --quick\)"):
        check_config(dataclasses.replace(resumed, quick=False))
    assert part.read_bytes() == before


def test_rows_of_another_backend_are_refused_under_backend_auto(tmp_path: Path) -> None:
    # On this machine (no GPU under the tests) auto is gloo: rows measured over NCCL are not this tune's.
    config = TuneConfig(ranks=2, output=tmp_path / "p.yaml", quick=True, resume=True, backend="auto")
    part = partial_paths(config)[0]
    rows = [json.loads(line) for line in GOLDEN_ROWS.read_text().splitlines()]
    part.write_text("".join(json.dumps(dict(r, backend="nccl")) + "\n" for r in rows))
    before = part.read_bytes()
    import torch

    if torch.cuda.is_available():
        pytest.skip("auto resolves to nccl where CUDA is: the rows are this tune's")
    with pytest.raises(ConfigError, match="--backend nccl, not gloo") as caught:
        check_config(config)
    assert "\n" not in str(caught.value)
    assert part.read_bytes() == before
