"""Open MPI's part of the MPI harness (``harness.py`` is what it shares with MPICH): where its tools are,
what its ``ompi_info`` says coll/tuned can be forced to run, the harness built with its ``mpicc``, and the
``mpirun`` line and environment of its one job per sweep (every forced algorithm on a communicator of its
own, set through MPI_T: ``csrc/mpi_harness.c``).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from collbench.backends.mpi import MPI
from collbench.errors import BackendUnavailableError, CommandLineError, ConfigError
from collbench.runtime.mpi.harness import build_with

MPIRUN_ARGS_ENV = "COLLBENCH_MPIRUN_ARGS"
"""Extra ``mpirun`` arguments, split as a shell would (``--hostfile hosts --mca btl tcp,self``)."""


@dataclass(frozen=True, slots=True)
class OpenMpiTools:
    """Where Open MPI's programs are."""

    mpirun: str
    mpicc: str
    ompi_info: str


def find_tools() -> OpenMpiTools:
    """mpirun, mpicc and ompi_info on PATH; BackendUnavailableError (one line) naming what is missing."""
    found = {name: shutil.which(name) for name in ("mpirun", "mpicc", "ompi_info")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise BackendUnavailableError(
            f"--backend mpi needs Open MPI's {', '.join(missing)} on PATH: install Open MPI "
            "(Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev)"
        )
    return OpenMpiTools(str(found["mpirun"]), str(found["mpicc"]), str(found["ompi_info"]))


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailableError(f"{cmd[0]} could not run: {exc}") from None
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise BackendUnavailableError(f"{' '.join(cmd[:2])} failed: {first[0] if first else done.returncode}")
    return done.stdout


@functools.cache
def ompi_info_text(tools: OpenMpiTools) -> str:
    """coll/tuned's parameters as ``ompi_info --parsable`` prints them (the algorithms per collective).

    Read once per process: a tune's rounds each start a sweep, and the installed Open MPI does not change.
    """
    return _run([tools.ompi_info, "--param", "coll", "tuned", "--level", "9", "--parsable"])


def build_harness(tools: OpenMpiTools, note: Callable[[str], None]) -> Path:
    """The built harness, from the cache when this source, mpicc and Open MPI built it before.

    Raises UserError (one line) when mpicc fails.
    """
    # mpicc's own command line names the MPI it wraps (include and library paths): a new Open MPI
    # gets a new build.
    wrapped = _run([tools.mpicc, "--showme"]) + _run([tools.mpirun, "--version"]).splitlines()[0]
    return build_with(tools.mpicc, wrapped, "ompi", MPI.library, note)


def mpirun_command(
    tools: OpenMpiTools, harness: Path, world_size: int, args: list[str], extra: list[str] | None = None
) -> list[str]:
    """The ``mpirun`` line: coll/tuned's dynamic rules on (read once, at MPI_Init), the harness and its arguments."""
    cmd = [tools.mpirun, "-np", str(world_size)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")  # Open MPI refuses root without it; containers run as root
    if world_size > (os.cpu_count() or 1):
        # Open MPI refuses more ranks than cores unless told; it then makes idle ranks yield.
        cmd.append("--oversubscribe")
    cmd += ["--mca", "coll_tuned_use_dynamic_rules", "1"]
    cmd += extra if extra is not None else extra_mpirun_args()
    return [*cmd, str(harness), *args]


def extra_mpirun_args() -> list[str]:
    """The words of ``COLLBENCH_MPIRUN_ARGS``, split as a POSIX shell would.

    Raises ConfigError naming the variable when a shell could not split it either (an open quote, a
    trailing backslash), so the user learns which setting to fix rather than meeting shlex's message.
    """
    text = os.environ.get(MPIRUN_ARGS_ENV, "")
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise ConfigError(f"{MPIRUN_ARGS_ENV}={text!r} is not shell words ({str(err).lower()})") from None
    for word in words:
        # mpirun takes the last count it is given: one here would start another world than --ranks planned,
        # and the job then fails on a rank count its plan never had (or on slots), in mpirun's words.
        if word.partition("=")[0] in _RANK_COUNT_FLAGS:
            raise ConfigError(
                f"{MPIRUN_ARGS_ENV}={text!r} sets the number of ranks ({word}); collbench gives mpirun "
                "-np from --ranks: leave it out there and pass --ranks N"
            )
    return words


_RANK_COUNT_FLAGS = frozenset({"-np", "--np", "-n", "--n", "-c"})
"""mpirun's spellings of the number of processes (Open MPI 4's orterun, 5's prterun)."""


def ompi_environment() -> dict[str, str]:
    """This process's environment for the job, less the rules file a user may have set: rules from a file
    would replace Open MPI's fixed decisions in the ``native`` rows."""
    env = dict(os.environ)
    env.pop("OMPI_MCA_coll_tuned_dynamic_rules_filename", None)
    env.pop("OMPI_MCA_coll_tuned_use_dynamic_rules", None)
    return env


def check_world_size(world_size: int | None) -> int:
    """The ranks to start: ``--ranks`` (collbench starts mpirun itself, so it cannot run under one)."""
    if world_size is None:
        # No --ranks (or a launcher's job, whose ranks leave it out): alike on every rank of one.
        raise CommandLineError(
            "--backend mpi starts mpirun itself: run the command (sweep, tune) with --backend mpi --ranks N "
            "outside any launcher"
        )
    return world_size
