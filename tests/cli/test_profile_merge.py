"""`collbench profile merge`: one profile with every shape of several, and one line for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.fitted import Fit
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

P = {"segment_bytes": None, "layout": "rank-order"}


def make(tmp_path: Path, name: str, *sets: RuleSet, created: str = "2026-11-23T10:00:00Z", **kw: str) -> Path:
    fields = {"fingerprint": "fp", "backend": "gloo", **kw}
    fit = Fit.from_dict(
        {
            "op": "all-reduce",
            "algo": "ring",
            "backend": fields["backend"],
            "alpha_us": 1.0,
            "beta_gbps": 2.0,
            "world_size": sets[0].world_size,
        }
    )
    profile = Profile(host="h", rule_sets=sets, fits=(fit,), created=created, **fields)  # type: ignore[arg-type]
    return profile.save(tmp_path / name)


def one(world: int, algo: str, *, nodes: int = 1, predicted: bool = False) -> RuleSet:
    return RuleSet(world, nodes, (Rule("all-reduce", 0, None, algo, P),), predicted=predicted)


def merge(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["profile", "merge", *args])
    return result.exit_code, result.stdout, result.stderr


def test_merge_joins_shapes_in_order(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"))
    b = make(tmp_path, "b.yaml", one(8, "direct", nodes=2), one(16, "ring", nodes=2, predicted=True))
    out = tmp_path / "m.yaml"
    code, stdout, stderr = merge(str(a), str(b), "-o", str(out))
    assert code == 0, stderr
    merged = Profile.load(out)
    assert merged.shapes == [(4, 1), (8, 2), (16, 2)]
    assert merged.world_size == 4  # the first input's default shape stays the default
    assert merged.select("all-reduce", 10, world_size=8).algo == "direct"
    assert merged.rule_set(16).predicted
    assert len(merged.fits) == 2 and merged.command.startswith("collbench profile merge")
    assert "4 ranks on 1 node(s), 8 ranks on 2 node(s), 16 ranks on 2 node(s) (predicted)" in stdout


def test_conflicts_are_one_line_unless_prefer_newer(tmp_path: Path) -> None:
    old = make(tmp_path, "old.yaml", one(4, "ring"), created="2026-11-01T00:00:00Z")
    new = make(tmp_path, "new.yaml", one(4, "direct"), created="2026-11-20T00:00:00Z")
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(old), str(new), "-o", str(out))
    assert code == 2 and not out.exists()
    assert stderr.strip().count("\n") == 0
    assert f"{old} and {new} both have rules for 4 ranks on 1 node(s): pass --prefer newer" in stderr
    for order in ((old, new), (new, old)):
        code, _, stderr = merge(*map(str, order), "--prefer", "newer", "-o", str(out))
        assert code == 0, stderr
        assert Profile.load(out).select("all-reduce", 1).algo == "direct"
        assert f"kept {new}'s (the newer profile)" in stderr


def test_measured_replaces_predicted_without_asking(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"), one(8, "ring", predicted=True))
    b = make(tmp_path, "b.yaml", one(8, "direct"))
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(a), str(b), "-o", str(out))
    assert code == 0, stderr
    assert not Profile.load(out).rule_set(8).predicted
    assert "measured beats predicted" in stderr


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ({"fingerprint": "elsewhere"}, "measured on machine 'elsewhere'"),
        ({"backend": "nccl"}, "measured with nccl"),
    ],
)
def test_different_machines_or_backends_do_not_merge(tmp_path: Path, other: dict[str, str], message: str) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"))
    b = make(tmp_path, "b.yaml", one(8, "ring"), **other)
    code, _, stderr = merge(str(a), str(b), "-o", str(tmp_path / "m.yaml"))
    assert code == 2 and message in stderr and stderr.strip().count("\n") == 0


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"))
    cases = [
        ([str(a), "-o", str(tmp_path / "m.yaml")], "at least two profiles"),
        ([str(a), str(tmp_path / "none.yaml"), "-o", str(tmp_path / "m.yaml")], "no such profile"),
        ([str(a), str(a), "--prefer", "older", "-o", str(tmp_path / "m.yaml")], "--prefer must be one of none, newer"),
    ]
    for args, message in cases:
        code, _, stderr = merge(*args)
        assert code == 2 and message in stderr and stderr.strip().count("\n") == 0, (args, stderr)


def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"))
    b = make(tmp_path, "b.yaml", one(8, "ring"))
    # A name the file system takes, but not with the temporary file's prefix and suffix around it: the
    # check before any work passes, and writing fails.
    out = tmp_path / ("m" * 240 + ".yaml")
    code, _, stderr = merge(str(a), str(b), "-o", str(out))
    assert code == 2 and "cannot write" in stderr and stderr.strip().count("\n") == 0, stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml"]
