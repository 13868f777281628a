"""NVML behind one seam: a wrapper over a backend that is either the real library or a recording.

Every NVML call collbench makes goes through :class:`Nvml`. It initialises the library lazily on the
first call, turns bytes into str, turns "not supported" into None, and logs once per function the
driver lacks. The backend answers raw calls by name: :class:`PynvmlBackend` asks pynvml (and so the
driver), :class:`FakeNvmlBackend` replays a recording, and :class:`RecordingBackend` wraps another
backend and keeps every answer, so that a user can send their machine as a JSON file.

Device handles never leave this module: callers pass :class:`Gpu` (a device index), which the real
backend turns into an NVML handle and a recording writes as ``gpu3``.

Recording format (JSON)::

    {"format": "collbench-nvml-recording", "version": 1, "host": "dgx-h100-01", "description": "...",
     "calls": {"nvmlDeviceGetCount()": {"value": 8},
               "nvmlDeviceGetPciInfo(gpu0)": {"value": {"__struct__": {"busId": {"__bytes__": "00000000:18:00.0"}}}},
               "nvmlDeviceGetNvLinkState(gpu0, 18)": {"error": "INVALID_ARGUMENT"}}}

A value is JSON, ``{"__bytes__": str}`` for bytes, or ``{"__struct__": {field: value}}`` for an NVML
structure (read back as an object with those attributes). An error is the name of an ``NVML_ERROR_*``
constant without its prefix.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

from collbench.errors import InputFileError
from collbench.fileio import atomic_write_text, read_text_file
from collbench.filekinds import NVML_RECORDING_KIND, misfiled
from collbench.yamljson import parse_json

log = logging.getLogger(__name__)

RECORDING_FORMAT = "collbench-nvml-recording"
RECORDING_VERSION = 1

# NVML answers that mean "this GPU or driver cannot tell": the wrapper turns them into None.
_MISSING_VALUE_ERRORS = frozenset({"NOT_SUPPORTED", "NO_DATA", "NO_PERMISSION"})


@dataclass(frozen=True, slots=True)
class Gpu:
    """A device argument of an NVML call, by index (the handle stays inside the backend)."""

    index: int

    def __str__(self) -> str:
        return f"gpu{self.index}"


Arg = Gpu | int


class NvmlUnavailableError(Exception):
    """NVML cannot be used here (no library, no driver); ``reason`` is one line for the user."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class NvmlBackend(Protocol):
    """Answers raw NVML calls; raises ``pynvml.NVMLError`` subclasses like the library does."""

    def call(self, name: str, *args: Arg) -> Any: ...


def call_key(name: str, args: tuple[Arg, ...]) -> str:
    """The key of a call in a recording: ``nvmlDeviceGetNvLinkState(gpu0, 3)``."""
    return f"{name}({', '.join(str(a) for a in args)})"


def error_name(exc: BaseException) -> str:
    """The ``NVML_ERROR_*`` name (without prefix) of a pynvml error, ``UNKNOWN`` when unrecognised."""
    import pynvml

    code = getattr(exc, "value", None)
    for attr in dir(pynvml):
        if attr.startswith("NVML_ERROR_") and getattr(pynvml, attr) == code:
            return attr[len("NVML_ERROR_") :]
    return "UNKNOWN"


def make_error(name: str) -> Exception:
    """The pynvml exception for an error name, as the library would raise it."""
    import pynvml

    code = getattr(pynvml, f"NVML_ERROR_{name}", None)
    if not isinstance(code, int):
        code = pynvml.NVML_ERROR_UNKNOWN
    exc: Exception = pynvml.NVMLError(code)
    return exc


def nvml_error_type() -> type[Exception]:
    """pynvml's error class (NVMLError), for ``except`` clauses; imported only when asked."""
    import pynvml

    err: type[Exception] = pynvml.NVMLError
    return err


