"""A topology from the text of ``nvidia-smi topo -m``.

The text is a matrix: a header naming the columns (GPUs, NICs, then affinity columns), one row per
device. Real dumps vary: tabs or spaces, with or without the legends, NIC rows missing or cut short
(the GPU rows' NIC columns still say where each NIC is), older NIC names (``mlx5_0``) as column
names, affinity columns empty or ``N/A``, a ``GPU NUMA ID`` column, and an extra tab that newer
nvidia-smi prints before that column. Links are GPU-GPU (one per pair), GPU-NIC, and NIC-NIC where
NIC rows exist. The text gives the kind of each path but not its speed: bandwidths are the documented
defaults of :mod:`collbench.topology.model` (source ``default``).

Pastes from terminals, wikis and issue trackers add their own noise: a UTF-8 BOM, CRLF line ends,
ANSI colour codes, leading indentation, headers that start with tabs and go on with spaces, runs of
several tabs between cells, blank lines between rows, two cells with no space between them. Columns
are found by their words, never by counting tab characters alone. Where the text leaves a reading open
(an affinity value that is not a CPU list, fewer affinity values than columns, NV# read as NVSwitch,
glued cells split), the parser goes on and says what it assumed, one line each, in the ``notes`` list
the caller passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from collbench.errors import InputFileError
from collbench.fileio import check_number_lengths, read_text_file
from collbench.filekinds import NVIDIA_SMI_KIND, misfiled
from collbench.pasted import clean_pasted_text
from collbench.topology.cpu_list import parse_cpu_list
from collbench.topology.model import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_NVLINK_GBPS_PER_LINK,
    MAX_MACHINE_DEVICES,
    Device,
    DeviceKind,
    Link,
    LinkKind,
    Topology,
)

_LEVELS = {
    "PIX": LinkKind.PIX,
    "PXB": LinkKind.PXB,
    "PHB": LinkKind.PHB,
    "NODE": LinkKind.NODE,
    "SYS": LinkKind.SYS,
    # nvidia-smi before 2017 (driver 384) called the socket-crossing path SOC.
    "SOC": LinkKind.SYS,
}
_NV = re.compile(r"^NV(\d+)$")
_DEVICE_COLUMN = re.compile(r"^[A-Za-z][\w.-]*\d$")
_GPU = re.compile(r"^GPU(\d+)$")
_NIC = re.compile(r"^NIC(\d+)$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_WORD = re.compile(r"\S+")
# Header names a paste ran together: two or more GPU names, or GPU names and then a device name.
_GLUED = re.compile(r"((?:GPU\d+)+)([A-Za-z][\w.-]*\d)?")
# Two or more cells with no space between them ("NODENODE", "SYSSYS", "NODEPIX"): some pastes lose the
# padding between two cells, seen where a two-digit NIC column starts (NIC12, mlx5_12).
_CELL_CODE = r"(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)"
_GLUED_CELLS = re.compile(rf"{_CELL_CODE}{{2,}}")
_ONE_CELL = re.compile(_CELL_CODE)
# nvidia-smi aligns its columns on 8-character tab stops; expanding them lets positions compare.
_TAB_STOP = 8
_AFFINITY_VALUE = re.compile(r"^(?:[\d,-]+|N/A)$")
_KNOWN_TAIL = (("GPU", "NUMA", "ID"), ("CPU", "Affinity"), ("NUMA", "Affinity"))
_EXPECTED_CELLS = "X, NV#, PIX, PXB, PHB, NODE or SYS"
CPU_AFFINITY = "CPU Affinity"
NUMA_AFFINITY = "NUMA Affinity"
GPU_NUMA_ID = "GPU NUMA ID"
# The most NVLinks any GPU generation has (H100, B200: 18). NV# on every pair adding up to more than that
# cannot be direct cables: the links go to NVSwitches, and NV# is the GPU's link count to the fabric.
MAX_NVLINKS_PER_GPU = 18
_SMI_FAILURES = ("NVIDIA-SMI has failed", "No devices were found", "Failed to initialize NVML")
"""How nvidia-smi's own failures start (its driver unreachable, no GPU, a driver/library mismatch)."""


@dataclass(frozen=True, slots=True)
class _Cell:
    kind: LinkKind | None  # None: the diagonal
    count: int


@dataclass(frozen=True, slots=True)
class _Row:
    label: str
    line: int
    cells: tuple[_Cell, ...]
    raw: tuple[str, ...]
    tail: dict[str, str]


