"""collbench's on/off environment variables, read one way: 1/0, on/off, yes/no, true/false, in any case.

``COLLBENCH_REALTIME`` (rank_priority.py), ``COLLBENCH_PIN_RANKS`` (affinity.py) and
``COLLBENCH_IDLE_POLL`` (idle_latency.py) change how a sweep measures. A value that is none of those
words is refused before any rank starts (:func:`check_switches`, from ``sweep.plan.validate``): read as
"unset", a typo would silently measure something else than asked.
"""

from __future__ import annotations

import os

from collbench.errors import ConfigError

ON = ("1", "on", "yes", "true")
OFF = ("0", "off", "no", "false")
SWITCHES = ("COLLBENCH_REALTIME", "COLLBENCH_PIN_RANKS", "COLLBENCH_IDLE_POLL")


def env_switch(name: str) -> bool | None:
    """True or False for a switch set to one of ON or OFF (any case, spaces around ignored); None
    when unset or empty. Raises ConfigError naming the variable for any other value."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    value = raw.strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    raise ConfigError(f"{name}={shown!r}: expected 1 or 0 (on/off, yes/no, true/false), or unset")


def check_switches() -> None:
    """Refuse, in one line, the first of collbench's switches that is set to something unreadable."""
    for name in SWITCHES:
        env_switch(name)
