"""The package's shape: layers that only import downwards, no import circles, files a reader can hold.

The layers, low to high (docs/architecture.md): shared basics; the topology; layouts; schedules (each
op's contract); the libraries' facts (NCCL's, Open MPI's, MPICH's: what each runs per op); the backends
(above the facts they use, below the result records, runtime, models, profile and tuning that all ask
them); result records; importers and the runtime (siblings that never import each other); models; the
profile; the report; tuning and the Python API; the exporters (a profile turned into what libraries read,
one registry); the CLI on top. A module may import
its own area and any lower layer, never a higher one, not even inside a function. ``ruff`` enforces the
same per area through the ``ruff.toml`` beside each area's package (banned-api); this test also covers
the single-module basics and checks those files agree with the layers here.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import tomllib

PACKAGE = Path(__file__).resolve().parents[2] / "collbench"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("text",),
    ("errors",),
    ("units", "pasted", "version"),
    ("fileio", "yamljson"),
    ("filekinds",),
    ("topology",),
    ("layouts",),
    ("schedules",),
    ("nccl", "ompi", "mpich"),
    ("backends",),
    ("results",),
    ("importers", "runtime"),
    ("models",),
    ("profile",),
    ("report",),
    ("tuning", "torch"),
    ("exporters",),
    ("cli",),
    ("__init__",),
)
"""Areas (a subpackage, or a module directly under collbench/) from the lowest layer to the highest.
``collbench/__init__.py`` is the public facade on top (it re-exports ``Profile`` lazily)."""
RANK = {area: i for i, areas in enumerate(LAYERS) for area in areas}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """(imported collbench module, whether only under TYPE_CHECKING), lazy imports in functions included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*kept, *([node.module] if node.module else [])])
            # `from pkg import submodule` imports the submodule.
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        only_typing = _type_checking_only(node, parents)
        found.extend((name, only_typing) for name in names if name == "collbench" or name.startswith("collbench."))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for target, only_typing in _imports(name, path):
            if target in modules and target != name and not only_typing:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    assert _cycles(_graph()) == []


def test_every_area_has_a_layer() -> None:
    areas = {_area(name) for name in _modules()}
    assert areas <= set(RANK), f"place these in LAYERS: {sorted(areas - set(RANK))}"


def test_layers_import_only_downwards() -> None:
    wrong = []
    for name, path in sorted(_modules().items()):
        area = _area(name)
        for target, _ in _imports(name, path):
            other = _area(target)
            if other != area and RANK[other] >= RANK[area]:
                wrong.append(f"{name} imports {target} ({area} is not above {other})")
    assert wrong == []


def test_ruff_bans_agree_with_the_layers() -> None:
    """Each area package's ruff.toml bans exactly the areas at or above its layer, and typer/rich."""
    for area, rank in RANK.items():
        folder = PACKAGE / area
        if area == "cli" or not folder.is_dir():
            continue
        config = tomllib.loads((folder / "ruff.toml").read_text(encoding="utf-8"))
        banned = set(config["lint"]["flake8-tidy-imports"]["banned-api"])
        above = {f"collbench.{a}" for a, r in RANK.items() if r >= rank and a not in (area, "__init__")}
        assert banned == above | {"typer", "rich"}, area


def test_no_module_past_the_length_a_reader_holds() -> None:
    lengths = {
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")
    }
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}


def _backend_name_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, code) of each comparison with a backend's name as a string literal (``backend == "nccl"``,
    ``name in ("gloo", "nccl")``)."""
    from collbench.backends import backend_names

    names = set(backend_names())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            literals = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(x, ast.Constant) and x.value in names for x in literals):
                found.append((node.lineno, ast.unparse(node)))
                break
    return found


def test_the_backend_rule_finds_a_comparison() -> None:
    code = 'if backend == "nccl" or name in ("gloo", "x"):\n    pass\nif kind == "ring":\n    pass\n'
    assert [line for line, _ in _backend_name_comparisons(ast.parse(code))] == [1, 1]


def test_no_backend_name_compared_outside_the_backends() -> None:
    """A backend is asked (``collbench.backends``), never recognised by its name elsewhere: adding one then
    touches only its own module, its export and their tests."""
    wrong = []
    for name, path in sorted(_modules().items()):
        if _area(name) == "backends":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wrong.extend(f"{name}:{line}: {code}" for line, code in _backend_name_comparisons(tree))
    assert wrong == []


MPI_LIBRARY_FACTS = ("ompi", "mpich")
"""The facts of an MPI library collbench measures only through its own harness (its algorithms, their names)."""
MPI_LIBRARY_READERS = ("backends", "runtime", "exporters")
"""Who reads them: the library's backend, the harness that forces them, the exports its library reads."""


def test_an_mpi_librarys_facts_are_read_by_its_backend_harness_and_exports_alone() -> None:
    """The result fields and the profile recognise a forced ``native:<algorithm>`` by asking the backends
    (``collbench.backends.forced_problem``), never a library's list: a new backend adds nothing there."""
    wrong = []
    for name, path in sorted(_modules().items()):
        area = _area(name)
        if area in MPI_LIBRARY_FACTS or area in MPI_LIBRARY_READERS:
            continue
        wrong.extend(
            f"{name} imports {target}" for target, _ in _imports(name, path) if _area(target) in MPI_LIBRARY_FACTS
        )
    assert wrong == []


