"""collbench's on/off environment variables: read in any case, and refused in one line when unreadable."""

from __future__ import annotations

import pytest

from collbench.errors import ConfigError
from collbench.runtime.host.switches import SWITCHES, check_switches, env_switch


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        (" ON ", True),
        ("Yes", True),
        ("TRUE", True),
        ("0", False),
        ("off", False),
        ("No", False),
        ("False", False),
        ("", None),
        ("  ", None),
    ],
)
def test_on_off_words_in_any_case(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool | None) -> None:
    monkeypatch.setenv("COLLBENCH_REALTIME", raw)
    assert env_switch("COLLBENCH_REALTIME") is expected


def test_unset_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLLBENCH_PIN_RANKS", raising=False)
    assert env_switch("COLLBENCH_PIN_RANKS") is None


@pytest.mark.parametrize("raw", ["2", "-1", "garbage\nx", "enable", "y" * 100])
def test_anything_else_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLLBENCH_PIN_RANKS", raw)
    with pytest.raises(ConfigError, match=r"^COLLBENCH_PIN_RANKS=.*expected 1 or 0") as caught:
        check_switches()
    assert len(str(caught.value)) < 200


def test_a_sweep_refuses_an_unreadable_switch_before_any_rank_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.runtime.sweep.plan import SweepConfig, validate

    monkeypatch.setenv("COLLBENCH_IDLE_POLL", "garbage")
    with pytest.raises(ConfigError, match="COLLBENCH_IDLE_POLL='garbage'"):
        validate(SweepConfig(world_size=2, backend="gloo", algos=("ring",)))
