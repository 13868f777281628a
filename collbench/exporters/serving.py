"""Which profiles an export takes: the one check every export makes of the profile's backend.

An export feeds one consumer family (``nccl``, ``ompi``, ``mpich``: :attr:`Backend.feeds`); a profile
measured over a backend that feeds that family chose among the consumer's own algorithms, and is
taken. Another profile chose among something else (collbench's algorithms, another library's): its
rules do not say what the consumer runs fastest, so it is refused in one line that says what it chose
among and how to measure the consumer itself, unless the user asks for it anyway where the export can
map it (``--from-other-backend``). The registry's :attr:`Export.serves` and every exporter ask here,
so the answer and its words are the same whichever export asks.
"""

from __future__ import annotations

from collbench.backends import BACKENDS, backend_named
from collbench.errors import UserError

FROM_OTHER_BACKEND_OPTION = "--from-other-backend"


def served_by(family: str) -> tuple[str, ...]:
    """The backends whose profiles an export of ``family`` takes without ``--from-other-backend``."""
    return tuple(b.name for b in BACKENDS if family in b.feeds)


def check_serves(family: str, backend: str, from_other_backend: bool | None) -> None:
    """UserError (one line) for a profile measured over ``backend`` that does not feed ``family``.

    ``from_other_backend`` True takes it anyway (the export maps collbench's algorithms onto the
    consumer's); None where the export has no such option, its file holding only the consumer's own
    algorithms.
    """
    if backend in served_by(family) or from_other_backend:
        return
    consumer = next(b for b in BACKENDS if family in b.feeds)
    measured = backend_named(backend)
    if measured is not None and not measured.runs_own_algorithms:
        won = f"which of {measured.own_choices} won"
    else:
        won = f"which of collbench's algorithms won over {backend}"
    where = " on the GPUs" if consumer.on_gpu else ""
    anyway = "" if from_other_backend is None else f", or pass {FROM_OTHER_BACKEND_OPTION} to export it anyway"
    raise UserError(
        f"this profile was measured over {backend}, not {consumer.library}: its rules say {won}, not which of "
        f"{consumer.own_choices} runs fastest; measure {consumer.library} itself with "
        f"`collbench tune --backend {consumer.name}`{where}{anyway}"
    )
