"""`collbench profile`: work on profile files (join the shapes of several into one, add predicted shapes)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from collbench.cli.console import console, err_console, print_note
from collbench.cli.options import CollbenchCommand, CollbenchGroup
from collbench.cli.predict import NO_NVLS_HELP

app = typer.Typer(cls=CollbenchGroup, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})


OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace a file already at -O that is none of the input profiles.")
]


@app.command("merge", cls=CollbenchCommand)
def merge(
    profiles: Annotated[
        list[Path], typer.Argument(help="Profiles of one machine and backend (two or more).", show_default=False)
    ],
    output: Annotated[
        Path, typer.Option("--output", "-O", metavar="PROFILE.yaml", help="Where the merged profile goes.")
    ],
    prefer: Annotated[
        str,
        typer.Option(
            "--prefer",
            metavar="none|newer",
            help="none: a shape in two profiles is an error; newer: keep the newer profile's.",
        ),
    ] = "none",
    overwrite: OverwriteOpt = False,
) -> None:
    """Join profiles' rule sets (one per communicator shape) into one profile."""
    from collbench.profile.document import Profile
    from collbench.profile.merge import merge_profiles

    check_profile_output(output, profiles, overwrite)
    loaded = [(str(path), Profile.load(path)) for path in profiles]
    command = shlex.join(
        ["collbench", "profile", "merge", *map(str, profiles), "--output", str(output)]
        + (["--prefer", prefer] if prefer != "none" else [])
    )
    merged = merge_profiles(loaded, prefer=prefer, command=command)
    merged.profile.save(output)
    for note in merged.notes:
        err_console.print(f"[yellow]note[/yellow]: {note}", highlight=False)
    console.print(f"wrote [bold]{escape(str(output))}[/bold]: {merged.profile.shapes_label()}", highlight=False)


def check_profile_output(path: Path, inputs: Sequence[Path], overwrite: bool) -> None:
    """UserError, before any work, for a place a profile cannot go: not writable, not a .yaml name, a
    file holding results or a topology (`profile merge A B -O results.jsonl` replaced 844 measured rows
    with a profile, without a word), or, unless ``overwrite``, any other file with content that is not one
    of ``inputs`` (`profile predict A -O B` replaced B, another machine's measured profile, without a
    word). An input named as -O is rewritten holding what it held, and more."""
    from collbench.errors import ConfigError
    from collbench.fileio import check_writable
    from collbench.filekinds import PROFILE_KIND, refuse_replacing, refuse_replacing_record

    check_writable(path)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"-O/--output {path}: a profile is YAML; use a .yaml name")
    refuse_replacing_record(path, PROFILE_KIND)
    refuse_replacing(path, overwrite or any(_same_file(path, i) for i in inputs))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False  # b is not there: Profile.load says so


def predicted_path(profile: Path) -> Path:
    """Where ``profile predict`` writes when -O is left out: a new file beside the input.

    The input is what was measured: rewriting it in place would lose the file as it was, so only an
    explicit -O may name it. An existing file at the default path is refused rather than replaced. The
    name is YAML's whatever the input's: `profile predict rows.jsonl` (rows given for a profile) was
    refused for a '-O rows.predicted.jsonl' no one had given, before its input was read and named.
    """
    from collbench.errors import InputFileError

    suffix = profile.suffix if profile.suffix.lower() in (".yaml", ".yml") else ".yaml"
    target = profile.with_name(f"{profile.stem}.predicted{suffix}")
    if target.exists() or target.is_symlink():
        raise InputFileError(str(target), "exists; give -O PATH to say where the predicted profile goes")
    return target


@app.command("predict", cls=CollbenchCommand)
def predict(
    profile: Annotated[Path, typer.Argument(help="A profile with fitted models (from `collbench tune`).")],
    ranks: Annotated[
        str,
        typer.Option(
            "--ranks",
            metavar="N[:NODES],...",
            help="Shapes to predict: 8,16 or 64:8 (ranks:nodes; without nodes, as many as keep the measured "
            "ranks a node).",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-O",
            metavar="PROFILE.yaml",
            help="Where it goes (default: NAME.predicted.yaml beside the input, never the input itself).",
        ),
    ] = None,
    overwrite: OverwriteOpt = False,
    no_nvls: Annotated[bool, typer.Option("--no-nvls", help=NO_NVLS_HELP)] = False,
) -> None:
    """Add rule sets predicted from the profile's fitted models for shapes not measured (as tune --predict-ranks)."""
    from collbench.cli.predict import refuse_nccl_only
    from collbench.cli.render.profile import render_rules
    from collbench.models.nccl_graph import NodeFacts
    from collbench.profile.document import Profile
    from collbench.tuning.predicted_shapes import assumed_nodes, prediction_notes, with_predictions
    from collbench.tuning.shape_args import parse_shapes

    shapes = parse_shapes(ranks, "--ranks")  # the options first, then the files
    target = output if output is not None else predicted_path(profile)
    check_profile_output(target, [profile], overwrite)
    loaded = Profile.load(profile)
    # As `predict --no-nvls`: the profile's runs set NCCL_NVLS_ENABLE=0, and so will the predicted shapes'.
    refuse_nccl_only(["--no-nvls"] if no_nvls else [], {f.backend for f in loaded.fits}, "this profile's fits are")
    facts = NodeFacts(nvls=False) if no_nvls else None
    added = with_predictions(loaded, shapes, "--ranks", facts)
    added.save(target)
    for line in assumed_nodes(loaded, shapes, "--ranks"):
        print_note("assumed", line)
    for line in prediction_notes(loaded, shapes, "--ranks", facts):
        print_note("note", line)
    console.print(render_rules(added))
    console.print(f"wrote [bold]{escape(str(target))}[/bold]: {added.shapes_label()}", highlight=False)
