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
* collbench's keys live under a per-run prefix, so two runs sharing a store never read each other's;
* what the launcher reads is bounded before it is read. A key's value can be grown without bound
  by anyone (``Store.append``, 8 MiB at a time), and ``Store.get`` returns all of it: 800 MB
  values made the launcher grow to 6 GB. So values travel through the store's queues instead
  (``queue_push``/``queue_pop``), cut into signed items of at most :data:`ITEM_BYTES`: the store's
  server refuses any single message past 8 MiB, so one pop returns at most that much, and an item
  is checked (its length, then its signature) before anything of it is decoded. A value is at most
  :data:`MAX_VALUE_BYTES` however many items arrive.

What this does not cover: the store's server runs inside the launcher, and keeps whatever a
local client writes to any key (torch offers no limit), so a client can still grow the launcher's
memory by what it writes; it can no longer make the launcher read, copy or decode any of it.

What the token does not cover: torch's own rendezvous keys (``pg/...``, written and read by
``init_process_group``) and the gloo connections they set up are unauthenticated, as under
torchrun. A local user who can reach the store can disrupt a run (delete or overwrite keys, which
ends it with an error) and cannot make the launcher run code or accept a forged result; one who won
a race against the rendezvous could interpose between ranks, whose object collectives unpickle what
a peer sends (docs/clusters.md, "What the rank store exposes", says so to users).
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
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

TOKEN_BYTES = 32
_PREFIX = "collbench"
MAX_VALUE_BYTES = 256 << 20
"""The largest value the launcher accepts from the store (a sweep's rows are far below this)."""
ITEM_BYTES = 1 << 20
"""The most JSON text one queued item carries; a longer value is cut into several items."""
_SIG_HEX = 64
_HEADER_MAX = 64
MAX_ITEM_BYTES = _SIG_HEX + 1 + _HEADER_MAX + 1 + ITEM_BYTES
"""The longest item a rank of this run writes: anything longer was written by someone else."""
_DATACLASS_TAG = "__dataclass__"


class StoreValueError(ValueError):
    """A value in the store that is not a signed, well-formed JSON value of this run."""


def new_token() -> bytes:
    """A fresh random token for one run (256 bits from the OS's CSPRNG)."""
    return secrets.token_bytes(TOKEN_BYTES)


def run_prefix(token: bytes) -> str:
    """The key prefix of a run: derived from the token, but revealing nothing of it."""
    return f"{_PREFIX}/{hashlib.sha256(b'collbench-run-prefix' + token).hexdigest()[:16]}/"


@dataclass(slots=True)
class _Pending:
    """Items of one value read so far, waiting for the rest (a rank may still be writing them)."""

    serial: str
    count: int
    parts: list[bytes] = field(default_factory=list)
    size_bytes: int = 0


class SignedStore:
    """A view of a torch ``Store`` whose values are JSON signed with the run's token.

    Each key is a queue of values: :meth:`put` appends one, :meth:`take` removes and returns those
    written since the last take, in order.
    """

    def __init__(self, store: dist.Store, token: bytes) -> None:
        self._store = store
        self._token = token
        self.prefix = run_prefix(token)
        self._serials = 0
        self._pending: dict[str, _Pending] = {}
        self._latest: dict[str, Any] = {}

    def _sign(self, key: str, header: bytes, text: bytes) -> bytes:
        message = key.encode() + b"\0" + header + b"\0" + text
        return hmac.new(self._token, message, hashlib.sha256).hexdigest().encode()

    def put(self, key: str, value: Any) -> None:
        """Append ``value`` (JSON-serialisable, dataclasses allowed: see :func:`encode`) to ``key``."""
        text = json.dumps(encode(value), separators=(",", ":")).encode()
        if len(text) > MAX_VALUE_BYTES:
            raise ValueError(f"a value of {len(text)} bytes is more than the {MAX_VALUE_BYTES} the store carries")
        full = self.prefix + key
        self._serials += 1
        # Distinct per put of this process; the rank's key already names the writer.
        serial = f"{self._serials:x}"
        count = max(1, -(-len(text) // ITEM_BYTES))
        for index in range(count):
            part = text[index * ITEM_BYTES : (index + 1) * ITEM_BYTES]
            header = f"{serial}:{index}:{count}".encode()
            self._store.queue_push(full, self._sign(full, header, part) + b"." + header + b"." + part)

    def has(self, key: str) -> bool:
        """Whether a value (or part of one) was written to ``key`` since the last :meth:`take`."""
        return self.prefix + key in self._pending or self._store.queue_len(self.prefix + key) > 0

    def take(self, key: str, types_allowed: Sequence[type] = ()) -> list[Any]:
        """The values written to ``key`` since the last take, verified and decoded, in order.

        A value whose items are not all there yet is kept for the next take. Raises
        StoreValueError for an item that is too long, not signed by this run for this key, out of
        order or not JSON, and for a value longer than :data:`MAX_VALUE_BYTES`.
        """
        full = self.prefix + key
        values: list[Any] = []
        while True:
            try:
                item = bytes(self._store.queue_pop(full, False))
            except dist.QueueEmptyError:
                break
            text = self._accept(full, item)
            if text is not None:
                values.append(_decoded(text, types_allowed))
        if values:
            self._latest[key] = values[-1]
        return values

    def latest(self, key: str, types_allowed: Sequence[type] = ()) -> Any:
        """The last value written to ``key`` (taking any new ones); None if none ever was."""
        self.take(key, types_allowed)
        return self._latest.get(key)

    def forget(self, key: str) -> None:
        """Drop the last value :meth:`latest` kept for ``key``: a rank's next value is read afresh."""
        self._latest.pop(key, None)

    def _accept(self, full: str, item: bytes) -> bytes | None:
        """One item checked and added to its value: the value's whole text once its last item came."""
        if len(item) > MAX_ITEM_BYTES:
            raise StoreValueError(f"an item of {len(item)} bytes, more than the {MAX_ITEM_BYTES} a rank writes")
        sig, _, rest = item.partition(b".")
        header, dot, part = rest.partition(b".")
        if not dot or len(header) > _HEADER_MAX or not hmac.compare_digest(sig, self._sign(full, header, part)):
            raise StoreValueError("not signed with this run's token (written by something other than its ranks)")
        serial, index, count = _header(header)
        pending = self._pending.get(full)
        if pending is None and index == 0:
            pending = self._pending[full] = _Pending(serial, count)
        if pending is None or (pending.serial, pending.count, len(pending.parts)) != (serial, count, index):
            raise StoreValueError(f"item {index} of {count} of value {serial} arrived out of order")
        pending.parts.append(part)
        pending.size_bytes += len(part)
        if pending.size_bytes > MAX_VALUE_BYTES:
            raise StoreValueError(f"a value of more than {MAX_VALUE_BYTES} bytes")
        if len(pending.parts) < count:
            return None
        del self._pending[full]
        return b"".join(pending.parts)


def _header(header: bytes) -> tuple[str, int, int]:
    """``serial:index:count`` of a signed item (signed, so well-formed unless a rank is broken)."""
    fields = header.split(b":")
    if len(fields) != 3 or not all(f.isdigit() and len(f) <= 9 for f in fields[1:]):
        raise StoreValueError(f"an item whose header {header[:_HEADER_MAX]!r} is not serial:index:count")
    index, count = int(fields[1]), int(fields[2])
    if not 0 <= index < count:
        raise StoreValueError(f"an item numbered {index} of {count}")
    return fields[0].decode("ascii", "replace"), index, count


def _decoded(text: bytes, types_allowed: Sequence[type]) -> Any:
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
