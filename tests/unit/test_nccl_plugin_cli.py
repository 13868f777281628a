"""``collbench export nccl-plugin`` from the command line: the plugin built with the compiler asked for
(``$CC`` split into words as make splits it, never passed over for ``cc`` in silence) or one line saying
why not, and the two environment lines a job needs. The plugin's answers themselves: test_nccl_plugin.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import UserError
from collbench.exporters.nccl_plugin import build_plugin, c_compiler
from tests.unit.test_nccl_plugin import PROFILE


def test_cli_builds_the_plugin_and_prints_the_two_environment_lines(tmp_path: Path) -> None:
    path = PROFILE.save(tmp_path / "p.yaml")
    out = tmp_path / "plugin"
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path), "--output", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"NCCL_TUNER_PLUGIN={(out / 'libnccl-tuner-collbench.so').resolve()}" in lines
    assert f"NCCL_TUNER_CONFIG_FILE={(out / 'nccl-tuner.conf').resolve()}" in lines
    assert (out / "libnccl-tuner-collbench.so").stat().st_size > 0
    assert "ring,simple,4,2,8" in (out / "nccl-tuner.conf").read_text()
    shown = CliRunner().invoke(app, ["export", "nccl-plugin", "--show", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "ring/simple" in shown.stdout and "tree/ll" in shown.stdout


def test_cli_without_a_compiler_or_output_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = PROFILE.save(tmp_path / "p.yaml")
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output and "-o" in result.output
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path), "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "no C compiler found" in result.output
    with pytest.raises(UserError, match="no C compiler"):
        build_plugin(PROFILE, tmp_path / "o2")


def test_cc_is_the_compiler_asked_for_or_a_one_line_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$CC is honoured as make honours it, split into words, and never passed over for cc in silence."""
    try:
        real = c_compiler()[0]
    except UserError:
        pytest.skip("no C compiler here to build the plugin")
    path = PROFILE.save(tmp_path / "p.yaml")
    # A CC that names no program (a compiler not installed) was passed over for cc without a word.
    monkeypatch.setenv("CC", "clang-nowhere-99")
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path), "-O", str(tmp_path / "a")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "CC='clang-nowhere-99': 'clang-nowhere-99' is not a program here" in " ".join(result.output.split())
    assert not (tmp_path / "a" / "libnccl-tuner-collbench.so").exists()
    # A CC of several words ("ccache gcc") was one name to look up, so cc built the plugin instead.
    wrapper = tmp_path / "cc-wrapper"
    calls = tmp_path / "calls.txt"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nshift\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", f"{wrapper} --first-word-for-the-wrapper")
    built = build_plugin(PROFILE, tmp_path / "b")
    assert built.plugin.is_file()
    assert calls.read_text().startswith("--first-word-for-the-wrapper -O2 ")
    # One that fails without a word still says how it ended.
    monkeypatch.setenv("CC", shutil.which("false") or "false")
    with pytest.raises(UserError, match=r"failed to build .*: it ended with exit code 1 and printed nothing"):
        build_plugin(PROFILE, tmp_path / "c")
    monkeypatch.setenv("CC", "'gcc")
    with pytest.raises(UserError, match=r"CC=\"'gcc\" is not shell words"):
        build_plugin(PROFILE, tmp_path / "d")
