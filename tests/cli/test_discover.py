"""`collbench discover` in-process: every source, the outputs, and bad input as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.runtime.host.affinity import cgroup_cpu_limit, oversubscribed_note, usable_cores
from collbench.topology.io import load_topology
from collbench.topology.model import LinkKind

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"
SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"
WIDE = {"COLUMNS": "200"}


def _shared(name: str) -> Path:
    path = SHARED / name
    return path


def _run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["discover", *args], input=input, env=WIDE)
    return result.exit_code, result.stdout, result.stderr


def _error_line(code: int, stderr: str) -> str:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_this_machine_describes_the_host_or_its_gpus() -> None:
    code, out, err = _run()
    assert code == 0, err
    if "CPU0" in out:  # no GPU here (CI, this machine): the reason, the CPU ranks
        assert "describing the host and its CPU ranks" in out
        assert "CPU ranks:" in out and "LOOP" in out
    else:
        assert "GPU0" in out


def test_json_is_the_document_and_nothing_else() -> None:
    code, out, err = _run("--json", "--ranks", "3")
    assert code == 0, err
    data = json.loads(out)
    assert data["schema_version"] == 1
    assert {"host", "fingerprint", "source", "devices", "links"} <= set(data)
    if data["source"] == "host":
        assert [d["id"] for d in data["devices"]] == ["CPU0", "CPU1", "CPU2"]
        assert {lk["kind"] for lk in data["links"]} == {"loopback"}
        assert "NVML" in data["note"] or "pynvml" in data["note"]


def test_replay_nvswitch_machine_table_and_summary() -> None:
    code, out, err = _run("--replay", str(RECORDINGS / "dgx-h100.json"))
    assert code == 0, err
    assert out.count("NV18") == 56  # 8 x 7 off-diagonal cells
    assert "8 x NVIDIA H100 80GB HBM3" in out
    assert "NVLink: version 4.0, 18 links per GPU through NVSwitch" in out
    assert "PCIe: gen5 x16" in out
    assert "NUMA nodes: 2 (0, 1)" in out
    assert "56-111,168-223" in out


def test_bandwidth_shows_gbps() -> None:
    code, out, err = _run("--replay", str(RECORDINGS / "dgx1-v100.json"), "--bandwidth")
    assert code == 0, err
    assert "GB/s per direction" in out
    row0 = next(line for line in out.splitlines() if line.startswith("GPU0"))
    assert row0.split()[1:9] == ["X", "25", "25", "50", "50", "7.9", "7.9", "7.9"]


def test_bandwidth_says_whether_its_figures_were_measured(tmp_path: Path) -> None:
    # 100 GB/s for NV4 is a documented default, 25 for a V100 NVLink NVML's spec figure: the matrix
    # titled 'GB/s per direction' alone read as measured (only the CPU ranks' summary said otherwise).
    code, out, err = _run("--from-nvidia-smi", str(_shared("a100x4-nv4-nics.topo.txt")), "--bandwidth")
    assert code == 0, err
    assert out.splitlines()[0].strip() == "GB/s per direction: documented defaults per link kind, not measured"
    code, out, err = _run("--replay", str(RECORDINGS / "dgx1-v100.json"), "--bandwidth")
    assert code == 0, err
    assert out.splitlines()[0].strip() == "GB/s per direction: nominal figures per link kind, not measured"
    # A probe's topology: measured.
    from dataclasses import replace

    from collbench.topology.host import host_topology
    from collbench.topology.io import save_topology

    host = host_topology(2)
    probed = replace(host, source="probe", links=tuple(replace(lk, source="measured") for lk in host.links))
    save_topology(probed, tmp_path / "probe.yaml")
    code, out, err = _run("--topology", str(tmp_path / "probe.yaml"), "--bandwidth")
    assert code == 0, err
    assert out.splitlines()[0].strip() == "GB/s per direction, measured"


def test_from_nvidia_smi_file_and_stdin() -> None:
    path = _shared("a100x4-nv4-nics.topo.txt")
    code, out, err = _run("--from-nvidia-smi", str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["source"] == "nvidia-smi"
    assert [d["name"] for d in data["devices"] if d["kind"] == "nic"] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    code, out2, err = _run("--from-nvidia-smi", "-", "--json", input=path.read_text())
    assert code == 0, err
    assert json.loads(out2)["links"] == data["links"]


def test_from_nccl_xml() -> None:
    code, out, err = _run("--from-nccl-xml", str(_shared("nccl-topo-2xa100-nvswitch-cx6.xml")))
    assert code == 0, err
    assert "NV12" in out and "mlx5_bond_0 (25 GB/s)" in out


def test_nccl_xml_without_nvlink_elements_says_nvlink_unknown() -> None:
    """A cloud image's NCCL_TOPO_FILE (Azure ND H100 v5: 8 NVSwitch-connected H100s) names no <nvlink>:
    the summary said "NVLink: none (GPUs talk over PCIe)" below the reader's own "NVLink unknown" note."""
    real = Path(__file__).parents[1] / "fixtures" / "real" / "azure-ndv5-h100-x8-8ib-class-only.topo.xml"
    code, out, err = _run("--from-nccl-xml", str(real))
    assert code == 0, err
    assert "NVLink: unknown (the XML names none; NCCL asks the driver at run time)" in out.splitlines()
    assert "NVLink unknown" in " ".join(err.split())


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_output_file_and_from_file_read_back_identically(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"topo{suffix}"
    code, out, err = _run("--replay", str(RECORDINGS / "pcie-a6000x8.json"), "-O", str(path), "--json")
    assert code == 0, err
    assert f"wrote topology to {path}" in err
    first = json.loads(out)
    saved = load_topology(path)
    assert saved.to_dict() == first
    code, out, err = _run("--from-file", str(path), "--json")
    assert code == 0, err
    assert json.loads(out) == first
    link = saved.link("GPU0", "GPU1")
    assert link is not None and link.kind == LinkKind.PIX


def test_record_needs_nvml_here(tmp_path: Path) -> None:
    pytest.importorskip("pynvml")
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works here; recording is checked in tests/gpu")
    except pynvml.NVMLError:
        pass
    code, _, err = _run("--record", str(tmp_path / "rec.json"))
    line = _error_line(code, err)
    assert "--record needs NVML" in line
    assert not (tmp_path / "rec.json").exists()


def test_probe_is_wired(monkeypatch: pytest.MonkeyPatch) -> None:
    import collbench.runtime.probe as probe

    calls: list[tuple[int, str, float, str]] = []

    def fake_probe(world_size: int, *, backend: str, timeout_s: float, base: object, pairs: str) -> object:
        calls.append((world_size, backend, timeout_s, pairs))
        return base

    monkeypatch.setattr(probe, "probe_topology", fake_probe)
    t4 = str(RECORDINGS / "t4x4-vm.json")
    code, _, err = _run("--replay", t4, "--probe", "--backend", "nccl", "--timeout", "5", "--json")
    assert code == 0, err
    code, _, err = _run("--replay", t4, "--probe", "--backend", "nccl", "--pairs", "nodes", "--json")
    assert code == 0, err
    # A saved description of CPU ranks is probed over gloo, as this host's own would be.
    cpu = Path(__file__).resolve().parents[2] / "docs" / "cpu-2core-gloo-2ranks-topology.yaml"
    code, _, err = _run("--from-file", str(cpu), "--probe", "--json")
    assert code == 0, err
    assert calls == [(4, "nccl", 5.0, "auto"), (4, "nccl", None, "nodes"), (2, "gloo", None, "auto")]


def test_a_probe_of_cpu_ranks_is_not_put_on_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """'discover --from-nvidia-smi a100.txt --probe' on a host without GPUs measured 4 CPU ranks over gloo
    and wrote their figures as the A100s' links (0.75-1.2 GB/s, 'NVLink: none'). A topology whose ranks
    are GPUs is probed on GPUs (NCCL, which needs them here) or not at all."""
    import collbench.runtime.probe as probe

    def no_probe(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing is measured for a probe that cannot mean anything")

    monkeypatch.setattr(probe, "probe_topology", no_probe)
    a100 = str(SHARED / "a100x4-nv4-nics.topo.txt")
    for source in (["--from-nvidia-smi", a100], ["--replay", str(RECORDINGS / "t4x4-vm.json")]):
        for backend in ([], ["--backend", "gloo"]):
            line = _error_line(*_run(*source, "--probe", *backend)[::2])
            assert line == (
                f"error: --probe over gloo measures CPU ranks, and the topology from {' '.join(source)} has 4 GPUs as "
                "its ranks: the CPU ranks' links are not theirs; probe the GPUs on their machine with --backend nccl, "
                "or leave out --probe"
            )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--from-nvidia-smi", "/nonexistent/topo.txt"], "/nonexistent/topo.txt: no such file"),
        (["--from-nccl-xml", "/nonexistent/t.xml"], "/nonexistent/t.xml: no such file"),
        (["--from-file", "/nonexistent/t.yaml"], "/nonexistent/t.yaml: no such file"),
        (["--replay", "/nonexistent/r.json"], "/nonexistent/r.json: no such file"),
        (["--ranks", "0"], "--ranks 0: discover needs at least 1 rank"),
        (["--replay", str(RECORDINGS / "t4x4-vm.json"), "--ranks", "9"], "--ranks 9"),
        (["--from-file", "a.yaml", "--replay", "b.json"], "--from-file and --replay name different sources"),
        (["-O", "topo.txt"], "topo.txt: unknown extension"),
        (["--backend", "mpi", "--probe"], "--backend 'mpi'"),
        # Without --probe they were ignored without a word.
        (["--backend", "gloo"], "--backend sets how --probe measures; add --probe, or leave it out"),
        (["-T", "5", "--backend", "gloo"], "--backend and --timeout set how --probe measures"),
        # NaN passed '<= 0' into a ValueError's traceback, 1e30 into datetime.timedelta's OverflowError.
        (["--probe", "-T", "nan"], "--timeout must be a positive number of seconds, at most 604,800 (a week), got nan"),
        (["--probe", "-T", "1e30"], "--timeout must be a positive number of seconds, at most 604,800 (a week)"),
        (["--probe", "-T", "0.1"], "--timeout 0.1: give at least 1 s; a rank takes about that to start"),
        (["--pairs", "nodes"], "--pairs sets how --probe measures; add --probe, or leave it out"),
        (["--pairs", "some", "--probe"], "--pairs 'some': expected one of auto, all, nodes"),
        # The document was printed as ever: --bandwidth sets the matrix's cells.
        (["--bandwidth", "--json"], "--bandwidth sets what the matrix shows, and --json prints no matrix"),
    ],
)
def test_bad_options_exit_2_with_one_line(args: list[str], expected: str) -> None:
    code, out, err = _run(*args)
    assert expected in _error_line(code, err)
    assert out == ""


