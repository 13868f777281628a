"""The topology-source options that `discover` and `layout` share, and reading the one chosen."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from collbench.cli.console import print_notes
from collbench.errors import ConfigError
from collbench.fileio import read_stdin_text
from collbench.topology.io import load_topology
from collbench.topology.model import Topology
from collbench.topology.nccl_xml import read_nccl_xml
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo, read_nvidia_smi_topo
from collbench.topology.sources import discover_topology

FromNvidiaSmi = Annotated[
    str | None,
    typer.Option("--from-nvidia-smi", metavar="FILE", help="Read the text of `nvidia-smi topo -m` ('-': stdin)."),
]
FromNcclXml = Annotated[Path | None, typer.Option("--from-nccl-xml", metavar="FILE", help="Read an NCCL topology XML.")]
FromFile = Annotated[
    Path | None, typer.Option("--from-file", metavar="FILE", help="Read a topology collbench wrote (YAML/JSON).")
]
# --topology is what sweep, tune, report and export call a saved topology: a user who wrote one with
# `discover -O` and passed it to `layout --topology` was told only that no such option exists. An option
# of its own, not a second name of --from-file: given both, click kept the last without a word.
TopologyFile = Annotated[
    Path | None,
    typer.Option("--topology", metavar="FILE", help="The same as --from-file (as sweep, tune and report name it)."),
]


def one_file(from_file: Path | None, topology: Path | None) -> tuple[str, Path | None]:
    """The saved topology named by --from-file or --topology, and the flag that named it (what a later
    message names: 'layout --topology t.yaml --from-nvidia-smi x' was told of a --from-file it never
    gave); ConfigError when they name two files."""
    if from_file is not None and topology is not None and from_file != topology:
        raise ConfigError(f"--from-file {from_file} and --topology {topology} name different sources; give one of them")
    return ("--from-file", from_file) if from_file is not None or topology is None else ("--topology", topology)


Replay = Annotated[
    Path | None, typer.Option("--replay", metavar="FILE", help="Replay an NVML recording (discover --record).")
]


def require_one_source(options: Mapping[str, object]) -> None:
    """Raise ConfigError when more than one of the named source options was given."""
    chosen = [name for name, value in options.items() if value is not None]
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)} name different sources; give one of them")


def read_topology(
    *,
    from_nvidia_smi: str | None,
    from_nccl_xml: Path | None,
    from_file: Path | None,
    replay: Path | None,
    ranks: int | None,
    file_flag: str = "--from-file",
) -> Topology:
    """The topology from the one source given, else the live machine (NVML, or the host's CPU ranks).

    File sources come back whole; the live machine comes back with ``ranks`` rank devices (CPU
    ranks are made to order on a host without GPUs). ``file_flag``: the option that named ``from_file``.
    """
    require_one_source(
        {
            "--from-nvidia-smi": from_nvidia_smi,
            "--from-nccl-xml": from_nccl_xml,
            file_flag: from_file,
            "--replay": replay,
        }
    )
    if from_nvidia_smi is not None:
        notes: list[str] = []
        if from_nvidia_smi == "-":
            topo = parse_nvidia_smi_topo(read_stdin_text("the text of `nvidia-smi topo -m`"), "<stdin>", notes)
        else:
            topo = read_nvidia_smi_topo(Path(from_nvidia_smi), notes)
        print_notes(notes)
        return topo
    if from_nccl_xml is not None:
        xml_notes: list[str] = []
        topo = read_nccl_xml(from_nccl_xml, xml_notes)
        print_notes(xml_notes)
        return topo
    if from_file is not None:
        return load_topology(from_file)
    return discover_topology(nvml_replay=replay, ranks=ranks)