class PynvmlBackend:
    """The real NVML, through pynvml. Handles are looked up once per device index."""

    def __init__(self) -> None:
        import pynvml

        self._pynvml = pynvml
        self._handles: dict[int, Any] = {}

    def _arg(self, arg: Arg) -> Any:
        if isinstance(arg, Gpu):
            if arg.index not in self._handles:
                self._handles[arg.index] = self._pynvml.nvmlDeviceGetHandleByIndex(arg.index)
            return self._handles[arg.index]
        return arg

    def call(self, name: str, *args: Arg) -> Any:
        fn: Callable[..., Any] | None = getattr(self._pynvml, name, None)
        if fn is None:  # this pynvml is older than the function
            raise make_error("FUNCTION_NOT_FOUND")
        return fn(*(self._arg(a) for a in args))


def encode_value(value: Any) -> Any:
    """Turn an NVML answer (bytes, ctypes structures and arrays, numbers) into JSON."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return {"__bytes__": value.decode(errors="replace")}
    if isinstance(value, SimpleNamespace):  # a replayed structure
        return {"__struct__": {k: encode_value(v) for k, v in vars(value).items()}}
    fields = getattr(value, "_fields_", None)
    if fields is not None:
        return {"__struct__": {f[0]: encode_value(getattr(value, f[0])) for f in fields}}
    if isinstance(value, Mapping):
        return {str(k): encode_value(v) for k, v in value.items()}
    try:
        return [encode_value(v) for v in value]
    except TypeError:
        return str(value)


def decode_value(value: Any) -> Any:
    """The inverse of :func:`encode_value`: bytes stay bytes, structures become attribute objects."""
    if isinstance(value, dict):
        if set(value) == {"__bytes__"}:
            return str(value["__bytes__"]).encode()
        if set(value) == {"__struct__"}:
            fields = value["__struct__"]
            if not isinstance(fields, dict):
                raise ValueError(f"__struct__ is {fields!r}, not an object of fields")
            return SimpleNamespace(**{str(k): decode_value(v) for k, v in fields.items()})
        return {k: decode_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


@dataclass
class Recording:
    """Raw NVML answers of one machine, keyed by :func:`call_key`."""

    host: str
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": RECORDING_FORMAT,
            "version": RECORDING_VERSION,
            "host": self.host,
            "description": self.description,
            "calls": dict(sorted(self.calls.items())),
        }

    def save(self, path: Path) -> None:
        """Write the recording as JSON, atomically (a temporary file renamed into place)."""
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Recording:
        """Read a recording. Raises InputFileError when the file is missing or not a recording (naming what
        it is where it is another kind of file collbench knows: a topology, a profile, result rows)."""
        text = read_text_file(path, "an NVML recording from --record")
        try:
            return cls._parse(text, path)
        except InputFileError as exc:
            raise misfiled(path, text, NVML_RECORDING_KIND) or exc from None

    @classmethod
    def _parse(cls, text: str, path: Path) -> Recording:
        if not text.strip():
            raise InputFileError(str(path), "the file is empty (expected an NVML recording from --record)")
        data = parse_json(text, path)  # one reader of JSON: nesting 100,000 deep was a RecursionError
        if not isinstance(data, dict) or data.get("format") != RECORDING_FORMAT:
            raise InputFileError(str(path), f'not an NVML recording (expected "format": "{RECORDING_FORMAT}")')
        if data.get("version") != RECORDING_VERSION:
            raise InputFileError(
                str(path), f"recording version {data.get('version')!r} is not supported (expected {RECORDING_VERSION})"
            )
        calls = data.get("calls")
        if not isinstance(calls, dict):
            raise InputFileError(str(path), 'expected a "calls" object')
        for key, answer in calls.items():
            # Each answer as --record writes it: {"value": ...} or {"error": "NAME"}.
            if not isinstance(answer, dict) or not isinstance(answer.get("error", ""), str):
                raise InputFileError(
                    str(path), f'calls[{key!r}] is {answer!r}; expected {{"value": ...}} or {{"error": "NAME"}}'
                )
        return cls(host=str(data.get("host", "unknown")), calls=calls, description=str(data.get("description", "")))


class FakeNvmlBackend:
    """Replays a :class:`Recording`. A call it does not hold answers FUNCTION_NOT_FOUND."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def call(self, name: str, *args: Arg) -> Any:
        key = call_key(name, args)
        answer = self.recording.calls.get(key)
        if answer is None:
            if name == "nvmlInit":  # a recording without an init entry was made where init worked
                return None
            log.debug("NVML call %s is not in the recording", key)
            raise make_error("FUNCTION_NOT_FOUND")
        if "error" in answer:
            raise make_error(str(answer["error"]))
        return decode_value(answer.get("value"))


