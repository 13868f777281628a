"""What ranks tell their launcher through the TCP store: signed JSON, never pickle.

The store of a local run listens on 127.0.0.1 at a port the OS picks, but any local user can
connect to it, list its keys (``TCPStore.list_keys``) and write any of them: its contents are
untrusted input. So:

* values are JSON, decoded with :func:`json.loads` and checked field by field against the type
  annotations of the dataclasses the caller expects (:func:`decode`); nothing is ever unpickled;
* every value carries an HMAC-SHA256 over its key and its text, made with a random per-run token
  that only the launcher and the ranks it spawned know (it travels to them through the spawn pipe,
  not through the store, the environment or the command line). A value without a valid signature is
  rejected, so a writer that does not know the token can neither forge a result nor move one rank's
  value to another's key;
* collbench's keys live under a per-run prefix, so two runs sharing a store never read each other's.

What the token does not cover: torch's own rendezvous keys (``pg/...``, written and read by
``init_process_group``) and the gloo connections they set up are unauthenticated, as under
torchrun. A local user who can reach the store can disrupt a run (delete or overwrite keys, which
ends it with an error) and cannot make the launcher run code or accept a forged result; one who won
a race against the rendezvous could interpose between ranks, whose object collectives unpickle what
a peer sends (the README's "What the rank store exposes" says so to users).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import secrets
import types
import typing
from collections.abc import Sequence
from typing import Any

TOKEN_BYTES = 32
_PREFIX = "collbench"
MAX_VALUE_BYTES = 256 << 20
"""The largest value the launcher accepts from the store (a sweep's rows are far below this)."""
_DATACLASS_TAG = "__dataclass__"


class StoreValueError(ValueError):
    """A value in the store that is not a signed, well-formed JSON value of this run."""


def new_token() -> bytes:
    """A fresh random token for one run (256 bits from the OS's CSPRNG)."""
    return secrets.token_bytes(TOKEN_BYTES)


def run_prefix(token: bytes) -> str:
    """The key prefix of a run: derived from the token, but revealing nothing of it."""
    return f"{_PREFIX}/{hashlib.sha256(b'collbench-run-prefix' + token).hexdigest()[:16]}/"


class SignedStore:
    """A view of a torch ``Store`` whose values are JSON signed with the run's token."""

    def __init__(self, store: Any, token: bytes) -> None:
        self._store = store
        self._token = token
        self.prefix = run_prefix(token)

    def _sign(self, key: str, text: bytes) -> str:
        return hmac.new(self._token, key.encode() + b"\0" + text, hashlib.sha256).hexdigest()

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable, dataclasses allowed: see :func:`encode`) under ``key``."""
        text = json.dumps(encode(value), separators=(",", ":")).encode()
        full = self.prefix + key
        self._store.set(full, self._sign(full, text).encode() + b"." + text)

    def has(self, key: str) -> bool:
        return bool(self._store.check([self.prefix + key]))

    def get(self, key: str, types_allowed: Sequence[type] = ()) -> Any:
        """The value under ``key``, verified and decoded; raises StoreValueError for anything else.

        Call only for a key that :meth:`has` said is there (``Store.get`` blocks until it is).
        """
        full = self.prefix + key
        raw = bytes(self._store.get(full))
        if len(raw) > MAX_VALUE_BYTES:
            raise StoreValueError(f"{len(raw)} bytes, more than the {MAX_VALUE_BYTES} accepted")
        sig, dot, text = raw.partition(b".")
        if not dot or not hmac.compare_digest(sig, self._sign(full, text).encode()):
            raise StoreValueError("not signed with this run's token (written by something other than its ranks)")
        try:
            data = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreValueError(f"not JSON ({exc})") from None
        return decode(data, types_allowed)


def encode(value: Any) -> Any:
    """``value`` as plain JSON data: dataclasses become tagged objects, tuples become lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        fields = to_dict() if callable(to_dict) else {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {_DATACLASS_TAG: type(value).__name__, "fields": encode(fields)}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("only dicts with str keys travel through the store")
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"a {type(value).__name__} cannot travel through the store as JSON")


def decode(data: Any, types_allowed: Sequence[type] = ()) -> Any:
    """JSON data back into values: a tagged object becomes one of ``types_allowed`` (by class name).

    Each field is checked against the class's annotations (scalars, optionals, tuples and lists of
    them); the class's ``from_dict`` builds it when it has one. Raises StoreValueError otherwise.
    """
    if isinstance(data, list):
        return [decode(v, types_allowed) for v in data]
    if not isinstance(data, dict):
        return data
    if _DATACLASS_TAG not in data:
        return {k: decode(v, types_allowed) for k, v in data.items()}
    name, fields = data.get(_DATACLASS_TAG), data.get("fields")
    known = {cls.__name__: cls for cls in types_allowed}
    if name not in known:
        raise StoreValueError(f"a {name!r} object, which the launcher does not accept here")
    if not isinstance(fields, dict):
        raise StoreValueError(f"a {name} without its fields")
    cls = known[name]
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key, value in fields.items():
        if key not in names:
            raise StoreValueError(f"a {name} with an unknown field {key!r}")
        if not _fits(value, hints[key]):
            raise StoreValueError(f"a {name} whose {key} is {value!r}, not a {hints[key]}")
    try:
        from_dict = getattr(cls, "from_dict", None)
        return from_dict(fields) if callable(from_dict) else cls(**fields)
    except (TypeError, ValueError, KeyError) as exc:
        raise StoreValueError(f"a {name} that does not check: {exc}") from None


def _fits(value: Any, hint: Any) -> bool:
    """Whether JSON ``value`` can stand for a field annotated ``hint`` (unknown annotations: no)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (tuple, list):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return isinstance(value, list) and all(any(_fits(v, a) for a in args) or not args for v in value)
    if origin is dict:
        _, value_hint = typing.get_args(hint) or (str, Any)
        return isinstance(value, dict) and all(_fits(v, value_hint) for v in value.values())
    if isinstance(hint, type) and issubclass(hint, str):
        # str-valued enums travel as their value.
        return isinstance(value, str)
    return False
