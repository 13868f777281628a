"""What this Open MPI can be forced to run (its ``ompi_info``), as ``sweep --backend mpi`` and a tune ask it.

The checks of a sweep's options and the choice of algorithms per op are the Open MPI backend's
(``collbench.backends.mpi``); this module reads the installed Open MPI for it (through
``collbench.runtime.here``).
"""

from __future__ import annotations

from collbench.errors import ConfigError
from collbench.ompi.algorithms import OmpiAlgorithm, parse_ompi_info
from collbench.runtime.mpi.ompi_tools import find_tools, ompi_info_text


def installed_algorithms() -> dict[str, tuple[OmpiAlgorithm, ...]]:
    """What this Open MPI's coll/tuned can be forced to run, per collective (from its ompi_info)."""
    algorithms = parse_ompi_info(ompi_info_text(find_tools()))
    if not algorithms:
        raise ConfigError("ompi_info lists no coll/tuned algorithm: this Open MPI has no coll/tuned to force")
    return algorithms