def _backend_name_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, code) of each string literal that is a backend's name (``backend="mpi"``, ``{"nccl": ...}``,
    ``build(..., "mpich")``), compared or not: a name is the backend's to say (``Backend.name``). A shared
    library's name handed to ``ctypes.util.find_library`` (``"nccl"`` for libnccl) names a file, not a
    backend, and is not one."""
    from collbench.backends import backend_names

    names = set(backend_names())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and node.value in names):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Call) and ast.unparse(parent.func).endswith("find_library"):
            continue
        found.append((node.lineno, ast.unparse(parent if parent is not None else node)))
    return found


def test_the_backend_rule_finds_a_name_used_as_a_value() -> None:
    code = 'run(backend="mpi")\nx = {"nccl": 1}\nbuild(a, "mpich")\nfind_library("nccl")\ny = "ring"\n'
    assert sorted(line for line, _ in _backend_name_literals(ast.parse(code))) == [1, 2, 3]


def test_no_backend_name_used_outside_the_backends() -> None:
    """Nor is a backend's name used as a value outside ``collbench/backends/`` (a keyword, a key, a cache
    folder): the backend says it (``MPICH.name``), so nothing else spells it."""
    wrong = []
    for name, path in sorted(_modules().items()):
        if _area(name) == "backends":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wrong.extend(f"{name}:{line}: {code}" for line, code in _backend_name_literals(tree))
    assert wrong == []


OP_BRANCHES_ALLOWED: dict[str, tuple[int, str]] = {
    "models.hierarchy": (1, "predict --hierarchy prefers an all-reduce fit to separate the two link classes"),
}
"""The modules (under collbench) where ``op is Op.X`` may stand, how many such comparisons each may hold,
and why; everywhere else asks the op's contract (``schedules/contracts.py``) or spec (``schedules/ops.py``),
or looks the op up in its module's per-op table (each algorithm's builder, beside its costs; NCCL's cost
model's ``_COLLECTIVES``, where tuning.cc branches per collective)."""


def _op_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, code) of each comparison with an ``Op.X`` member (``op is Op.SCAN``, ``op in (Op.A, Op.B)``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            members = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(
                isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "Op" for x in members
            ):
                found.append((node.lineno, ast.unparse(node)))
                break
    return found


def test_the_op_rule_finds_a_branch() -> None:
    code = "if op is Op.SCAN or op in (Op.A, Op.B):\n    pass\nx = {Op.A: 1}\nif kind is Kind.A:\n    pass\n"
    assert [line for line, _ in _op_comparisons(ast.parse(code))] == [1, 1]


def test_no_op_branch_outside_its_contract() -> None:
    """An op is defined once (its spec and contract, or a module's per-op table); code that branches on
    which op it is, beyond the few sites allowed above, is a second definition of it. Counted per module:
    a new branch in an allowed module fails as one anywhere else does."""
    wrong = []
    for name, path in sorted(_modules().items()):
        inner = name.removeprefix("collbench.")
        sites = _op_comparisons(ast.parse(path.read_text(encoding="utf-8")))
        allowed = OP_BRANCHES_ALLOWED.get(inner, (0, ""))[0]
        if len(sites) > allowed:
            wrong.append(
                f"{name}: {len(sites)} op branches, {allowed} allowed: "
                + "; ".join(f"{line}: {code}" for line, code in sites)
            )
    assert wrong == []


def test_the_op_branches_allowed_are_modules_that_exist() -> None:
    modules = {name.removeprefix("collbench.") for name in _modules()}
    assert set(OP_BRANCHES_ALLOWED) <= modules


def _top_level_imports(module: str, path: Path) -> set[str]:
    """What ``module`` imports when it is imported: its module-level imports (not those inside functions,
    nor under TYPE_CHECKING), collbench's and others' alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*kept, *([node.module] if node.module else [])])
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return found


def test_the_cli_imports_no_torch_at_module_level() -> None:
    """``collbench --help`` and every option check run without torch (1.5 s of CPU): no command module
    (collbench/cli/*.py, each loaded for its --help), nor any module it imports when it is imported (its
    package's __init__ included), imports torch but inside the function that needs it.
    tests/cli/test_help_imports.py checks the same by running every --help."""
    modules = _modules()
    tops = {name: _top_level_imports(name, path) for name, path in modules.items()}

    def loaded_with(name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))} | {name}

    seen: set[str] = set()
    chain: dict[str, str] = {}
    todo = [name for name in modules if _area(name) == "cli" and name.count(".") <= 2]
    seen.update(todo)
    wrong = []
    while todo:
        name = todo.pop()
        for target in tops.get(name, set()):
            if target == "torch" or target.startswith("torch."):
                path, at = [name], name
                while at in chain:
                    at = chain[at]
                    path.append(at)
                wrong.append(" <- ".join(path))
                continue
            for candidate in loaded_with(target):
                if candidate in modules and candidate not in seen:
                    seen.add(candidate)
                    chain[candidate] = name
                    todo.append(candidate)
    assert sorted(wrong) == []
