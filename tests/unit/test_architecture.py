"""The import arrows of docs/architecture.md, read from the source with ``ast``.

``webui -> python/api -> python/server -> python/durable -> agent.py -> python/tools,
python/helpers`` and ``python/durable -> durability``: no import cycle among the project's
modules; durability/ imports only itself, the standard library and its declared
dependencies; agent.py imports none of python/durable, python/server, python/api;
python/helpers and python/tools import none of them either; python/durable imports
neither python/server nor python/api; python/server never imports python/api (it finds
the endpoints by name). The HTTP libraries (starlette, uvicorn, python-multipart) are
imported only by python/server, python/api and run_ui.py, so nothing below the edge can
raise or catch an HTTP error. Imports inside ``if TYPE_CHECKING:`` are ignored (they never
run); imports inside functions count. Inside the packages of ``CIRCLE_FREE_PACKAGES`` no
circle is allowed even counting the ``if TYPE_CHECKING:`` imports (issue #18: each reads
from its bottom module up).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TOP_MODULES = ("agent.py", "run_ui.py")
PACKAGES = ("python", "durability")
#: Packages without an import circle even when type-only imports count.
CIRCLE_FREE_PACKAGES = ("python.durable", "durability.journal", "durability.store")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported project module, or the top-level name of anything else
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_files(root: Path) -> list[Path]:
    found = [root / name for name in TOP_MODULES if (root / name).exists()]
    for package in PACKAGES:
        found.extend(sorted((root / package).rglob("*.py")))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _statements(node: ast.AST, type_checking: bool = False) -> Iterator[ast.AST]:
    """Every node below ``node``, skipping the body of ``if TYPE_CHECKING:`` blocks
    unless ``type_checking``."""
    for child in ast.iter_child_nodes(node):
        if not type_checking and isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _statements(other)
            continue
        yield child
        yield from _statements(child, type_checking)


def imports_of(
    root: Path, path: Path, modules: set[str], *, type_checking: bool = False
) -> list[Import]:
    """What ``path`` imports: project modules by full name, anything else by top name
    (``type_checking``: the imports of ``if TYPE_CHECKING:`` blocks too)."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _statements(tree, type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(name, _target(alias.name, modules), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in modules else _target(base, modules)
                found.append(Import(name, target, node.lineno))
    return found


