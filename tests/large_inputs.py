"""Inputs at and past the readers' bounds, made in code: the unit tests check that they are refused
before any per-pair work (tests/unit/test_nccl_xml.py, test_nvidia_smi_scale.py, test_fileio.py), and
benchmarks/bench_input_bounds.py times the same inputs."""

from __future__ import annotations


def nccl_xml_of(gpus: int, nics: int = 0) -> str:
    """An NCCL topology XML of two sockets; each GPU under its own PCIe switch with a <gpu> and an
    NVSwitch <nvlink>; the NICs alternate between the sockets."""
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
    return "\n".join([*parts, "</system>"])


def smi_matrix_of(gpus: int, nics: int = 0) -> str:
    """An ``nvidia-smi topo -m`` matrix: GPUs in NVLink groups of eight (NV4), SYS elsewhere; NICs on
    PIX to nothing (SYS to all)."""
    names = [f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(nics)]
    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity"]
    for i, row in enumerate(names):
        cells = [
            "X" if i == j else "NV4" if i < gpus and j < gpus and i // 8 == j // 8 else "SYS" for j in range(len(names))
        ]
        lines.append(row + "\t" + "\t".join(cells) + "\t0-63\t0")
    return "\n".join(lines) + "\n"


def alias_bomb(levels: int) -> str:
    """YAML whose aliases expand to 9^levels strings (a billion laughs)."""
    text = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n"
    return text
