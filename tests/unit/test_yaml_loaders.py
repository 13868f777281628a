"""YAML is read by libyaml where PyYAML has it, and the outcome is PyYAML's own, value for value and
error for error (yamljson.parse_yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from collbench.errors import InputFileError
from collbench.topology.io import dumps_topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo
from collbench.yamljson import MAX_YAML_DEPTH, parse_yaml

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real"
HAS_LIBYAML = getattr(yaml, "CSafeLoader", None) is not None


def _documents() -> list[tuple[str, str]]:
    """Every YAML file the repository holds (profiles, topologies), and each real nvidia-smi
    topology written as collbench writes topology YAML."""
    docs = [
        (str(p.relative_to(ROOT)), p.read_text())
        for folder in ("tests/fixtures", "profiles", "docs")
        for p in sorted((ROOT / folder).rglob("*.y*ml"))
    ]
    docs += [(p.name, dumps_topology(read_nvidia_smi_topo(p, []), "yaml")) for p in sorted(REAL.glob("*.topo.txt"))]
    return docs


def _outcome(text: str, tmp_path: Path, *, libyaml: bool) -> Any:
    try:
        return ("ok", parse_yaml(text, tmp_path / "t.yaml", libyaml=libyaml))
    except InputFileError as exc:
        return ("error", str(exc))


def test_the_repository_yaml_reads_the_same_with_either_loader(tmp_path: Path) -> None:
    docs = _documents()
    assert len(docs) >= 25
    for name, text in docs:
        fast, pure = _outcome(text, tmp_path, libyaml=True), _outcome(text, tmp_path, libyaml=False)
        assert fast == pure and fast[0] == "ok", name


BAD_YAML = [
    "a: [1,\n",  # unclosed flow sequence
    "a: 1\n b: 2\n",  # mapping value where none is allowed
    "a: b: c\n",
    "- a\nb: c\n",
    "a: *missing\n",  # undefined alias
    "a: &x 1\nb: &x 2\nc: *x\n",  # an anchor given twice (allowed, the last one wins)
    "a: &x [1, *x]\n",  # alias to itself
    "a: 1\n\x07b: 2\n",  # control character
    "a:\n\t- 1\n",  # tab indentation
    "key: 'unclosed\n",
    '"\\q"\n',  # unknown escape
    "a: !!python/object:os.system x\n",  # not a safe tag
    "%YAML 2.0\n---\na: 1\n",
    "--- a\n--- b\n",  # two documents
    "[" * 100_000 + "]" * 100_000,
    "[" * 1_000 + "]" * 1_000,
    "[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1),
    "- " * 3_000 + "x\n",
    "{a: 1, a: 2}\n",  # a key given twice
    "? [1, 2]\n: 3\n",  # a list as a key
    "a: \ufeff1\n",
    "",
    "# only a comment\n",
]


@pytest.mark.parametrize("text", BAD_YAML, ids=range(len(BAD_YAML)))
def test_odd_and_bad_yaml_gives_the_same_value_or_error_with_either_loader(text: str, tmp_path: Path) -> None:
    fast, pure = _outcome(text, tmp_path, libyaml=True), _outcome(text, tmp_path, libyaml=False)
    assert fast == pure
    if fast[0] == "error":
        assert "\n" not in fast[1]


def test_nesting_is_bounded_alike(tmp_path: Path) -> None:
    deepest = "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH
    for libyaml in (True, False):
        assert _outcome(deepest, tmp_path, libyaml=libyaml)[0] == "ok"
        too_deep = _outcome("[" + deepest + "]", tmp_path, libyaml=libyaml)
        assert too_deep == ("error", f"{tmp_path / 't.yaml'}: not YAML collbench reads: nested too deeply")


@pytest.mark.skipif(not HAS_LIBYAML, reason="PyYAML was built without libyaml")
def test_libyaml_reads_good_yaml_and_pyyaml_only_what_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []

    class Recording(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            built.append(stream)
            super().__init__(stream)

    monkeypatch.setattr(yaml, "SafeLoader", Recording)
    assert parse_yaml("a: [1, 2]\nb: {c: d}\n", tmp_path / "t.yaml") == {"a": [1, 2], "b": {"c": "d"}}
    assert built == []
    pyyaml_says = r"t\.yaml:2: not YAML: expected the node content, but found '<stream end>'"
    with pytest.raises(InputFileError, match=pyyaml_says):
        parse_yaml("a: [1,\n", tmp_path / "t.yaml")
    assert built == ["a: [1,\n"]


def test_a_probes_topology_reads_the_same_with_either_loader_and_the_collector_paused(tmp_path: Path) -> None:
    # A topology as discover --probe writes it past 2,048 ranks (by nodes), at 128 ranks: the file whose
    # load took rank 0 21 s at 16,384. The cyclic collector is paused while it is read (half that time);
    # the values are the same, by either loader, and the collector is as it was after, even on an error.
    import gc

    from collbench.runtime.probe import PairMeasure, measured_topology
    from collbench.topology.io import load_topology, save_topology

    hosts = [f"node{r // 8:03d}" for r in range(128)]
    pairs = [(a, b) for a in range(128) for b in range(a + 1, 128) if a // 8 == b // 8 or (a % 8, b % 8) == (0, 0)]
    gbps = {pair: 20.0 if pair[0] // 8 == pair[1] // 8 else 10.0 for pair in pairs}
    measures = [PairMeasure(x, y, 5.0, gbps[a, b]) for a, b in pairs for x, y in ((a, b), (b, a))]
    path = tmp_path / "probe.yaml"
    save_topology(measured_topology(hosts, measures, gpus=True, per_node=True), path)
    text = path.read_text()
    fast, pure = _outcome(text, tmp_path, libyaml=True), _outcome(text, tmp_path, libyaml=False)
    assert fast == pure and fast[0] == "ok"
    assert len(fast[1]["node_links"]) == 16 * 15 // 2 and len(load_topology(path).devices) == 128
    passes: list[str] = []
    gc.callbacks.append(lambda phase, info: passes.append(phase))
    try:
        parse_yaml(text, path)
    finally:
        gc.callbacks.pop()
    assert passes == []  # thousands of nodes made, no pass of the collector over them
    assert gc.isenabled()
    gc.disable()
    try:
        parse_yaml(text, path)
        assert not gc.isenabled()  # left off where the caller had it off
    finally:
        gc.enable()
    assert _outcome("a: [1,\n", tmp_path, libyaml=True)[0] == "error" and gc.isenabled()
