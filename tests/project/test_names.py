"""One meaning per name: no two modules of the package declare the same class, type alias or
public function."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import subspace

PACKAGE = Path(subspace.__file__).parent

# Names two modules may both declare, and why they still mean one thing or keep their name.
SHARED: dict[str, str] = {}


def _is_surface(module: str) -> bool:
    """Route handlers and CLI commands are named after the operation they expose (FastAPI
    makes a route's operationId from a handler's name), whatever function does the work."""
    return module.startswith("subspace.api.routes.") or module == "subspace.cli"


def _declared(path: Path, module: str) -> list[str]:
    """The classes, type aliases and public functions `path` declares at its top level."""
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_") and not _is_surface(module):
                names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            # A CamelCase name bound at the top level is a type alias (CONSTANTS and TypeVars
            # such as T are all capitals).
            names += [
                t.id
                for t in targets
                if isinstance(t, ast.Name) and t.id[0].isupper() and not t.id.isupper()
            ]
    return names


def declarations() -> dict[str, list[str]]:
    """Each declared name -> the modules declaring it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for name in _declared(path, module):
            found[name].append(module)
    return found


def test_no_two_modules_declare_the_same_name() -> None:
    twice = {name: modules for name, modules in declarations().items() if len(modules) > 1}
    assert {name: twice[name] for name in twice.keys() - SHARED.keys()} == {}
    assert SHARED.keys() <= twice.keys(), "a name in SHARED is declared once now: drop it"


def test_the_check_sees_classes_aliases_and_functions() -> None:
    found = declarations()
    assert found["SearchRuntime"] == ["subspace.search.shared"]  # a class
    assert found["TargetKey"] == ["subspace.search.fusion"]  # a type alias
    assert found["ItemKind"] == ["subspace.models"]  # a Literal
    assert found["embed_query"] == ["subspace.search.vector"]  # a function
    assert "create_page" in found
    assert found["create_page"] == ["subspace.commands.pages"]