def _parse_cell(text: str, path: str, line: int, row: str, col: str) -> _Cell:
    if text == "X":
        return _Cell(None, 0)
    m = _NV.match(text)
    if m:
        return _Cell(LinkKind.NVLINK, int(m.group(1)))
    if text in _LEVELS:
        return _Cell(_LEVELS[text], 1)
    raise InputFileError(
        path, f"unknown cell {text!r} in row {row}, column {col} (expected {_EXPECTED_CELLS})", line=line
    )


def _split_tail_words(words: list[str]) -> list[str]:
    names: list[str] = []
    i = 0
    while i < len(words):
        for known in _KNOWN_TAIL:
            if tuple(words[i : i + len(known)]) == known:
                names.append(" ".join(known))
                i += len(known)
                break
        else:
            names.append(words[i])
            i += 1
    return names


def _unglue(word: str) -> list[str]:
    """The column names in a header word: ``GPU0GPU1GPU2mlx5_0`` is four, run together by a paste.

    Only GPU names can be told apart without a separator (``GPU`` starts each); a device name may end
    the run. Any other word is one name.
    """
    m = _GLUED.fullmatch(word)
    if m is None:
        return [word]
    names = re.findall(r"GPU\d+", m.group(1))
    if m.group(2):
        names.append(m.group(2))
    return names if len(names) > 1 else [word]


def _header_start(line: str) -> int | None:
    """Where the header's GPU0 starts in ``line``, or None when the line is not the header.

    Usually GPU0 is the first word; a paste can carry text before it on the same line (a shell prompt
    whose newline was lost, the opening of a quoted string), but then GPU0 must be followed by another
    column name, so prose that mentions GPU0 is not taken for a header. GPU0 may also open a run of
    names glued together (:func:`_unglue`): that run names the next columns itself.
    """
    words = [(m.group(), m.start()) for m in _WORD.finditer(line)]
    for k, (word, start) in enumerate(words):
        glued = _unglue(word)
        if len(glued) > 1 and glued[0] == "GPU0":
            return start
        if word != "GPU0":
            continue
        following = words[k + 1][0] if k + 1 < len(words) else None
        if k == 0:
            return start if following != "X" else None
        if following is not None and (_DEVICE_COLUMN.match(following) or following == "CPU"):
            return start
        return None
    return None


