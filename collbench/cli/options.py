"""What every command's options share: one list syntax, flags shown as flags, hints for mistyped options.

Short letters follow nccl-tests where it has one (``-b -e -f -n -w -c -d -o -r -T``) and mean one
thing in every command; ``-O/--output`` names the file a command writes. A letter that means
something else elsewhere gets a hint instead of a bare "no such option", and a flag given a value
(``--json true``) says it takes none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from collbench.errors import CommandLineError

Command = TyperCommand | TyperGroup

BOOL_WORDS = frozenset({"true", "false", "yes", "no", "on", "off"})
"""Values people give flags out of habit from other tools (``--json true``)."""

# A letter a command lacks, the long option it has instead, and what the letter means elsewhere.
_ELSEWHERE: dict[str, tuple[str, str, str]] = {
    "-o": ("--output", "write the file with -O/--output", "sweep's reduction, as in nccl-tests"),
    "-n": ("--ranks", "the number of ranks is --ranks", "sweep's iteration count, as in nccl-tests"),
    "-r": ("--ranks", "the number of ranks is --ranks", "sweep's root rank, as in nccl-tests"),
    "-c": ("--channels", "the number of rings is --channels", "sweep's result check, as in nccl-tests"),
}


def split_values(values: Sequence[str] | None) -> tuple[str, ...]:
    """``--op a,b --op c`` -> ``("a", "b", "c")``: every list option takes commas, repeats, or both."""
    return tuple(part.strip() for value in values or () for part in value.split(",") if part.strip())


def one_value(value: str | None, option: str, what: str) -> str | None:
    """The one name a single-valued list option holds; CommandLineError (saying so) for a comma list of several."""
    names = list(dict.fromkeys(split_values([value] if value is not None else None)))
    if len(names) > 1:
        raise CommandLineError(f"{option} takes one {what} here, got {len(names)}: {', '.join(names)}")
    return names[0] if names else None


class OptionHint(typer.BadParameter):
    """A usage error whose message is the whole story (no "Invalid value for" in front)."""

    def format_message(self) -> str:
        return self.message


def _flags_take_no_value(params: Sequence[object]) -> None:
    # Typer shows a flag as `--json <bool>`, which reads as if it wanted `--json true`.
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


_METAVAR_OF_TYPE = {"int": "N", "float": "X", "path": "PATH"}


def _values_named(params: Sequence[object]) -> None:
    # Typer shows an option's Python type where it names no metavar (`--nodes <int>`, `--ranks <int
    # range> [x>=1]`): a count reads as N, as nccl-tests' help writes it; an option that takes text or
    # a number of its own kind names it where it is declared (`metavar="SECONDS"`), and these stand in
    # only for one that does not.
    for param in params:
        if isinstance(param, TyperOption) and not param.is_flag and param.metavar is None:
            shown = _value_kind(param)
            if shown is not None:
                param.metavar = _METAVAR_OF_TYPE.get(shown, "TEXT")


# click's names of its parameter types (click.types: INT "integer", IntRange "integer range", ...).
_KIND_OF_CLICK_TYPE = {
    "integer": "int",
    "integer range": "int",
    "float": "float",
    "float range": "float",
    "path": "path",
}


def _value_kind(param: Any) -> str | None:
    """ "int", "float", "path" or another word for what an option takes; None for a choice (shown as its choices).

    Typer 0.29 describes an option's type itself (``type_descriptor``, ``bare_type()``); earlier ones,
    which pyproject admits (and the lent GPU machine's image holds), hand it to click (``param.type``,
    a click ``ParamType`` whose ``name`` says what it is).
    """
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        if descriptor.is_choice:
            return None
        # Typer's own label for the type: "int", "float", "str" (a range's too).
        return "path" if descriptor.is_path else str(param.bare_type())
    name = str(getattr(getattr(param, "type", None), "name", ""))
    return None if name == "choice" else _KIND_OF_CLICK_TYPE.get(name, name)


def _no_type(ctx: Any) -> None:
    return None


def _no_metavar(*args: Any, **kwargs: Any) -> str:
    return ""


def _arguments_by_name(params: Sequence[object]) -> None:
    # Typer shows an argument's name and then its Python type (`RESULTS... <list[Path]>`, `algo <str>`):
    # the name, upper case as usage lines write it, says what to give; the type column is left empty.
    # (The usage line adds `...` itself to an argument that takes several.)
    for param in params:
        if isinstance(param, TyperArgument):
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
            # An instance attribute: Typer builds the argument from the annotation, so no subclass of
            # it can be given; help asks this method for the type column (typer.rich_utils).
            setattr(param, "display_type_rich", _no_type)  # noqa: B010
            if param.nargs != 1:
                setattr(param, "get_usage_pieces", _several(param.get_usage_pieces))  # noqa: B010
            # Typer before 0.29 asks the argument's click type for that column instead
            # (typer.rich_utils._print_options_panel: `param.type.get_metavar(...)`, else `<{name}>`):
            # a copy of it, so that the type click shares with other parameters is left as it is.
            click_type = getattr(param, "type", None)
            if click_type is not None:
                shown_type = copy.copy(click_type)
                setattr(shown_type, "get_metavar", _no_metavar)  # noqa: B010
                setattr(param, "type", shown_type)  # noqa: B010


def _several(pieces: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
    """An argument's usage pieces ending in ``...``, which says it takes several: Typer 0.29 adds them
    to a named argument (``{RESULTS}...``), 0.27 only to one without a metavar (``{RESULTS}``)."""

    def usage(ctx: Any) -> list[str]:
        return [piece if piece.endswith("...") else f"{piece}..." for piece in pieces(ctx)]

    return usage


def _help_default_false(option: TyperOption | None) -> None:
    # Typer's help option defaults to None, not False: every group whose subcommand runs coerces that
    # None through its pydantic adapter, which imports pydantic (0.1 s of CPU) before anything runs.
    # A bool default is left as it is (typer.core._TyperParameter.process_value skips bools).
    if option is not None and option.default is None:
        option.default = False


def _shown_params(params: Sequence[object]) -> None:
    """A command's or a group's own parameters as its ``--help`` should show them."""
    _flags_take_no_value(params)
    _values_named(params)
    _arguments_by_name(params)


def _help_flag(option: TyperOption | None) -> TyperOption | None:
    """A command's or a group's ``--help`` option, shown as a flag and defaulting to False."""
    _flags_take_no_value([option])
    _help_default_false(option)
    return option


class CollbenchCommand(TyperCommand):
    """A command whose flags show no ``<bool>`` value in ``--help``: a flag takes none."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _shown_params(self.params)

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _help_flag(super().get_help_option(ctx))


