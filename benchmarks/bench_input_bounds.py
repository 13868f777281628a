"""How long oversized or hostile inputs take to refuse or read: the bounds the unit tests check by
structure (refused before any per-pair work, aliases counted before they expand), timed here.

Targets (issue 34 moved them out of the unit tests): an NCCL XML of 5,000 GPUs and an nvidia-smi
matrix of 2,049 devices refused in under 5 s, the largest of each allowed read and summarised in under
10 s, a YAML alias bomb refused in under 5 s. Times are this process's CPU seconds (not wall time, which
a shared machine stretches), best of ``--runs``.

.venv/bin/python benchmarks/bench_input_bounds.py [--runs 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from collbench.cli.render.topology import topology_summary
from collbench.errors import InputFileError
from collbench.fileio import parse_yaml
from collbench.topology.model import MAX_MACHINE_DEVICES
from collbench.topology.nccl_xml import parse_nccl_xml
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo


def nccl_xml(gpus: int, nics: int = 0) -> str:
    """Two sockets; each GPU under its own PCIe switch with a <gpu> and an NVSwitch <nvlink>."""
    parts = ['<system version="1">']
    for socket in range(2):
        parts.append(f'<cpu numaid="{socket}" affinity="0000ffff">')
        for i in range(socket, gpus, 2):
            parts.append(
                f'<pci busid="{i // 256:04x}:{i % 256:02x}:00.0" link_speed="16 GT/s" link_width="16">'
                f'<gpu dev="{i}" sm="90" rank="{i}"><nvlink target="ffff:ff:00.0" count="18" tclass="0x068000"/>'
                "</gpu></pci>"
            )
        for i in range(socket, nics, 2):
            parts.append(f'<pci busid="{0x100 + i:04x}:00:00.0" class="0x020700"/>')
        parts.append("</cpu>")
    parts.append("</system>")
    return "\n".join(parts)


def smi_matrix(gpus: int, nics: int = 0) -> str:
    """GPUs in NVLink groups of eight (NV4), SYS elsewhere."""
    names = [f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(nics)]
    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity"]
    for i, row in enumerate(names):
        cells = [
            "X" if i == j else "NV4" if max(i, j) < gpus and i // 8 == j // 8 else "SYS" for j in range(len(names))
        ]
        lines.append(row + "\t" + "\t".join(cells) + "\t0-63\t0")
    return "\n".join(lines) + "\n"


def alias_bomb(levels: int) -> str:
    text = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
    return text


def refused(call: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            call()
        except InputFileError:
            return
        raise SystemExit("expected a refusal")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    largest = MAX_MACHINE_DEVICES - 16
    with TemporaryDirectory() as tmp:
        yaml_path = Path(tmp) / "bomb.yaml"
        cases: list[tuple[str, float, Callable[[], object]]] = [
            ("NCCL XML, 5,000 GPUs: refused", 5.0, refused(lambda: parse_nccl_xml(nccl_xml(5000), "many.xml"))),
            (
                f"NCCL XML, {largest} GPUs + 16 NICs: read",
                10.0,
                lambda: topology_summary(parse_nccl_xml(nccl_xml(largest, 16), "largest.xml")),
            ),
            (
                "nvidia-smi, 2,049 GPUs: refused",
                5.0,
                refused(lambda: parse_nvidia_smi_topo(smi_matrix(2049), "big.txt")),
            ),
            (
                f"nvidia-smi, {largest} GPUs + 16 NICs: read",
                10.0,
                lambda: topology_summary(parse_nvidia_smi_topo(smi_matrix(largest, 16), "largest.txt")),
            ),
            ("YAML alias bomb (9^10): refused", 5.0, refused(lambda: parse_yaml(alias_bomb(10), yaml_path))),
        ]
        print(f"{'case':<44} {'CPU s':>7} {'target':>7}")
        for name, target_s, call in cases:
            best = float("inf")
            for _ in range(args.runs):
                started = time.process_time()
                call()
                best = min(best, time.process_time() - started)
            verdict = "ok" if best < target_s else "MISSED"
            print(f"{name:<44} {best:7.2f} {target_s:6.0f}s {verdict}")


if __name__ == "__main__":
    main()