class _Parser:
    def __init__(self, text: str, path: str, notes: list[str]) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.notes = notes
        self.tabs = False
        self.columns: list[str] = []
        self.tail_names: list[str] = []
        self.tail_starts: list[int] = []

    def error(self, problem: str, line: int | None) -> InputFileError:
        return InputFileError(self.path, problem, line=line)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def header(self) -> int:
        for n, line in enumerate(self.lines):
            start = _header_start(line)
            if start is not None:
                if line[:start].strip():
                    self.note(f"{self.path}:{n + 1}: ignored {line[:start].strip()!r} before GPU0 on the header line")
                # Blank the prefix out rather than cut it, so columns keep their positions on screen.
                self._read_header(re.sub(r"\S", " ", line[:start]) + line[start:], n + 1)
                return n
        for n, line in enumerate(self.lines):
            if any(line.lstrip().startswith(words) for words in _SMI_FAILURES):
                # What nvidia-smi prints when it has no matrix to print (the driver down or mismatched, no
                # GPU): said for what it is, not as a matrix missing its header.
                said = line.strip().split(". ")[0][:100]
                raise self.error(
                    f"this is nvidia-smi's failure ({said!r}), not the matrix of `nvidia-smi topo -m`: run it"
                    " where the driver answers and lists the GPUs",
                    n + 1,
                )
        raise self.error("no header line starting with GPU0 (expected the text of `nvidia-smi topo -m`)", 1)

    def _read_header(self, line: str, lineno: int) -> None:
        words: list[tuple[str, int]] = []
        for m in _WORD.finditer(line.expandtabs(_TAB_STOP)):
            names = _unglue(m.group())
            if len(names) > 1:
                self.note(
                    f"{self.path}:{lineno}: read the header's {m.group()!r} as {', '.join(names)}"
                    " (column names run together)"
                )
            offset = 0
            for name in names:
                offset = m.group().index(name, offset)
                words.append((name, m.start() + offset))
                offset += len(name)
        i = 0
        while i < len(words) and _DEVICE_COLUMN.match(words[i][0]):
            i += 1
        self.columns = [w for w, _ in words[:i]]
        tail = words[i:]
        self.tail_names = _split_tail_words([w for w, _ in tail])
        starts: list[int] = []
        k = 0
        for name in self.tail_names:
            starts.append(tail[k][1])
            k += len(name.split())
        self.tail_starts = starts
        # Tab-separated rows keep empty affinity fields as empty fields, which says which column is
        # empty; that reading is only safe when the header's tab fields are exactly its columns.
        fields = [f.strip() for f in line.split("\t") if f.strip()]
        self.tabs = "\t" in line and fields == self.columns + self.tail_names
        if len(set(self.columns)) != len(self.columns):
            raise self.error("the header names a column twice", lineno)
        if len(self.columns) > MAX_MACHINE_DEVICES:
            raise self.error(
                f"the header names {len(self.columns)} GPUs and NICs; one machine's matrix holds at most"
                f" {MAX_MACHINE_DEVICES} (is this several machines' text joined?)",
                lineno,
            )

    def row(self, line: str, lineno: int) -> _Row:
        if self.tabs:
            row = self._tab_row(line, lineno)
            if row is not None:
                return row
        return self._word_row(line, lineno)

    def _tab_row(self, line: str, lineno: int) -> _Row | None:
        """The row read by its tab fields, or None when its tabs do not line up with the header."""
        ncols = len(self.columns)
        fields = line.split("\t")
        label = fields[0].strip()
        raw = [f.strip() for f in fields[1 : 1 + ncols]]
        if not label or len(raw) != ncols or not all(c and _looks_like_cell(c) for c in raw):
            return None
        tail = self._tab_tail([f.strip() for f in fields[1 + ncols :]], label, lineno)
        if tail is None:
            return None
        cells = tuple(_parse_cell(c, self.path, lineno, label, col) for c, col in zip(raw, self.columns, strict=True))
        return _Row(label, lineno, cells, tuple(raw), tail)

    def _word_row(self, line: str, lineno: int) -> _Row:
        ncols = len(self.columns)
        words = [(m.group(), m.start()) for m in _WORD.finditer(line.expandtabs(_TAB_STOP))]
        label = words[0][0]
        words = [words[0], *self._unglue(words[1:], ncols, label, lineno)]
        raw = [w for w, _ in words[1 : 1 + ncols]]
        if len(raw) != ncols or not all(_looks_like_cell(c) for c in raw):
            got = sum(1 for c in raw if _looks_like_cell(c))
            raise self.error(
                f"ragged row {label}: {got} matrix cells, expected {ncols} (one per header column)", lineno
            )
        cells = tuple(_parse_cell(c, self.path, lineno, label, col) for c, col in zip(raw, self.columns, strict=True))
        tail = self._space_tail(words[1 + ncols :], label, lineno)
        return _Row(label, lineno, cells, tuple(raw), tail)

    def _unglue(self, words: list[tuple[str, int]], ncols: int, label: str, lineno: int) -> list[tuple[str, int]]:
        """The row's words with glued cells split, where that and nothing else gives the row its width.

        A word of two or more whole cell codes cannot be one cell; splitting it is taken only when the row
        is short of cells as it stands and has exactly one per header column once split.
        """
        if all(_ONE_CELL.fullmatch(w) for w, _ in words[:ncols]) and len(words) >= ncols:
            return words
        out: list[tuple[str, int]] = []
        split: list[str] = []
        for word, start in words:
            if len(out) < ncols and _GLUED_CELLS.fullmatch(word):
                parts = _ONE_CELL.findall(word)
                split.append(f"{word!r} as {' '.join(parts)}")
                out.extend((part, start) for part in parts)
            else:
                out.append((word, start))
        cells = [w for w, _ in out[:ncols]]
        fits = len(cells) == ncols and all(_ONE_CELL.fullmatch(c) for c in cells)
        if not split or not fits or (len(out) > ncols and _ONE_CELL.fullmatch(out[ncols][0])):
            return words
        self.note(f"{self.path}:{lineno}: row {label}: read {', '.join(split)} (cells with no space between them)")
        return out

    def _tab_tail(self, fields: list[str], label: str, lineno: int) -> dict[str, str] | None:
        n = len(self.tail_names)
        # Newer nvidia-smi prints an empty field before "GPU NUMA ID": drop empty fields from the right
        # until the row fits the header.
        while len(fields) > n and "" in fields:
            del fields[len(fields) - 1 - fields[::-1].index("")]
        if len(fields) > n:
            return None
        return dict(zip(self.tail_names, fields, strict=False))

    def _space_tail(self, words: list[tuple[str, int]], label: str, lineno: int) -> dict[str, str]:
        n = len(self.tail_names)
        if len(words) > n:
            raise self.error(f"row {label} has {len(words)} affinity fields, the header names {n}", lineno)
        if len(words) == n:
            return {name: w for name, (w, _) in zip(self.tail_names, words, strict=True)}
        # Fewer values than columns (empty affinities): each value belongs to the column it starts nearest.
        out: dict[str, str] = {}
        first_free = 0
        for j, (w, start) in enumerate(words):
            # Leave a column for each value still to come, so every value gets one.
            last = n - (len(words) - j)
            best = min(range(first_free, last + 1), key=lambda k: abs(self.tail_starts[k] - start))
            out[self.tail_names[best]] = w
            first_free = best + 1
        if out and n > 1:
            placed = ", ".join(f"{v} as {k}" for k, v in out.items())
            self.note(f"{self.path}:{lineno}: row {label} has {len(words)} of {n} affinity values; read {placed}")
        return out

    def nic_legend(self, start: int) -> dict[str, str]:
        names: dict[str, str] = {}
        for line in self.lines[start:]:
            m = _NIC_LEGEND.match(line)
            if m:
                names[m.group(1)] = m.group(2)
        return names


