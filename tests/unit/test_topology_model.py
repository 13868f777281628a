import pytest

from collbench.topology.bus_id import normalize_bus_id
from collbench.topology.cpu_list import format_cpu_list, parse_cpu_list
from collbench.topology.model import (
    Device,
    DeviceKind,
    Link,
    LinkKind,
    NodeLink,
    Topology,
)


def _two_gpus(bw: float = 50.0) -> Topology:
    return Topology(
        host="h",
        devices=(
            Device("GPU0", DeviceKind.GPU, 0, name="A100", bus_id="0000:07:00.0", numa_node=0, cpus=(0, 1)),
            Device("GPU1", DeviceKind.GPU, 1, name="A100", bus_id="0000:0b:00.0", numa_node=0, cpus=(0, 1)),
        ),
        links=(Link("GPU0", "GPU1", LinkKind.NVLINK, count=2, bandwidth_gbps=bw),),
        source="nvml",
    )


def test_bus_ids_normalise_from_nvml_nccl_and_short_forms() -> None:
    assert normalize_bus_id(b"00000000:07:00.0") == "0000:07:00.0"
    assert normalize_bus_id("0000:07:00.0") == "0000:07:00.0"
    assert normalize_bus_id("07:00.0") == "0000:07:00.0"
    assert normalize_bus_id("00000000:C3:00.0") == "0000:c3:00.0"


def test_cpu_lists_round_trip() -> None:
    assert parse_cpu_list("0-2,5") == (0, 1, 2, 5)
    assert parse_cpu_list("N/A") is None
    assert parse_cpu_list("") is None
    assert format_cpu_list((0, 1, 2, 5)) == "0-2,5"


def test_dict_round_trip_keeps_everything_and_the_fingerprint() -> None:
    topo = _two_gpus()
    back = Topology.from_dict(topo.to_dict())
    assert back == topo
    assert back.fingerprint == topo.fingerprint
    assert topo.link("GPU1", "GPU0") is not None
    assert topo.link("GPU1", "GPU0").matrix_code == "NV2"  # type: ignore[union-attr]


def test_fingerprint_changes_with_what_matters_for_performance() -> None:
    assert _two_gpus(50.0).fingerprint != _two_gpus(25.0).fingerprint


def test_bad_topologies_are_refused() -> None:
    gpu = Device("GPU0", DeviceKind.GPU, 0)
    with pytest.raises(ValueError, match="repeat"):
        Topology("h", (gpu, gpu), ())
    with pytest.raises(ValueError, match="not in the topology"):
        Topology("h", (gpu,), (Link("GPU0", "GPU9", LinkKind.PIX),))


def test_rank_devices_are_found_once_not_on_every_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout's hops (cli/render/layouts.py) and the simulator's transfers (models/simulator.py) ask
    for links by rank index, per pair: sorting every device on each ask made a 2048-rank layout's ring
    lines O(ranks^2 log ranks) (17 s of its render)."""
    ranks = 64
    devices = tuple(Device(f"CPU{r}", DeviceKind.CPU, r, host=f"h{r // 8}") for r in range(ranks))
    links = tuple(
        Link(f"CPU{a}", f"CPU{b}", LinkKind.MEASURED, bandwidth_gbps=1.0 + a, source="measured")
        for a in range(ranks)
        for b in range(a + 1, ranks)
    )
    topo = Topology(host="h0", devices=devices, links=links, source="probe")
    sorted_devices = []
    real = Topology.devices_of
    monkeypatch.setattr(Topology, "devices_of", lambda self, kind: sorted_devices.append(kind) or real(self, kind))
    assert [d.id for d in topo.rank_devices] == [f"CPU{r}" for r in range(ranks)]
    assert all(
        topo.rank_link(i, j).bandwidth_gbps == 1.0 + min(i, j) for i in range(ranks) for j in range(ranks) if i != j
    )
    assert sorted_devices == []


@pytest.mark.parametrize("source", ["infered", "Measured", ""])
def test_a_link_source_collbench_does_not_know_is_refused(source: str) -> None:
    """'infered' read as a spec link printed a figure nobody measured as a plain one (discover's INF and
    ~ marks, layout's 'inferred' hops read the source), and 'Measured' put a probe's figures in the
    fingerprint. From a file, one line: 'not a valid topology: ... source ... is not one of ...'."""
    document = _two_gpus().to_dict()
    document["links"][0]["source"] = source
    with pytest.raises(ValueError, match=r"link GPU0-GPU1: source .* is not one of spec, default, measured, inferred"):
        Topology.from_dict(document)
    with pytest.raises(ValueError, match=r"the default link between hosts: source .* is not one of"):
        NodeLink(LinkKind.MEASURED, 1.0, source=source)  # type: ignore[arg-type]
