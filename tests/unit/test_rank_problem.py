"""A rank's error line under a launcher says a peer is gone, or was silent past the timeout, in plain
words: what gloo and NCCL raise then (their texts as torch 2.13 raised them here, from gloo's
transport/tcp/pair.cc and unbound_buffer.cc, and NCCL's ncclGetErrorString) carried a source path, a
port and gloo's sign-off, and read as if the rank that saw it had failed on its own."""

from __future__ import annotations

import pytest

from collbench.runtime.launch.ranks import rank_problem

GLOO = "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        (
            GLOO + "pair.cc:553] Connection closed by peer [127.0.0.1]:19377. This is typically caused by a "
            "remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF! 🏖️",
            "Connection closed by peer [127.0.0.1]:19377",
        ),
        (
            GLOO + "pair.cc:537] Read error [127.0.0.1]:11686: Connection reset by peer. This is typically caused "
            "by a remote worker hanging or bugs in the application.",
            "Read error [127.0.0.1]:11686: Connection reset by peer",
        ),
        (GLOO + "pair.cc:592] Write error [10.0.0.2]:4242: Broken pipe", "Write error [10.0.0.2]:4242: Broken pipe"),
    ],
)
def test_a_peer_gone_is_said_so(text: str, seen: str) -> None:
    problem = rank_problem(RuntimeError(text), 30.0)
    assert problem.startswith(f"a peer rank is gone (gloo: {seen}): it died or failed")
    assert "GLHF" not in problem and "pair.cc" not in problem


def test_a_peer_silent_past_the_timeout_is_said_so() -> None:
    text = GLOO + "unbound_buffer.cc:81] Timed out waiting 30000ms for recv operation to complete"
    problem = rank_problem(RuntimeError(text), 30.0)
    assert problem.startswith("no peer rank sent or received within the 30 s timeout (one died, hung or was stopped")


def test_nccl_s_remote_exit_is_said_so() -> None:
    # torch's C10D_NCCL_CHECK format around ncclGetErrorString(ncclRemoteError) (NCCL src/init.cc); the
    # file, line and version are an example's, the middle is NCCL's string.
    text = "NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, "
    text += "NCCL version 2.21.5"
    assert rank_problem(RuntimeError(text), 30.0).startswith("a peer rank is gone (NCCL: remote process exited")


def test_anything_else_keeps_its_type_and_text() -> None:
    assert rank_problem(ValueError("bad buffer"), 30.0) == "ValueError: bad buffer"
