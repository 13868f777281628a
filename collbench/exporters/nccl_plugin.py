"""collbench's NCCL tuner plugin (``csrc/nccl_tuner_plugin.c`` and its parts): build it, and ask it what it picks.

``build_plugin`` compiles the plugin with the system C compiler into ``DIR/libnccl-tuner-collbench.so``
and writes the profile's tuner config beside it; a job then needs two environment lines
(:attr:`PluginBuild.env_lines`). ``ask`` runs ``csrc/nccl_tuner_driver.c``, which loads the built
library with dlopen and calls it as NCCL's ``ncclGetAlgoInfo`` does (cost table, ignored cells, the
ABI version chosen), so :func:`show` reports the plugin's own answers, not a re-derivation of them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.errors import UserError
from collbench.exporters.exported import Exported
from collbench.exporters.nccl_rules import nccl_selection, shape_label, shapes
from collbench.exporters.nccl_tuner import build_nccl_tuner
from collbench.fileio import atomic_write_text, check_writable, csrc_dir
from collbench.filekinds import replacing_refused
from collbench.nccl.algorithms import ALGORITHMS_BY_NUMBER, FUNC_OF_OP, PROTOCOLS
from collbench.profile.document import Profile
from collbench.schedules.ops import Op
from collbench.tuning.consumers.nccl import why_not

PLUGIN_SOURCES = ("nccl_tuner_plugin.c", "nccl_tuner_rules.c", "nccl_tuner_index.c")
"""The plugin's parts under ``csrc/`` (with ``nccl_tuner.h``): NCCL's entry points, the config file, the index."""
PLUGIN_FILE = "libnccl-tuner-collbench.so"
CONFIG_FILE = "nccl-tuner.conf"
ABI_VERSIONS: dict[int, str] = {6: "2.30", 5: "2.28-2.29", 4: "2.24-2.27", 3: "2.22-2.23", 2: "2.21", 1: "2.19-2.20"}
"""The ``ncclTunerPlugin_vN`` symbols the plugin exports and the NCCL versions that look each up first."""
IGNORE = -1.0
NUM_PROTOCOLS = len(PROTOCOLS)
TIMEOUT_S = 60.0


def c_compiler() -> list[str]:
    """The compiler's command words: ``$CC`` when set, else ``cc``, ``gcc`` or ``clang`` on PATH.

    ``$CC`` is split into shell words as make splits it (``CC="ccache gcc"``, ``CC="gcc -m64"``). A ``$CC``
    that names no program is refused, not passed over for ``cc``: the user asked for that compiler, and a
    plugin built by another one without a word is not what they asked for. Raises UserError (one line)
    for that, for a ``$CC`` a shell could not split, and when there is no compiler at all.
    """
    wanted = os.environ.get("CC", "")
    if wanted.strip():
        try:
            words = shlex.split(wanted)
        except ValueError as err:
            raise UserError(f"CC={wanted!r} is not shell words ({str(err).lower()})") from None
        found = shutil.which(words[0])
        if found is None:
            raise UserError(
                f"CC={wanted!r}: {words[0]!r} is not a program here (not on PATH, or not executable); "
                "set CC to your C compiler, or unset it to use cc, gcc or clang"
            )
        return [found, *words[1:]]
    for name in ("cc", "gcc", "clang"):
        if found := shutil.which(name):
            return [found]
    raise UserError("no C compiler found (looked for $CC, cc, gcc, clang): install one, e.g. `apt-get install gcc`")


def make_dir(path: Path) -> None:
    """Create the directory ``path`` (not its parents); one-line UserError where the path forbids it.

    Running as root, permission bits stop nothing, so what fails here is a path under a regular file, a
    name longer than the file system takes, or a read-only mount: each is the user's to change.
    """
    try:
        # The directory itself only: its parent must be there, as for every output collbench writes.
        path.mkdir(exist_ok=True)
    except FileNotFoundError:
        if path.parent.is_dir():
            # mkdir under /proc or /sys fails so, its parent there: "/proc does not exist" was false.
            raise UserError(
                f"{path}: {path.parent} refuses new directories (a kernel file system such as /proc or /sys); "
                "name another"
            ) from None
        raise UserError(f"{path}: the folder {path.parent} does not exist; create it first, or name another") from None
    except FileExistsError:
        raise UserError(f"{path}: exists and is not a directory; name a directory for the plugin") from None
    except OSError as exc:
        raise UserError(
            f"{path}: cannot make this directory ({exc.strerror or exc}); name another with --output"
        ) from None


def compile_c(sources: Path | Sequence[Path], output: Path, *, shared: bool, extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile C files (one, or the parts of one program) into ``output`` (replaced whole or not at all);
    UserError if the compiler fails.

    ``extra_flags`` go to the compiler as they are (tests build with ``-fsanitize=address``).
    """
    make_dir(output.parent)
    # Before the compiler runs: a folder that takes no new file would fail its link step, and the
    # message would blame the compiler ("ld returned 1 exit status") for the folder.
    check_writable(output)
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    flags = ["-shared", "-fPIC"] if shared else []
    # -pthread: NCCL calls the plugin from several threads (the v1 entry points take a lock).
    cmd = [*c_compiler(), "-O2", "-std=gnu11", "-Wall", "-Wextra", "-pthread", *flags, *extra_flags, "-o", str(tmp)]
    files = [sources] if isinstance(sources, Path) else list(sources)
    cmd += [str(f) for f in files]
    if not shared:
        cmd.append("-ldl")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"could not run the C compiler {cmd[0]}: {exc}") from exc
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        said = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
        # A compiler that fails without a word (CC=false, a wrapper whose tool is gone) still says how it ended.
        first = said or f"it ended with exit code {done.returncode} and printed nothing"
        raise UserError(f"{cmd[0]} failed to build {', '.join(f.name for f in files)}: {first}")
    try:
        os.replace(tmp, output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{output}: cannot write the built file ({exc.strerror or exc})") from None
    return output


@dataclass(frozen=True, slots=True)
class PluginBuild:
    plugin: Path
    config: Path
    exported: Exported

    @property
    def env_lines(self) -> tuple[str, str]:
        """What a job's environment needs, absolute paths (NCCL resolves them in every rank's directory)."""
        return (
            f"NCCL_TUNER_PLUGIN={self.plugin.resolve()}",
            f"NCCL_TUNER_CONFIG_FILE={self.config.resolve()}",
        )


def build_plugin(
    profile: Profile, out_dir: Path, *, from_other_backend: bool = False, overwrite: bool = False
) -> PluginBuild:
    """Write ``out_dir/nccl-tuner.conf`` from ``profile`` and compile ``out_dir/libnccl-tuner-collbench.so``.

    The config is made first, so a profile NCCL cannot follow fails (one line) before anything is built,
    as does one measured over a backend other than NCCL unless ``from_other_backend``. A build already
    in ``out_dir`` (either file) is refused unless ``overwrite``: a job may be using it.
    """
    refuse_replacing(out_dir, overwrite)
    exported = build_nccl_tuner(profile, from_other_backend=from_other_backend)
    make_dir(out_dir)
    plugin = compile_c(plugin_sources(), out_dir / PLUGIN_FILE, shared=True)
    config = out_dir / CONFIG_FILE
    atomic_write_text(config, exported.text)
    return PluginBuild(plugin, config, exported)


def refuse_replacing(out_dir: Path, overwrite: bool) -> None:
    """UserError naming the plugin or config already in ``out_dir``, unless ``overwrite``: nothing
    written before is replaced silently (as ``tune`` and ``sweep`` refuse files that hold results)."""
    held = [name for name in (PLUGIN_FILE, CONFIG_FILE) if os.path.lexists(out_dir / name)]
    if held and not overwrite:
        raise replacing_refused([f"{out_dir} holds a build already ({', '.join(held)})"], "-O DIR to build elsewhere")


def plugin_sources() -> list[Path]:
    """The plugin's C files, as shipped (``collbench/csrc``)."""
    return [csrc_dir() / name for name in PLUGIN_SOURCES]


def build_driver(out_dir: Path) -> Path:
    return compile_c(csrc_dir() / "nccl_tuner_driver.c", out_dir / "nccl_tuner_driver", shared=False)


@dataclass(frozen=True, slots=True)
class Query:
    """One ``getCollInfo`` call: a collective, its size, and the cost table NCCL hands over."""

    op: Op
    nbytes: int
    table: tuple[float, ...]
    """[algorithm][protocol] in NCCL's order, row after row; -1.0 where NCCL cannot run the pair."""
    pipe_ops: int = 1
    reg_buff: int = 0


@dataclass(frozen=True, slots=True)
class Answer:
    algo: int
    """The cell NCCL then picks (the cheapest >= 0): ``NCCL_ALGO_*``, -1 for none."""
    proto: int
    channels: int
    """What the plugin wrote to ``*nChannels`` (0: NCCL's own count)."""
    rc: int
    table: tuple[float, ...]
    """The cost table after the plugin."""


@dataclass(frozen=True, slots=True)
class Session:
    init_rc: int
    answers: tuple[Answer, ...]
    logs: tuple[tuple[int, str], ...]
    """(NCCL log level, message) of every logger call: 2 warning, 3 info."""
    final_rc: int


def query_line(q: Query) -> str:
    """``q`` as the driver reads it: ``COLL NBYTES NUMPIPEOPS REGBUFF NUMALGO COSTS...``."""
    num_algo = len(q.table) // NUM_PROTOCOLS
    costs = " ".join(f"{c:g}" for c in q.table)
    return f"{FUNC_OF_OP[q.op]} {q.nbytes} {q.pipe_ops} {q.reg_buff} {num_algo} {costs}"


def drive(
    plugin: Path,
    driver: Path,
    *,
    abi: int,
    ranks: int,
    nodes: int,
    lines: list[str],
    config: Path | None,
    timeout_s: float = TIMEOUT_S,
) -> str:
    """Run the driver on ``lines`` (queries and commands: ``csrc/nccl_tuner_driver.c``); its standard output.

    Raises RuntimeError with the driver's standard error when it fails (a sanitizer's report included).
    """
    env = {k: v for k, v in os.environ.items() if k != "NCCL_TUNER_CONFIG_FILE"}
    if config is not None:
        env["NCCL_TUNER_CONFIG_FILE"] = str(config)
    done = subprocess.run(
        [str(driver), str(plugin), str(abi), str(ranks), str(nodes)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the tuner driver failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def parse_session(stdout: str) -> Session:
    """The driver's output as a :class:`Session` (the first ``init`` and the last ``final`` line)."""
    init_rc = final_rc = -1
    answers: list[Answer] = []
    logs: list[tuple[int, str]] = []
    pick: list[int] | None = None
    for line in stdout.splitlines():
        head, _, rest = line.partition(" ")
        if head == "log":
            level, _, message = rest.partition(" ")
            logs.append((int(level), message))
        elif head == "init" and init_rc == -1:
            init_rc = int(rest)
        elif head == "final":
            final_rc = int(rest)
        elif head == "pick":
            pick = [int(x) for x in rest.split()]
        elif head == "table" and pick is not None:
            algo, proto, channels, rc = pick
            answers.append(Answer(algo, proto, channels, rc, tuple(float(x) for x in rest.split())))
    return Session(init_rc, tuple(answers), tuple(logs), final_rc)


def ask(
    plugin: Path, driver: Path, *, abi: int, ranks: int, nodes: int, queries: list[Query], config: Path | None
) -> Session:
    """Load ``plugin`` as NCCL does with ABI ``abi`` for a communicator of ``ranks`` on ``nodes``, ask every query."""
    lines = [query_line(q) for q in queries]
    return parse_session(drive(plugin, driver, abi=abi, ranks=ranks, nodes=nodes, lines=lines, config=config))


def nccl_like_table(op: Op, *, nodes: int, ranks: int, num_algo: int = len(ALGORITHMS_BY_NUMBER)) -> tuple[float, ...]:
    """A cost table as NCCL would hand it over where every hardware condition holds.

    Cells NCCL cannot run for ``op`` on this shape are -1.0 (ignored); the others hold 100 us, the same
    for all, so a lowered cell is the plugin's doing.
    """
    table = []
    for algo in ALGORITHMS_BY_NUMBER[:num_algo]:
        for proto in range(len(PROTOCOLS)):
            ok = why_not(op, algo, proto, nodes=nodes, ranks=ranks) is None
            table.append(100.0 if ok else IGNORE)
    return tuple(table)


@dataclass(frozen=True, slots=True)
class ShowRow:
    shape: str
    op: Op
    nbytes: int
    profile_algo: str
    plugin_pick: str
    channels: int


def boundaries(min_bytes: list[int]) -> list[int]:
    """Every rule boundary N as N-1, N, N+1 (and 0), ascending."""
    sizes = {0}
    for n in min_bytes:
        sizes.update(x for x in (n - 1, n, n + 1) if x >= 0)
    return sorted(sizes)


def show(
    profile: Profile, work_dir: Path | None = None, *, from_other_backend: bool = False, overwrite: bool = False
) -> list[ShowRow]:
    """What the built plugin picks per shape, collective and size boundary of ``profile`` (ABI v6), for
    the rules the NCCL exports follow (:func:`collbench.exporters.nccl_rules.nccl_selection`).
    Built in ``work_dir`` (refused where a build is, unless ``overwrite``), else in a temporary one."""
    with tempfile.TemporaryDirectory(prefix="collbench-tuner-") as tmp:
        where = work_dir or Path(tmp)
        built = build_plugin(profile, where, from_other_backend=from_other_backend, overwrite=overwrite)
        driver = build_driver(Path(tmp))
        rows: list[ShowRow] = []
        for shape in shapes(profile):
            followed = nccl_selection(shape, profile)
            ops = list(dict.fromkeys(Op.parse(r.op) for r in followed))
            for op in ops:
                rules = [r for r in followed if Op.parse(r.op) is op]
                sizes = boundaries([r.min_bytes for r in rules])
                table = nccl_like_table(op, nodes=shape.nodes, ranks=shape.world_size)
                queries = [Query(op, n, table) for n in sizes]
                session = ask(
                    built.plugin,
                    driver,
                    abi=6,
                    ranks=shape.world_size,
                    nodes=shape.nodes,
                    queries=queries,
                    config=built.config,
                )
                for n, answer in zip(sizes, session.answers, strict=True):
                    rule = next(r for r in rules if r.covers(n))
                    rows.append(ShowRow(shape_label(shape), op, n, rule.algo, _pick(answer), answer.channels))
        return rows


def _pick(answer: Answer) -> str:
    lowered = [i for i, c in enumerate(answer.table) if c == 0.0]
    if not lowered:
        return "NCCL's own choice"
    algo, proto = divmod(lowered[0], NUM_PROTOCOLS)
    return f"{ALGORITHMS_BY_NUMBER[algo].tuner}/{PROTOCOLS[proto].lower()}"