def _looks_like_cell(text: str) -> bool:
    # An affinity value (CPU list, NUMA node, N/A) where a cell should be means the row is short.
    return not _AFFINITY_VALUE.match(text)


def parse_nvidia_smi_topo(text: str, path: str = "<stdin>", notes: list[str] | None = None) -> Topology:
    """Build a topology from the text of ``nvidia-smi topo -m``.

    ``path`` names the input in error messages. ``notes``, when given, receives one line for each
    assumption made where the text was ambiguous. Raises InputFileError (naming the file, the line and
    what was expected) for empty text, a missing header, ragged or non-square matrices, unknown cell
    codes, matrices that are not symmetric, and text from which no GPU can be read; one naming what the
    text is where it is another kind of file collbench knows (a topology YAML, a profile, an NCCL XML).
    """
    try:
        return _parse(text, path, notes)
    except InputFileError as exc:
        raise misfiled(path, text, NVIDIA_SMI_KIND) or exc from None


def _parse(text: str, path: str, notes: list[str] | None) -> Topology:
    text = clean_pasted_text(text)
    if not text.strip():
        raise InputFileError(path, "the input is empty (expected the text of `nvidia-smi topo -m`)")
    check_number_lengths(text, path)
    p = _Parser(text, path, notes if notes is not None else [])
    header_at = p.header()
    rows: dict[str, _Row] = {}
    cut_rows: dict[str, _Row] = {}
    end = len(p.lines)
    n = header_at + 1
    while n < len(p.lines):
        line = p.lines[n]
        if not line.strip():
            if rows and not _more_rows_follow(p, rows, n):
                end = n
                break
            n += 1
            continue
        label = line.split()[0]
        if label not in p.columns:
            if _DEVICE_COLUMN.match(label) and not label.endswith(":"):
                cut = _cut_nic_row(p, label, line, n + 1, cut_rows)
                if cut is None:
                    raise p.error(f"row {label} has no column in the header (the matrix is not square)", n + 1)
                cut_rows[label] = cut
                n += 1
                continue
            end = n
            break
        if label in rows:
            raise p.error(f"row {label} appears twice", n + 1)
        rows[label] = p.row(line, n + 1)
        n += 1
    topo = _build(p, rows, cut_rows, p.nic_legend(end), header_at + 1)
    if not topo.gpus:
        raise p.error("no GPU could be read from the text (expected rows GPU0, GPU1, ...)", header_at + 1)
    _check_one_paste(p, header_at, end)
    return topo


# What a paste carries around its matrix: a prompt or a title above; the legend (about 10 lines) and a
# NIC legend (one line a NIC) below. More than that is a file with other text in it (a README).
_PASTE_LINES_ABOVE = 5
_LEGEND_LINES = 12