def test_bad_matrix_from_stdin_names_the_line() -> None:
    text = "\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV2\t X \n"
    code, _, err = _run("--from-nvidia-smi", "-", input=text)
    line = _error_line(code, err)
    assert "<stdin>:3: the matrix is not symmetric" in line


def test_empty_files(tmp_path: Path) -> None:
    for flag, name in (("--from-nvidia-smi", "e.txt"), ("--from-nccl-xml", "e.xml"), ("--from-file", "e.yaml")):
        path = tmp_path / name
        path.write_text("")
        code, _, err = _run(flag, str(path))
        assert "empty" in _error_line(code, err)


def test_render_to_a_fixed_width_console() -> None:
    from io import StringIO

    from rich.console import Console

    from collbench.cli.render.topology import render_topology
    from collbench.topology.sources import discover_topology

    topo = discover_topology(nvml_replay=RECORDINGS / "pcie-a6000x8.json")
    buf = StringIO()
    Console(file=buf, width=120, color_system=None).print(render_topology(topo))
    lines = buf.getvalue().splitlines()
    # The affinity headers are stacked ("CPU" above "Affinity") so that 8 GPUs fit 80 columns.
    header = next(line for line in lines if "GPU7" in line and "Affinity" in line)
    assert header.split() == [*(f"GPU{i}" for i in range(8)), "Affinity", "Affinity"]
    row = next(line for line in lines if line.startswith("GPU2"))
    assert row.split() == ["GPU2", "PXB", "PXB", "X", "PIX", "SYS", "SYS", "SYS", "SYS", "0-31,64-95", "0"]
    assert "NVLink: none (GPUs talk over PCIe)" in lines
    assert "PCIe: gen4 x16" in lines


