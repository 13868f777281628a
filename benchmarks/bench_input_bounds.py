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
import sys
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from collbench.cli.render.topology import topology_summary
from collbench.errors import InputFileError
from collbench.topology.model import MAX_MACHINE_DEVICES
from collbench.topology.nccl_xml import parse_nccl_xml
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo
from collbench.yamljson import parse_yaml

# The inputs the unit tests check are refused or read, made where they are (tests/large_inputs.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from large_inputs import alias_bomb, nccl_xml_of, smi_matrix_of


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
            ("NCCL XML, 5,000 GPUs: refused", 5.0, refused(lambda: parse_nccl_xml(nccl_xml_of(5000), "many.xml"))),
            (
                f"NCCL XML, {largest} GPUs + 16 NICs: read",
                10.0,
                lambda: topology_summary(parse_nccl_xml(nccl_xml_of(largest, 16), "largest.xml")),
            ),
            (
                "nvidia-smi, 2,049 GPUs: refused",
                5.0,
                refused(lambda: parse_nvidia_smi_topo(smi_matrix_of(2049), "big.txt")),
            ),
            (
                f"nvidia-smi, {largest} GPUs + 16 NICs: read",
                10.0,
                lambda: topology_summary(parse_nvidia_smi_topo(smi_matrix_of(largest, 16), "largest.txt")),
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