def _check_one_paste(p: _Parser, header_at: int, end: int) -> None:
    """Refuse a file that holds other text and more than one line that starts like a matrix's header
    (a README with a topology among its examples): which table was meant is not clear. A file with
    other text and one such line is read, with a note naming the lines of the table read."""
    above = sum(1 for line in p.lines[:header_at] if line.strip())
    below = sum(1 for line in p.lines[end:] if line.strip())
    if above <= _PASTE_LINES_ABOVE and below <= _LEGEND_LINES + len(p.columns):
        return
    heads = [n + 1 for n, line in enumerate(p.lines) if _header_start(line) is not None]
    if len(heads) > 1:
        shown = ", ".join(map(str, heads[:4])) + (", ..." if len(heads) > 4 else "")
        raise p.error(
            f"holds {above + below} lines besides the matrix and {len(heads)} lines that start like a matrix's header"
            f" (lines {shown}): not clearly one paste of `nvidia-smi topo -m`; put the one to read in a file"
            " of its own",
            None,
        )
    p.note(
        f"{p.path}: the file holds {above + below} lines besides the matrix; read the `nvidia-smi topo -m` table at"
        f" lines {header_at + 1}-{end}"
    )


def _cut_nic_row(p: _Parser, label: str, line: str, lineno: int, seen: dict[str, _Row]) -> _Row | None:
    """A NIC row whose column the header lacks, or None when ``label``/``line`` is not one.

    A terminal narrower than the matrix cuts the header's NIC columns off while the NIC rows, being
    short, survive; their cells still say how each NIC reaches the header's devices.
    """
    if _GPU.match(label) or label in seen or not (_NIC.match(label) or not label.upper().startswith("GPU")):
        return None
    try:
        row = p._word_row(line, lineno)
    except InputFileError:
        return None
    if any(c.kind is None for c in row.cells) or row.tail:
        return None
    return row


def _more_rows_follow(p: _Parser, rows: dict[str, _Row], blank_at: int) -> bool:
    """Whether the next non-blank line is a row not yet read (some pastes put a blank line between rows)."""
    for line in p.lines[blank_at + 1 :]:
        if line.strip():
            label = line.split()[0]
            return label in p.columns and label not in rows
    return False


def _check_square_and_symmetric(p: _Parser, rows: dict[str, _Row], header_line: int) -> None:
    col_index = {c: i for i, c in enumerate(p.columns)}
    for col in p.columns:
        if _GPU.match(col) and col not in rows:
            raise p.error(f"column {col} has no row (the matrix is not square: every GPU needs a row)", header_line)
    for label, row in rows.items():
        i = col_index[label]
        if row.cells[i].kind is not None:
            raise p.error(f"row {label}, column {label} is {row.raw[i]!r}, expected X on the diagonal", row.line)
        for j, cell in enumerate(row.cells):
            if j != i and cell.kind is None:
                raise p.error(f"row {label}, column {p.columns[j]} is X off the diagonal", row.line)
    for a, b in combinations(rows.values(), 2):
        ab, ba = a.raw[col_index[b.label]], b.raw[col_index[a.label]]
        if ab != ba:
            raise p.error(
                f"the matrix is not symmetric: {b.label}->{a.label} is {ba} but {a.label}->{b.label} is {ab}",
                b.line,
            )


def _tail_facts(
    p: _Parser, tail: dict[str, str], label: str, line: int
) -> tuple[tuple[int, ...] | None, int | None, list[tuple[str, str]]]:
    extra: list[tuple[str, str]] = []
    cpus = _cpu_list(p, tail.get(CPU_AFFINITY), label, CPU_AFFINITY, line)
    nodes = _cpu_list(p, tail.get(NUMA_AFFINITY), label, NUMA_AFFINITY, line)
    numa = nodes[0] if nodes is not None and len(nodes) == 1 else None
    if nodes is not None:
        extra.append(("numa_affinity", tail[NUMA_AFFINITY]))
    gpu_numa = tail.get(GPU_NUMA_ID, "").strip()
    if gpu_numa and gpu_numa.upper() != "N/A":
        extra.append(("gpu_numa_id", gpu_numa))
    return cpus, numa, extra


def _cpu_list(p: _Parser, value: str | None, label: str, column: str, line: int) -> tuple[int, ...] | None:
    """A CPU or NUMA list, or None with a note when the paste garbled it (the links are still good)."""
    try:
        return parse_cpu_list(value)
    except ValueError as exc:
        p.note(f"{p.path}:{line}: {label}'s {column} {value!r} is not usable ({exc}); left unknown")
        return None