def _target(dotted: str, modules: set[str]) -> str:
    """The project module a dotted name loads (its longest known prefix), else its top name."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return parts[0]


def import_graph(root: Path, *, type_checking: bool = False) -> tuple[set[str], list[Import]]:
    files = project_files(root)
    modules = {module_name(root, p) for p in files}
    edges = [i for p in files for i in imports_of(root, p, modules, type_checking=type_checking)]
    return modules, edges


def package_circles(root: Path, package: str) -> list[list[str]]:
    """The import circles among the modules of ``package``, type-only imports counted."""
    modules, edges = import_graph(root, type_checking=True)
    inside = {m for m in modules if _in(m, package)}
    return cycles(inside, [e for e in edges if e.module in inside])


def cycles(modules: set[str], edges: Iterable[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for edge in edges:
        if edge.target in modules and edge.target != edge.module:
            graph[edge.module].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
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


def declared_dependencies(root: Path) -> set[str]:
    """Import names of the packages in requirements*.txt (distribution name, normalised)."""
    names: set[str] = set()
    for req in root.glob("requirements*.txt"):
        for line in req.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            dist = re.split(r"[\s<>=!~;\[]", line, maxsplit=1)[0]
            names.add(dist.lower().replace("-", "_"))
    return names


#: Distribution names whose import name differs.
IMPORT_NAMES = {"python_dotenv": "dotenv", "pyyaml": "yaml"}

#: The libraries that speak HTTP: imported only at the edge.
HTTP_LIBRARIES = ("starlette", "uvicorn", "python_multipart", "multipart")
EDGE = ("python.server", "python.api", "run_ui")


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def violations(root: Path) -> list[str]:
    """Every broken rule, as readable lines (empty when the arrows hold)."""
    modules, edges = import_graph(root)
    problems = [f"import cycle: {' <-> '.join(c)}" for c in cycles(modules, edges)]
    allowed = {IMPORT_NAMES.get(d, d) for d in declared_dependencies(root)}
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for edge in edges:
        where = f"{edge.module} (line {edge.line}) imports {edge.target}"
        source, target = edge.module, edge.target
        if _in(source, "durability"):
            outside = target not in modules and target not in stdlib and target not in allowed
            if _in(target, "agent", "run_ui", "python") or outside:
                problems.append(f"{where}: durability/ imports only itself, stdlib, deps")
        if source == "agent" and _in(target, "python.durable", *EDGE):
            problems.append(f"{where}: agent.py never imports the glue or the HTTP layer")
        if _in(source, "python.helpers", "python.tools") and _in(target, "python.durable", *EDGE):
            problems.append(f"{where}: helpers and tools never import the glue or the server")
        if _in(source, "python.durable") and _in(target, *EDGE):
            problems.append(f"{where}: python/durable never imports the HTTP layer")
        if _in(source, "python.server") and _in(target, "python.api", "run_ui"):
            problems.append(f"{where}: python/server never imports python/api or run_ui")
        if target in HTTP_LIBRARIES and not _in(source, *EDGE):
            problems.append(f"{where}: only python/server, python/api and run_ui speak HTTP")
    return problems


def test_the_import_arrows_hold():
    assert violations(ROOT) == []


def _copy_tree(tmp_path: Path) -> Path:
    """The project's import-relevant files, copied so a test can add a forbidden one."""
    for path in project_files(ROOT):
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    for req in ROOT.glob("requirements*.txt"):
        (tmp_path / req.name).write_bytes(req.read_bytes())
    return tmp_path


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("python/helpers/_probe.py", "from python.durable import session\n", "helpers and"),
        ("python/tools/_probe.py", "import python.api.poll\n", "helpers and"),
        ("durability/_probe.py", "import agent\n", "durability/ imports only"),
        ("durability/_probe.py", "import requests\n", "durability/ imports only"),
        ("python/durable/_probe.py", "from python.api import poll\n", "never imports the HTTP"),
        (
            "python/durable/_probe.py",
            "from python.server.errors import ApiError\n",
            "never imports the HTTP",
        ),
        ("python/tools/_probe.py", "from python.server import api\n", "glue or the server"),
        ("python/helpers/_probe.py", "import python.server.auth\n", "glue or the server"),
        ("python/durable/_probe.py", "from starlette.requests import Request\n", "speak HTTP"),
        ("python/tools/_probe.py", "def f():\n    import starlette\n", "speak HTTP"),
        ("python/helpers/_probe.py", "from uvicorn import Server\n", "speak HTTP"),
        ("python/server/_probe.py", "from python.api import poll\n", "never imports python/api"),
        (
            "python/helpers/_probe.py",
            "def later():\n    from python.durable import chats\n",
            "helpers and",
        ),
    ],
)
def test_a_forbidden_import_is_found(tmp_path, where, source, expected):
    root = _copy_tree(tmp_path)
    (root / where).write_text(source, encoding="utf-8")
    assert any(expected in line for line in violations(root)), violations(root)


def test_agent_importing_the_glue_and_a_cycle_are_found(tmp_path):
    root = _copy_tree(tmp_path)
    agent = root / "agent.py"
    agent.write_text(agent.read_text() + "\nfrom python.durable import session  # noqa\n")
    (root / "python" / "helpers" / "_a.py").write_text("from python.helpers import _b\n")
    (root / "python" / "helpers" / "_b.py").write_text("def f():\n    import python.helpers._a\n")
    found = violations(root)
    assert any("agent.py never imports the glue" in line for line in found), found
    assert any("python.helpers._a <-> python.helpers._b" in line for line in found), found


def test_type_checking_imports_are_ignored(tmp_path):
    root = _copy_tree(tmp_path)
    probe = root / "python" / "helpers" / "_probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from python.durable.session import DurableSession\n"
    )
    assert violations(root) == []


@pytest.mark.parametrize("package", CIRCLE_FREE_PACKAGES)
def test_no_import_circle_in_the_package_even_counting_type_only_imports(package):
    assert package_circles(ROOT, package) == []


def test_a_type_only_import_circle_is_found(tmp_path):
    root = _copy_tree(tmp_path)
    package = root / "python" / "durable"
    (package / "_a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from python.durable._b import B\n"
    )
    (package / "_b.py").write_text("from python.durable import _a\n")
    assert ["python.durable._a", "python.durable._b"] in package_circles(root, "python.durable")
    assert violations(root) == []  # the arrows between packages still ignore type-only imports


def test_no_api_error_below_the_edge():
    """The glue and the tools raise domain errors (python/helpers/errors.py): no name of
    the edge's error (``ApiError``, which once carried an HTTP status) appears there."""
    below = [
        *(ROOT / "python" / "durable").rglob("*.py"),
        *(ROOT / "python" / "tools").rglob("*.py"),
    ]
    found = [str(p.relative_to(ROOT)) for p in below if "ApiError" in p.read_text(encoding="utf-8")]
    assert found == []
