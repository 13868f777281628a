"""`collbench discover`: this machine's GPUs, NVLink, PCIe, NUMA and NICs, or its CPU ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.markup import escape

from collbench.backends import AUTO, BACKENDS, backend_named, torch_backend_names
from collbench.cli.console import console, err_console, print_note
from collbench.cli.topology_source import (
    FromFile,
    FromNcclXml,
    FromNvidiaSmi,
    Replay,
    TopologyFile,
    one_file,
    read_topology,
    require_one_source,
)
from collbench.errors import CommandLineError, ConfigError, InputFileError, UserError
from collbench.fileio import check_writable
from collbench.filekinds import (
    NVML_RECORDING_KIND,
    TOPOLOGY_KIND,
    holds_content,
    refuse_replacing,
    refuse_replacing_record,
)
from collbench.runtime.probe_pairs import ALL_PAIRS_MAX_RANKS, NODE_ROUNDS, PAIRS, Pairs
from collbench.topology.io import load_topology, save_topology
from collbench.topology.model import Topology
from collbench.topology.sources import record_nvml
from collbench.units import MIN_TIMEOUT_S, check_ranks, check_seconds, counted


def _restrict(topo: Topology, ranks: int | None) -> Topology:
    if ranks is None or (topo.source == "host" and len(topo.rank_devices) == ranks):
        return topo
    try:
        return topo.subset(ranks)
    except ValueError as exc:
        raise ConfigError(f"--ranks {ranks}: {exc}") from None


def _held(output: Path) -> str:
    """What ``output`` holds, for the refusal to replace it: a topology --probe measured is said as such
    ('discover -O probe.yaml' replaced the latencies and bandwidths a probe across the nodes had taken
    minutes to measure with a description measuring nothing, without a word)."""
    try:
        measured = load_topology(output).source == "probe"
    except UserError:
        measured = False  # not a topology collbench reads: it is still not empty
    return "holds a topology measured by --probe" if measured else "is not empty"


def _probe(
    topo: Topology, ranks: int | None, backend: str, timeout_s: float | None, pairs: Pairs, *, given: str | None
) -> Topology | None:
    """Probe ``topo``'s ranks; ``given`` is the source flag and file it came from, None for this machine's."""
    try:
        from collbench.runtime.probe import probe_topology
    except ModuleNotFoundError as exc:
        if exc.name not in ("collbench.runtime.probe",):
            raise
        raise UserError("--probe is not available in this build (collbench.runtime.probe is missing)") from None
    from collbench.runtime.launch.ranks import joined_job

    # Under a launcher the job's size rules (None); locally, every rank device of the topology.
    world_size = ranks if ranks is not None or joined_job() is not None else len(topo.rank_devices)
    if backend == AUTO:
        # The probe runs here: on GPUs (NCCL) only when the topology is this machine's own GPUs.
        on_gpu = bool(given is None and topo.gpus)
        backend = next(b.name for b in BACKENDS if b.torch_backend is not None and b.on_gpu == on_gpu)
    named = backend_named(backend)
    if topo.gpus and named is not None and not named.on_gpu:
        # The measured links go onto the topology's rank devices: CPU processes' loopback figures were
        # written as 'discover --from-nvidia-smi a100.txt --probe' GPUs' links (1 GB/s, 'NVLink: none').
        whose = "this machine's topology" if given is None else f"the topology from {given}"
        raise ConfigError(
            f"--probe over {backend} measures CPU ranks, and {whose} has {counted(len(topo.gpus), 'GPU')} as its "
            "ranks: the CPU ranks' links are not theirs; probe the GPUs on their machine with --backend nccl, or "
            "leave out --probe"
        )
    return probe_topology(world_size, backend=backend, timeout_s=timeout_s, base=topo, pairs=pairs)


def _say_crowded(topo: Topology) -> None:
    """This host's CPU ranks past its cores said in sweep's words (runtime.host.affinity's placement):
    'discover --ranks 4' on 2 cores described (or probed) 4 ranks without a word of their sharing the
    cores, which every timing on them, the probe's and a sweep's, then includes."""
    from collbench.runtime.host.affinity import plan_placement
    from collbench.runtime.launch.launchers import detect_job

    # A launcher placed its ranks, across hosts: sweep says that case itself (launched_oversubscribed).
    if topo.gpus or detect_job() is not None:
        return
    crowded = plan_placement(len(topo.rank_devices)).warning
    if crowded:
        print_note("note", crowded)


def discover(
    from_nvidia_smi: FromNvidiaSmi = None,
    from_nccl_xml: FromNcclXml = None,
    from_file: FromFile = None,
    topology: TopologyFile = None,
    replay: Replay = None,
    record: Annotated[
        Path | None, typer.Option("--record", metavar="FILE", help="Save this machine's raw NVML answers (JSON).")
    ] = None,
    ranks: Annotated[
        int | None,
        typer.Option("--ranks", help="Ranks to describe: CPU ranks on a host without GPUs, else the first N."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the topology document on stdout, nothing else.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-O", metavar="FILE", help="Write the topology (.yaml/.yml/.json).")
    ] = None,
    bandwidth: Annotated[bool, typer.Option("--bandwidth", help="Show GB/s per pair instead of link kinds.")] = False,
    probe: Annotated[
        bool, typer.Option("--probe", help="Measure pairwise latency and bandwidth (runs ranks).")
    ] = False,
    backend: Annotated[
        str, typer.Option("--backend", metavar="NAME", help="Backend for --probe: auto, gloo or nccl.")
    ] = "auto",
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            "-T",
            metavar="SECONDS",
            help="Seconds before --probe gives up (default: 60 + 3.2 per round of pairs, see --pairs).",
        ),
    ] = None,
    pairs: Annotated[
        str,
        typer.Option(
            "--pairs",
            metavar="WHICH",
            help=(
                "Pairs --probe measures: all (every pair of ranks), nodes (every pair within a node, one pair "
                f"of ranks per pair of nodes, {NODE_ROUNDS} other nodes each, the rest inferred), auto (all up "
                f"to {ALL_PAIRS_MAX_RANKS} ranks, nodes beyond)."
            ),
        ),
    ] = "auto",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a file at -O or --record (never a profile or results).")
    ] = False,
) -> None:
    """Describe this machine's GPUs, NVLink, PCIe, NUMA and NICs (or its CPU ranks)."""
    file_flag, from_file = one_file(from_file, topology)
    sources = {
        "--from-nvidia-smi": from_nvidia_smi,
        "--from-nccl-xml": from_nccl_xml,
        file_flag: from_file,
        "--replay": replay,
        "--record": record,
    }
    require_one_source(sources)
    if ranks is not None:
        check_ranks(ranks, 1, "discover")
    known = (AUTO, *(name for name in torch_backend_names() if name != AUTO))
    if backend not in known:
        raise CommandLineError(f"--backend {backend!r}: expected one of {', '.join(known)}")
    if timeout is not None:
        check_seconds(timeout, "--timeout", MIN_TIMEOUT_S)
    if bandwidth and json_out:
        # 'discover --bandwidth --json' printed the document as ever: --bandwidth sets the matrix's cells.
        raise CommandLineError("--bandwidth sets what the matrix shows, and --json prints no matrix: give one of them")
    if pairs not in PAIRS:
        raise CommandLineError(f"--pairs {pairs!r}: expected one of {', '.join(PAIRS)}")
    given = (("--backend", backend != AUTO), ("--timeout", timeout is not None), ("--pairs", pairs != "auto"))
    probe_only = [flag for flag, on in given if on]
    if probe_only and not probe:
        # 'discover --backend nccl' described the machine as ever and said nothing of the option.
        verb, them = ("set", "them") if len(probe_only) > 1 else ("sets", "it")
        raise CommandLineError(
            f"{' and '.join(probe_only)} {verb} how --probe measures; add --probe, or leave {them} out"
        )
    if output is not None and output.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise InputFileError(str(output), "unknown extension; use .yaml, .yml or .json")
    if output is not None:
        # Before any probe: a place that takes no file, or a profile named -O, is said before the work.
        check_writable(output)
        refuse_replacing_record(output, TOPOLOGY_KIND)
        # As sweep, fit and import: a second discover into the same name replaced the first's file.
        if not overwrite and holds_content(output):
            refuse_replacing(output, overwrite, held=_held(output))
    if record is not None:
        # A recording is a machine's answers, maybe of a machine no longer at hand: not replaced unasked.
        check_writable(record)
        refuse_replacing_record(record, NVML_RECORDING_KIND)
        refuse_replacing(record, overwrite, option="--record")

    if record is not None:
        topo = _restrict(record_nvml(record), ranks)
        err_console.print(f"recorded NVML answers to {record}")
    else:
        topo = _restrict(
            read_topology(
                from_nvidia_smi=from_nvidia_smi,
                from_nccl_xml=from_nccl_xml,
                from_file=from_file,
                replay=replay,
                ranks=ranks,
                file_flag=file_flag,
            ),
            ranks,
        )

    if not any(v is not None for v in sources.values()):
        _say_crowded(topo)  # before a probe, whose timings it is about too
    if probe:
        named_source = next((f"{k} {v}" for k, v in sources.items() if v is not None and k != "--record"), None)
        measured = _probe(topo, ranks, backend, timeout, cast(Pairs, pairs), given=named_source)
        if measured is None:
            # The measurements went to rank 0 alone (runtime/probe.py): it writes and prints.
            return
        topo = measured
    if output is not None:
        save_topology(topo, output)
        err_console.print(f"wrote topology to {escape(str(output))}")
    if json_out:
        typer.echo(json.dumps(topo.to_dict(), indent=2))
        return
    from collbench.cli.render.topology import render_topology

    console.print(render_topology(topo, bandwidth=bandwidth))