def _build(
    p: _Parser, rows: dict[str, _Row], cut_rows: dict[str, _Row], legend: dict[str, str], header_line: int
) -> Topology:
    _check_square_and_symmetric(p, rows, header_line)
    col_index = {c: i for i, c in enumerate(p.columns)}
    ids: dict[str, str] = {}
    devices: list[Device] = []
    nic_count = 0
    for col in p.columns:
        gpu, nic = _GPU.match(col), _NIC.match(col)
        row = rows.get(col)
        cpus, numa, extra = _tail_facts(p, row.tail, col, row.line) if row else (None, None, [])
        if gpu:
            ids[col] = col
            devices.append(
                Device(col, DeviceKind.GPU, int(gpu.group(1)), cpus=cpus, numa_node=numa, extra=tuple(extra))
            )
            continue
        # A NIC: NIC3 named by the NIC legend, or an older dump's column named after the port (mlx5_0).
        index = int(nic.group(1)) if nic else nic_count
        nic_count += 1
        ids[col] = f"NIC{index}"
        name = legend.get(col) if nic else col
        devices.append(
            Device(f"NIC{index}", DeviceKind.NIC, index, name=name, cpus=cpus, numa_node=numa, extra=tuple(extra))
        )
    gpu_cols = [c for c in p.columns if _GPU.match(c)]
    nv_counts = {rows[a].cells[col_index[b]].count for a, b in combinations(gpu_cols, 2)}
    all_nv = all(rows[a].cells[col_index[b]].kind == LinkKind.NVLINK for a, b in combinations(gpu_cols, 2))
    switched = (
        len(gpu_cols) > 2
        and all_nv
        and len(nv_counts) == 1
        and max(nv_counts) * (len(gpu_cols) - 1) > MAX_NVLINKS_PER_GPU
    )
    if switched:
        p.note(
            f"{p.path}: NV{max(nv_counts)} between every pair of {len(gpu_cols)} GPUs is more links than a GPU"
            f" has ({MAX_NVLINKS_PER_GPU}): read as NVSwitch, NV{max(nv_counts)} per GPU to the fabric"
        )
    links: list[Link] = []
    for a, b in combinations(p.columns, 2):
        row = rows.get(a) or rows.get(b)
        if row is None:  # two NICs, both rows missing
            continue
        cell = row.cells[col_index[b if row.label == a else a]]
        assert cell.kind is not None
        kind = LinkKind.NVSWITCH if cell.kind == LinkKind.NVLINK and switched else cell.kind
        bw = DEFAULT_NVLINK_GBPS_PER_LINK * cell.count if kind.is_nvlink else DEFAULT_BANDWIDTH_GBPS[kind]
        links.append(Link(ids[a], ids[b], kind, count=cell.count, bandwidth_gbps=bw, source="default"))
    if cut_rows:
        p.note(
            f"{p.path}: rows {', '.join(cut_rows)} have no column in the header (a paste cut at the right?);"
            " read their links to the header's devices, none between them"
        )
    for label, row in cut_rows.items():
        nic = _NIC.match(label)
        index = int(nic.group(1)) if nic else nic_count
        nic_count += 1
        device_id = f"NIC{index}"
        if device_id in ids.values():
            raise p.error(f"row {label} names {device_id}, which the header has already", row.line)
        devices.append(Device(device_id, DeviceKind.NIC, index, name=legend.get(label) if nic else label))
        for col, cell in zip(p.columns, row.cells, strict=True):
            assert cell.kind is not None
            bw = DEFAULT_NVLINK_GBPS_PER_LINK * cell.count if cell.kind.is_nvlink else DEFAULT_BANDWIDTH_GBPS[cell.kind]
            links.append(Link(ids[col], device_id, cell.kind, count=cell.count, bandwidth_gbps=bw, source="default"))
    return Topology(
        host="unknown",
        devices=tuple(devices),
        links=tuple(links),
        source="nvidia-smi",
        note=f"nvidia-smi topo -m text from {p.path}; bandwidths are documented defaults per kind",
    )


def read_nvidia_smi_topo(path: Path, notes: list[str] | None = None) -> Topology:
    """Read a file holding the text of ``nvidia-smi topo -m``. Raises InputFileError (see the parser)."""
    text = read_text_file(path, "the text of `nvidia-smi topo -m`")
    return parse_nvidia_smi_topo(text, str(path), notes)