class CollbenchGroup(TyperGroup):
    """A group of commands whose own flags (``--help``, ``--version``) show no ``<bool>`` either."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _shown_params(self.params)

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _help_flag(super().get_help_option(ctx))


def leaf_command(group: Command, args: list[str]) -> tuple[list[str], Command, list[str]]:
    """The command ``args`` name below ``group`` (through nested groups), its path, and its own args."""
    path: list[str] = []
    command = group
    rest = list(args)
    while rest:
        subs = getattr(command, "commands", None)
        if not isinstance(subs, dict) or rest[0] not in subs:
            break
        path.append(rest[0])
        command = subs[rest[0]]
        rest = rest[1:]
    return path, command, rest


def check_command_line(path: list[str], command: Command, args: list[str]) -> None:
    """Raise OptionHint for a flag given a value or a letter that means something else elsewhere."""
    by_name: dict[str, TyperOption] = {}
    for declared in command.params:
        if isinstance(declared, TyperOption):
            for spelling in (*declared.opts, *declared.secondary_opts):
                by_name[spelling] = declared
    where = " ".join(["collbench", *path])
    for i, token in enumerate(args):
        if token == "--":
            return
        name, eq, attached = token.partition("=")
        param = by_name.get(name)
        if param is not None and param.is_flag:
            given = attached if eq else (args[i + 1] if i + 1 < len(args) else "")
            if given.lower() in BOOL_WORDS:
                pair = f"{param.opts[0]} or {param.secondary_opts[0]}" if param.secondary_opts else param.opts[0]
                raise OptionHint(
                    f"{name} is a flag and takes no value ({given!r}): write {pair} alone"
                    + ("" if param.secondary_opts else ", or leave it out for false")
                )
        # fit, predict, layout, discover and compare print JSON with --json; sweep, whose table has an
        # nccl-tests layout beside it, with --format json. 'sweep --json' was told 'Possible options: --op'.
        if param is None and name == "--json" and "--format" in by_name:
            raise OptionHint(f"`{where}` has no option --json: its JSON output is --format json")
        letter = token[:2]
        if param is None and token.startswith("-") and not token.startswith("--") and letter not in by_name:
            moved = _ELSEWHERE.get(letter)
            if moved is not None and moved[0] in by_name:
                raise OptionHint(f"`{where}` has no option {letter}: {moved[1]} ({letter} is {moved[2]})")
