"""`collbench profile merge`: one profile with every shape of several, and one line for bad input."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.fitted import Fit
from collbench.profile.document import Profile, RuleSet
from collbench.profile.merge import merge_profiles
from collbench.profile.rules import Rule
from collbench.results.io import read_rows
from collbench.topology.host import HostFacts, host_topology
from collbench.topology.model import Topology
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo
from collbench.tuning.build_profile import build_profile
from collbench.tuning.config import TuneConfig

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
    code, stdout, stderr = merge(str(a), str(b), "--output", str(out))
    assert code == 0, stderr
    merged = Profile.load(out)
    assert merged.shapes == [(4, 1), (8, 2), (16, 2)]
    assert merged.world_size == 4  # the first input's default shape stays the default
    assert merged.select("all-reduce", 10, world_size=8).algo == "direct"
    assert merged.rule_set(16).predicted
    assert len(merged.fits) == 2 and merged.command.startswith("collbench profile merge")
    assert "4 ranks on 1 node, 8 ranks on 2 nodes, 16 ranks on 2 nodes (predicted)" in stdout


def test_two_tunes_of_different_ops_on_one_shape_join(tmp_path: Path) -> None:
    """`tune --op all-reduce`, then `tune --op all-to-all` on the same 2 ranks: merge refused them as
    "both have rules for 2 ranks on 1 node", and --prefer newer dropped the all-reduce rules."""
    reduce = make(tmp_path, "ar.yaml", one(2, "ring"))
    a2a = RuleSet(2, 1, (Rule("all-to-all", 0, None, "pairwise", P), Rule("broadcast", 0, None, "tree", P)))
    exchange = make(tmp_path, "a2a.yaml", a2a)
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(reduce), str(exchange), "--output", str(out))
    assert code == 0, stderr
    merged = Profile.load(out)
    assert merged.shapes == [(2, 1)] and merged.ops == ["all-reduce", "all-to-all", "broadcast"]
    assert [merged.select(op, 10).algo for op in merged.ops] == ["ring", "pairwise", "tree"]
    assert f"joined {reduce}'s all-reduce and {exchange}'s all-to-all, broadcast" in " ".join(stderr.split())
    # A shared op is still a conflict, and a predicted set never joins a measured one.
    # (--overwrite: out holds the merge above.)
    both = make(tmp_path, "both.yaml", RuleSet(2, 1, (*one(2, "direct").rules, *a2a.rules)))
    code, _, stderr = merge(str(reduce), str(both), "--output", str(out), "--overwrite")
    assert code == 2 and "both have rules for 2 ranks on 1 node" in stderr, stderr
    guess = make(tmp_path, "guess.yaml", one(4, "ring"), RuleSet(2, 1, a2a.rules, predicted=True))
    code, _, stderr = merge(str(reduce), str(guess), "--output", str(out), "--overwrite")
    assert code == 0 and Profile.load(out).rule_set(2).ops == ["all-reduce"] and "measured beats predicted" in stderr


def test_conflicts_are_one_line_unless_prefer_newer(tmp_path: Path) -> None:
    old = make(tmp_path, "old.yaml", one(4, "ring"), created="2026-11-01T00:00:00Z")
    new = make(tmp_path, "new.yaml", one(4, "direct"), created="2026-11-20T00:00:00Z")
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(old), str(new), "--output", str(out))
    assert code == 2 and not out.exists()
    assert stderr.strip().count("\n") == 0
    assert f"{old} and {new} both have rules for 4 ranks on 1 node: pass --prefer newer" in stderr
    for order in ((old, new), (new, old)):
        code, _, stderr = merge(*map(str, order), "--prefer", "newer", "--output", str(out), "--overwrite")
        assert code == 0, stderr
        assert Profile.load(out).select("all-reduce", 1).algo == "direct"
        assert f"kept {new}'s (the newer profile)" in stderr


def test_measured_replaces_predicted_without_asking(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"), one(8, "ring", predicted=True))
    b = make(tmp_path, "b.yaml", one(8, "direct"))
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(a), str(b), "--output", str(out))
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
    code, _, stderr = merge(str(a), str(b), "--output", str(tmp_path / "m.yaml"))
    assert code == 2 and message in stderr and stderr.strip().count("\n") == 0


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"))
    link = tmp_path / "b.yaml"
    link.symlink_to(a)
    cases = [
        ([str(a), "--output", str(tmp_path / "m.yaml")], "at least two profiles"),
        ([str(a), str(tmp_path / "none.yaml"), "--output", str(tmp_path / "m.yaml")], "no such profile"),
        (
            [str(a), str(a), "--prefer", "older", "--output", str(tmp_path / "m.yaml")],
            "--prefer must be one of none, newer",
        ),
        # It said a.yaml and a.yaml both had rules for 4 ranks, and offered --prefer newer.
        ([str(a), str(a), "--output", str(tmp_path / "m.yaml")], f"error: {a} is one profile given twice"),
        (
            [str(a), str(link), "--output", str(tmp_path / "m.yaml")],
            f"{a} and {link} are one profile given twice; give each once",
        ),
    ]
    for args, message in cases:
        code, _, stderr = merge(*args)
        assert code == 2 and message in stderr and stderr.strip().count("\n") == 0, (args, stderr)


def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    a = make(tmp_path, "a.yaml", one(4, "ring"))
    b = make(tmp_path, "b.yaml", one(8, "ring"))
    # A name the file system takes, but not with the temporary file's prefix and suffix (or the lock's)
    # around it: refused by the check before any work, which counts them in.
    out = tmp_path / ("m" * 240 + ".yaml")
    code, _, stderr = merge(str(a), str(b), "--output", str(out))
    assert code == 2 and "a name in this path is 245 bytes long" in stderr, stderr
    assert stderr.strip().count("\n") == 0, stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml"]


GOLDEN_ROWS = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "tune-quick-results.jsonl"
TOPOLOGIES = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"


def tuned(tmp_path: Path, name: str, topology: Topology, world_size: int) -> Path:
    """What a tune of ``world_size`` ranks on ``topology`` saves (rows of that many ranks)."""
    rows = [
        dataclasses.replace(r, world_size=world_size, topology_fingerprint=topology.fingerprint)
        for r in read_rows(GOLDEN_ROWS)
    ]
    rules = [Rule("all-reduce", 0, None, "ring", P)]
    profile = build_profile(TuneConfig(command="collbench tune"), rows, [], rules, topology=topology, layout=None)
    return profile.save(tmp_path / name)


def _host(ranks: int, cores: int = 2) -> Topology:
    facts = HostFacts(
        hostname="vm", cores=cores, cpu_model="AMD EPYC", numa_nodes=((0, tuple(range(cores))),), memory_bytes=None
    )
    return host_topology(ranks, facts=facts)


def _gpus(name: str, ranks: int) -> Topology:
    return parse_nvidia_smi_topo((TOPOLOGIES / name).read_text()).subset(ranks)


@pytest.mark.parametrize(
    ("two", "four"),
    [
        (_host(2), _host(4)),
        (_gpus("hgx-h100x8-nv18-nics.topo.txt", 2), _gpus("hgx-h100x8-nv18-nics.topo.txt", 4)),
        (_gpus("pcie8-pix-pxb.topo.txt", 2), _gpus("pcie8-pix-pxb.topo.txt", 4)),
    ],
    ids=["cpu-host", "nvlink-gpus", "pcie-gpus"],
)
def test_tunes_of_one_machine_at_two_rank_counts_merge(tmp_path: Path, two: Topology, four: Topology) -> None:
    # The ranks' topologies differ (2 devices, 4 devices); the machine they were cut from does not.
    assert two.fingerprint != four.fingerprint
    p2, p4 = tuned(tmp_path, "p2.yaml", two, 2), tuned(tmp_path, "p4.yaml", four, 4)
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(p2), str(p4), "--output", str(out))
    assert code == 0, stderr
    assert Profile.load(out).shapes == [(2, 1), (4, 1)]


@pytest.mark.parametrize(
    ("one_machine", "other_machine"),
    [
        (_host(2), _host(2, cores=64)),
        (_gpus("hgx-h100x8-nv18-nics.topo.txt", 2), _gpus("pcie8-pix-pxb.topo.txt", 4)),
        (_gpus("a100x4-nv4-nics.topo.txt", 2), _gpus("hgx-h100x8-nv18-nics.topo.txt", 2)),
        (_host(2), _gpus("a100x4-nv4-nics.topo.txt", 2)),
    ],
    ids=["cpu-cores", "nvlink-vs-pcie", "a100-vs-h100", "cpu-vs-gpu"],
)
def test_tunes_of_different_machines_still_refuse(
    tmp_path: Path, one_machine: Topology, other_machine: Topology
) -> None:
    p2, p4 = tuned(tmp_path, "p2.yaml", one_machine, 2), tuned(tmp_path, "p4.yaml", other_machine, 4)
    code, _, stderr = merge(str(p2), str(p4), "--output", str(tmp_path / "m.yaml"))
    assert code == 2 and "profiles of different machines do not merge" in stderr, stderr


def test_two_fingerprints_of_one_host_name_say_how_that_comes(tmp_path: Path) -> None:
    """A new user tuned the VM once plainly and once with --topology from `discover --probe`: merge said
    only 'profiles of different machines do not merge', of one machine. Where the profiles name one
    host, the error says how one host comes to have two fingerprints; where they name two, it does not."""
    plain, other = tuned(tmp_path, "a.yaml", _host(2), 2), tuned(tmp_path, "b.yaml", _host(2, cores=64), 2)
    code, _, stderr = merge(str(plain), str(other), "--output", str(tmp_path / "m.yaml"))
    said = " ".join(stderr.split())
    assert code == 2 and "profiles of different machines do not merge (both name host 'vm': if that is" in said
    assert "`discover --probe`" in said
    elsewhere = dataclasses.replace(Profile.load(other), host="node7").save(tmp_path / "c.yaml")
    code, _, stderr = merge(str(plain), str(elsewhere), "--output", str(tmp_path / "n.yaml"))
    assert code == 2 and "do not merge" in stderr and "both name host" not in stderr


def test_merging_thousands_of_fits_compares_each_fit_about_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two profiles of 5,000 fits each: a merge that searched the kept fits for every fit compared
    about 25 million pairs (a minute); kept by value, each fit is compared at most once or twice."""

    def profile(world_size: int) -> Profile:
        fits = tuple(
            Fit.from_dict(
                {
                    "op": "all-reduce",
                    "algo": "ring",
                    "backend": "gloo",
                    "alpha_us": 1.0 + i,
                    "beta_gbps": 2.0,
                    "world_size": world_size,
                }
            )
            for i in range(5000)
        )
        return Profile(fingerprint="fp", host="h", backend="gloo", rule_sets=(one(world_size, "ring"),), fits=fits)

    a, b = profile(2), profile(4)
    shared = a.fits[:100]  # fits both inputs hold are kept once
    b = dataclasses.replace(b, fits=b.fits + shared)
    compared = 0
    equal = Fit.__eq__

    def counting(self: Fit, other: object) -> bool:
        nonlocal compared
        compared += 1
        return equal(self, other)

    monkeypatch.setattr(Fit, "__eq__", counting)
    merged = merge_profiles([("a", a), ("b", b)])
    assert len(merged.profile.fits) == 10_000
    assert compared <= 2 * 10_100


def test_a_created_time_of_no_sense_is_refused_at_load(tmp_path: Path) -> None:
    """'--prefer newer' ordered profiles by their created text: a hand-edited 'yesterday' sorted after every
    date, and that profile's rules were kept as the newer ones."""
    old = make(tmp_path, "old.yaml", one(4, "ring"), created="2026-11-01T00:00:00Z")
    edited = make(tmp_path, "edited.yaml", one(4, "direct"), created="yesterday")
    out = tmp_path / "m.yaml"
    code, _, stderr = merge(str(old), str(edited), "--prefer", "newer", "--output", str(out))
    assert code == 2 and not out.exists()
    assert stderr.strip() == (
        f"error: {edited}: not a profile collbench uses: $.created: 'yesterday' is no ISO 8601 time "
        "(such as 2026-11-25T16:48:16Z)"
    )
    assert Profile.load(make(tmp_path, "unrecorded.yaml", one(4, "ring"), created="")).created == ""
