"""The installed MPICH's own collective selection (its built-in CSEL tree), read from its library.

MPICH compiles its default selection into ``libmpich`` as a JSON string (``maint/tuning/coll/mpir/
generic.json`` of its source, v4.0.2), and a file named by ``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``
replaces that whole tree (``MPII_Coll_init``, ``src/mpi/coll/src/coll_impl.c``). So ``export mpich-json``
writes its choices into this tree, and every collective and range it does not choose keeps MPICH's own
selection; reading it from the library the job will load keeps the two the same version. The library
holds two more trees (ch4's compositions, POSIX shared memory's), told apart by their ``MPIDI_`` names.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

from collbench.errors import UserError

LIBRARY = "libmpich.so"
MPICC = "mpicc.mpich"


def library_path() -> Path:
    """Where ``mpicc.mpich`` links MPICH from (its ``-L`` folders); UserError when there is none."""
    mpicc = shutil.which(MPICC)
    if mpicc is None:
        raise UserError(
            f"no {MPICC} on PATH to find MPICH's own selection in: pass --base with MPICH's tuning JSON "
            "(maint/tuning/coll/mpir/generic.json of your MPICH's source)"
        )
    try:
        shown = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{mpicc} could not run: {exc}") from None
    folders = [word[2:] for word in shlex.split(shown) if word.startswith("-L")]
    for folder in folders:
        found = Path(folder) / LIBRARY
        if found.exists():
            return found.resolve()
    raise UserError(f"no {LIBRARY} in {MPICC}'s library folders ({', '.join(folders) or 'none'}): pass --base")


def selection_in(library: Path) -> str:
    """The MPIR-level selection tree compiled into ``library`` (JSON text); UserError when it has none."""
    try:
        data = library.read_bytes()
    except OSError as exc:
        raise UserError(f"{library}: cannot read ({exc.strerror or exc})") from None
    for chunk in data.split(b"\x00"):
        if b'"collective=' not in chunk or b"MPIDI_" in chunk:
            continue
        text = chunk.decode("utf-8", errors="replace").strip()
        try:
            tree = json.loads(text)
        except ValueError:
            continue
        if isinstance(tree, dict) and any(str(k).startswith("collective=") for k in tree):
            return text
    raise UserError(f"{library} holds no MPICH collective selection (not MPICH 3.4 or later?): pass --base")


def installed_selection() -> tuple[str, str]:
    """(the installed MPICH's selection tree as JSON text, the library it was read from)."""
    library = library_path()
    return selection_in(library), str(library)
