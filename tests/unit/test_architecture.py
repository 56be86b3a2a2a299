"""The shape of the code, read from the source with `ast` (no import, no Ray, well under a second).

- No import cycle between the modules of `jobs` and `service`, counting imports at module level
  and inside functions alike (`if TYPE_CHECKING:` blocks are not imports at run time); and none
  in the whole repository (jobs, service, bench, the docs' tooling, tests) at module level.
- No import of a project module inside a function in `jobs/`: such an import is how a cycle
  hides. In `service/` only the named ones below, each lazy for start-up time.
- No function over 80 lines and no file over 330 lines in `jobs/`, `service/`, `bench/` and
  `docs/tooling/`.
- No module under `tests/` imports a test module (`tests.<dir>.test_*`): what tests share
  lives in `tests/support`, a `conftest.py` or a helper module not named `test_*`.

`.importlinter` (run by `make lint`) checks which rooms may import which; this checks what
import-linter does not: cycles inside a room, hidden imports and sizes.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jobs", "service")
# Every folder of Python the repository imports as packages (docs/tooling: `docs.tooling`).
REPOSITORY = (*PACKAGES, "bench", "docs/tooling", "tests")
SIZED = (*PACKAGES, "bench", "docs/tooling")
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 330

# Function-level imports of project modules in service/, by (importer, imported): each one
# keeps a heavy import off a start-up path that does not need it.
LAZY_IMPORTS = {
    ("service.cli.main", "jobs.__main__"): (
        "`numtune run|tune|merge` runs a job in-process: torch, Ray and transformers load only"
        " for those commands, not for every CLI call"
    ),
    ("service.cli.main", "service.health.observability"): (
        "prometheus_client only for `numtune api --workers N`, which sets up its multiprocess"
        " folder"
    ),
    ("service.cli.ray_head", "service.backends.ray_backend"): (
        "`numtune up` alone needs it: the module brings the database layer and pyarrow"
    ),
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the project module imported
    line: int
    in_function: bool

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def module_files(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Every module of `packages` by its dotted name (a package by its own name)."""
    found = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    # Every rule below walks these: an empty walk (a moved root, a bad glob) would check nothing.
    assert len(found) >= 10 * len(packages), f"too few modules found under {packages}"
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> list[str]:
    """The project modules an import statement loads: `from pkg import name` counts as an
    import of the module pkg.name where there is one, else of pkg."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join([*base, *([node.module] if node.module else [])])
    else:
        origin = node.module or ""
    names = [f"{origin}.{alias.name}" for alias in node.names]
    found = [name for name in names if name in known]
    if len(found) < len(names) and origin in known:
        found.append(origin)
    return found


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"

    def walk(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                yield from (i for c in child.orelse for i in walk_one(c, in_function))
                continue
            yield from walk_one(child, in_function)

    def walk_one(node: ast.AST, in_function: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node, module, is_package, known):
                yield Import(module, target, node.lineno, in_function)
            return
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        yield from walk(node, inside)

    yield from walk(tree, False)


def project_imports(packages: tuple[str, ...] = PACKAGES) -> list[Import]:
    files = module_files(packages)
    known = set(files)
    return [i for module, path in files.items() for i in imports_of(module, path, known)]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None when it has none."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def test_no_import_cycle() -> None:
    edges: dict[str, set[str]] = {}
    for imp in project_imports():
        if imp.target != imp.source:
            edges.setdefault(imp.source, set()).add(imp.target)
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_in_the_repository() -> None:
    """bench/ and the docs' tooling import the product and tests/support; none of them, and
    nothing they import, may import them back at module level."""
    imports = project_imports(REPOSITORY)
    edges: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target != imp.source and not imp.in_function:
            edges.setdefault(imp.source, set()).add(imp.target)
    assert {i.source.split(".")[0] for i in imports} >= {"bench", "docs", "tests"}
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_project_import_inside_a_function() -> None:
    lazy = [i for i in project_imports() if i.in_function]
    hidden = [str(i) for i in lazy if (i.source, i.target) not in LAZY_IMPORTS]
    assert not hidden, f"imports of project modules inside functions: {hidden}"
    assert all(not i.source.startswith("jobs") for i in lazy)
    stale = set(LAZY_IMPORTS) - {(i.source, i.target) for i in lazy}
    assert not stale, f"LAZY_IMPORTS names imports that are gone: {sorted(stale)}"


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def test_no_long_function_or_file() -> None:
    long_functions, long_files = [], []
    for path in module_files(SIZED).values():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        if (lines := len(text.splitlines())) > MAX_FILE_LINES:
            long_files.append(f"{rel} ({lines} lines)")
        for fn in _functions(ast.parse(text)):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            name = f"{rel}:{fn.name}"
            if length > MAX_FUNCTION_LINES:
                long_functions.append(f"{name} ({length} lines)")
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"
    assert not long_files, f"files over {MAX_FILE_LINES} lines: {long_files}"


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def imports_of_test_modules(source: str, module: str) -> list[tuple[int, str]]:
    """(line, test module) for each import of a test module in `source`, the text of module
    `module` under tests/, at any depth (in functions too): `import tests.x.test_y`,
    `from tests.x.test_y import name`, `from tests.x import test_y`, relative ones alike."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[: -node.level] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            # `from package import name` imports the module package.name where there is one.
            named = [f"{origin}.{alias.name}" for alias in node.names]
            if origin.startswith("tests"):
                named = [m for m in named if _module_path(m).is_file()]
            targets = [origin, *named]
        else:
            continue
        for target in targets:
            if target.startswith("tests.") and target.rsplit(".", 1)[-1].startswith("test_"):
                found.append((node.lineno, target))
    return found


def _module_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def test_no_test_module_imports_another() -> None:
    imports = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for line, target in imports_of_test_modules(path.read_text(encoding="utf-8"), module):
            imports.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not imports, f"test modules imported (share through tests/support): {imports}"


def test_the_test_import_finder_finds_each_form() -> None:
    source = textwrap.dedent("""
        import tests.security.test_exposure
        from tests.unit.test_registry import finished_job
        from tests.unit import test_architecture, api_cases
        from .test_web import login
        from tests.support.api import ADMIN
        from tests.unit.api_cases import GOOD
        from tests.e2e.conftest import running_numtune
        from . import conftest
        def later():
            from tests.integration.test_train import tiny_spec
    """)
    assert imports_of_test_modules(source, "tests.unit.test_here") == [
        (2, "tests.security.test_exposure"),
        (3, "tests.unit.test_registry"),
        (4, "tests.unit.test_architecture"),
        (5, "tests.unit.test_web"),
        (11, "tests.integration.test_train"),
    ]
