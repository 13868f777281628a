"""A profile rule's ``params`` key that no reader takes is refused, naming the key, the rule and the keys
its algorithm takes, by every reader of profiles.

Before, ``params: {segmnet_bytes: 4194304, layout: topology}`` (a hand edit's typo) loaded: the Python
API and the DDP hook then ran the tree unsegmented, the exports left the segment size out, and nothing
said why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import InputFileError
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import NATIVE_PARAMS, OWN_PARAMS, Rule

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"
GOOD = "params: {segment_bytes: 4194304, layout: topology}"
TYPO = "params: {segmnet_bytes: 4194304, layout: topology}"
SAID = (
    "all-reduce rule at 0 bytes: params key 'segmnet_bytes' is not one tree takes (segment_bytes, layout, "
    "segments, channels, protocol)"
)


def _with_typo(tmp_path: Path) -> Path:
    text = SAVED.read_text()
    # The first rule (all-reduce from 0 bytes, a tree) is the one edited.
    first = "op: all-reduce\n    min_bytes: 0\n    max_bytes: 92681\n    algo: tree\n    " + GOOD
    assert text.index(first) + len(first) - len(GOOD) == text.index(GOOD)
    path = tmp_path / "typo.yaml"
    path.write_text(text.replace(GOOD, TYPO, 1))
    return path


def test_an_unknown_params_key_is_refused_at_load(tmp_path: Path) -> None:
    assert Profile.load(SAVED).rule_sets  # the file as saved loads
    path = _with_typo(tmp_path)
    with pytest.raises(InputFileError) as info:
        Profile.load(path)
    said = str(info.value)
    assert SAID in said and str(path) in said and "\n" not in said


@pytest.mark.parametrize(
    "command",
    [
        ["export", "nccl-tuner"],
        ["export", "ompi-rules"],
        ["export", "env"],
        ["export", "nccl-plugin", "--show"],
        ["profile", "predict", "--ranks", "8:2"],
        ["report", "--profile"],
        ["tune", "--check"],
    ],
    ids=" ".join,
)
def test_every_command_reading_a_profile_refuses_it_in_one_line(tmp_path: Path, command: list[str]) -> None:
    path = _with_typo(tmp_path)
    if command[0] == "report":
        argv = [*command, str(path), "-O", str(tmp_path / "r.html"), str(tmp_path / "none.jsonl")]
    elif command[0] == "tune":
        argv = [*command, str(path)]
    else:
        argv = [*command[:2], str(path), *command[2:]]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "segmnet_bytes" in lines[0], result.output
    assert "Traceback" not in result.output


def test_the_python_api_refuses_it_where_a_rule_is_made() -> None:
    # A profile built in code (as collbench.torch's callers may) is refused when the rule is made: the
    # API and the DDP hook never see a rule whose params they would ignore.
    with pytest.raises(ValueError, match="params key 'segmnet_bytes' is not one ring takes"):
        Rule("all-reduce", 0, None, "ring", {"segmnet_bytes": 4096})


def test_each_algorithm_takes_its_own_keys(tmp_path: Path) -> None:
    own = Rule("all-reduce", 0, None, "tree", dict.fromkeys(OWN_PARAMS, None) | {"segments": 4})
    native = Rule("all-reduce", 0, None, "native:ring/simple@4ch", dict.fromkeys(NATIVE_PARAMS, None))
    for rule in (own, native):
        profile = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(4, 1, (rule,)),))
        loaded = Profile.load(profile.save(tmp_path / "p.yaml"))
        assert loaded.rule_sets[0].rules[0].params == rule.params
    # segments cut collbench's schedules; a library's own collective is not cut so. Open MPI's fan-in/out
    # is its own algorithms'.
    with pytest.raises(ValueError, match=r"is not one native takes \(segment_bytes, layout, channels, protocol"):
        Rule("all-reduce", 0, None, "native", {"segments": 4})
    with pytest.raises(ValueError, match="params key 'faninout' is not one ring takes"):
        Rule("all-reduce", 0, None, "ring", {"faninout": 4})