class RecordingBackend:
    """Passes calls to another backend and records every answer and error."""

    def __init__(self, inner: NvmlBackend, host: str) -> None:
        self.inner = inner
        self.recording = Recording(host=host)

    def call(self, name: str, *args: Arg) -> Any:
        key = call_key(name, args)
        try:
            value = self.inner.call(name, *args)
        except nvml_error_type() as exc:
            self.recording.calls[key] = {"error": error_name(exc)}
            raise
        self.recording.calls[key] = {"value": encode_value(value)}
        return value


def _decode(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace").rstrip("\x00")
    return value


class Nvml:
    """The one seam every NVML call goes through (lazy init, bytes decoded, NotSupported -> None).

    :meth:`call` raises :class:`NvmlUnavailableError` when the library cannot be initialised, and lets
    other NVML errors through unless they are named in ``none_on``.
    """

    def __init__(self, backend: NvmlBackend) -> None:
        self.backend = backend
        self._initialised = False
        self._logged_missing: set[str] = set()

    def init(self) -> None:
        """Initialise NVML once. Raises NvmlUnavailableError with a one-line reason."""
        if self._initialised:
            return
        try:
            self.backend.call("nvmlInit")
        except nvml_error_type() as exc:
            name = error_name(exc)
            if name == "LIBRARY_NOT_FOUND":
                raise NvmlUnavailableError("NVML library not found (libnvidia-ml.so.1)") from None
            if name == "DRIVER_NOT_LOADED":
                raise NvmlUnavailableError("NVIDIA driver not loaded (NVML cannot talk to a GPU)") from None
            raise NvmlUnavailableError(f"NVML failed to initialise ({name.lower().replace('_', ' ')})") from None
        self._initialised = True

    def call(self, name: str, *args: Arg, none_on: frozenset[str] = frozenset()) -> Any:
        """Call an NVML function; None when the GPU or driver cannot answer it.

        ``none_on`` names extra NVML errors (``"INVALID_ARGUMENT"``) that also mean "no value".
        Raises NvmlUnavailableError (init failed) or pynvml.NVMLError (anything else).
        """
        self.init()
        try:
            value = self.backend.call(name, *args)
        except nvml_error_type() as exc:
            err = error_name(exc)
            if err == "FUNCTION_NOT_FOUND":
                if name not in self._logged_missing:
                    self._logged_missing.add(name)
                    log.info("NVML function %s is not available here; its facts are left out", name)
                return None
            if err in _MISSING_VALUE_ERRORS or err in none_on:
                return None
            raise
        return _decode(value)

    def field(self, name: str, *args: Arg, attr: str) -> Any:
        """One attribute of a structure answer (decoded), or None."""
        value = self.call(name, *args)
        if value is None:
            return None
        return _decode(getattr(value, attr, None))

    def shutdown(self) -> None:
        """Release NVML if this wrapper initialised it."""
        if self._initialised:
            try:
                self.backend.call("nvmlShutdown")
            except nvml_error_type():
                log.debug("nvmlShutdown failed", exc_info=True)
            self._initialised = False