def test_a_topology_probe_measured_is_not_replaced_without_overwrite(tmp_path: Path) -> None:
    # 'discover -O probe.yaml' replaced what a probe across the nodes had measured with a description
    # measuring nothing, without a word. The probe's file is made here as one from --probe reads.
    saved = tmp_path / "probe.yaml"
    code, _, err = _run("--ranks", "2", "-O", str(saved))
    assert code == 0, err
    measured = saved.read_text().replace("\nsource: host\n", "\nsource: probe\n", 1)
    assert "\nsource: probe\n" in measured
    saved.write_text(measured)
    line = _error_line(*_run("--ranks", "2", "-O", str(saved))[::2])
    assert line == (
        f"error: {saved} holds a topology measured by --probe; pass --overwrite to replace it, or -O FILE to write "
        "elsewhere"
    )
    assert saved.read_text() == measured
    code, _, err = _run("--ranks", "2", "-O", str(saved), "--overwrite")
    assert code == 0, err
    assert "\nsource: host\n" in saved.read_text()
    # A topology that measured nothing is not replaced without --overwrite either (as sweep, fit and import).
    line = _error_line(*_run("--ranks", "2", "-O", str(saved))[::2])
    assert line == f"error: {saved} is not empty; pass --overwrite to replace it, or -O FILE to write elsewhere"


def test_cpu_ranks_past_the_cores_are_said_to_share_them() -> None:
    """'discover --ranks 4' on 2 cores described 4 CPU ranks without a word of their sharing the cores,
    which every timing on them (the probe's, a sweep's) includes: said as sweep says it."""
    cores = usable_cores(quota=cgroup_cpu_limit())
    code, out, err = _run("--ranks", str(cores + 2))
    assert code == 0, err
    if "CPU0" not in out:
        pytest.skip("GPUs here: their ranks are the GPUs, one each")
    assert oversubscribed_note(cores + 2, cores) in " ".join(err.split()), err
    assert f"{cores + 2} ranks on {cores} core" in err.splitlines()[0]  # one note, its first line names both
    code, out, err = _run("--ranks", str(min(cores, 2)))
    assert code == 0 and "scheduler" not in err, err
    # Another machine's topology read from a file is not this host's cores: nothing is said of them.
    code, out, err = _run(
        "--from-file", str(Path(__file__).resolve().parents[2] / "docs" / "cpu-2core-gloo-2ranks-topology.yaml")
    )
    assert code == 0 and "scheduler" not in err, err
