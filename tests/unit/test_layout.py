"""The layout is the architecture (docs/architecture.md): every module under service/ sits in
a layer of the import contracts, subpackages import nothing at package level, every package
ships in the wheel, no module outgrows one job, and the README's layout caption names what
`ls service/` shows."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "service"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MAX_MODULE_LINES = 400


def modules() -> list[str]:
    """Dotted names of every module under service/ (packages as their own name)."""
    names = []
    for path in sorted(SERVICE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def layers() -> list[str]:
    """The packages and modules named by the layers contract, siblings split."""
    (contract,) = [
        c for c in PYPROJECT["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    return [name for layer in contract["layers"] for name in re.split(r"[|:]", layer)]


def in_layer(module: str, named: list[str]) -> bool:
    return any(module == name.strip() or module.startswith(name.strip() + ".") for name in named)


def test_every_module_under_service_belongs_to_a_layer() -> None:
    named = layers()

    orphans = [m for m in modules() if m != "service" and not in_layer(m, named)]

    assert orphans == [], f"modules in no layer of the import contracts: {orphans}"


def test_a_new_top_level_module_would_be_caught() -> None:
    assert not in_layer("service.write_back", layers())
    assert in_layer("service.usecases.nightly.write_back", layers())


def test_subpackages_import_nothing_at_package_level() -> None:
    importing = []
    for init in SERVICE.rglob("__init__.py"):
        if init.parent == SERVICE:
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        body = [node for node in tree.body if not isinstance(node, ast.Expr)]
        if body:
            importing.append(str(init.relative_to(ROOT)))

    assert importing == [], f"keep these to a docstring: {importing}"


def test_every_package_is_listed_for_the_wheel() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    packages = {m for m in modules() if (SERVICE.parent / m.replace(".", "/")).is_dir()}

    data_only = {"service.data", "service.static"}  # no modules: listed for their files
    assert packages | data_only | {"service.migrations", "service.migrations.versions"} == listed
    assert PYPROJECT["tool"]["setuptools"]["package-dir"]["service.migrations"] == "migrations"


def test_no_module_holds_more_than_one_jobs_worth_of_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in SERVICE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }

    assert long == {}


def test_the_package_root_stays_small() -> None:
    entries = {p.name for p in SERVICE.iterdir() if p.name != "__pycache__"}

    assert len(entries - {"__init__.py", "py.typed", "data", "static"}) <= 12


def test_the_readme_layout_caption_names_what_the_tree_holds() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    captioned = {
        match.group(1).rstrip("/")
        for line in block.splitlines()
        if (match := re.match(r"^  (\S+)\s", line))
    }
    tree = {
        p.name
        for p in SERVICE.iterdir()
        if p.name not in ("__pycache__", "__init__.py", "py.typed")
    }

    assert captioned == tree


def test_no_file_cites_a_document_outside_the_repository() -> None:
    citing = [
        str(path.relative_to(ROOT))
        for folder in ("service", "migrations", "tests", "bench", "demo", "docs", "deploy")
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
        and path.suffix in (".py", ".md", ".toml", ".yaml", ".html")
        and path != Path(__file__)
        and re.search(r"DESIGN(\.md)? ?§|\.\./shared", path.read_text(encoding="utf-8"))
    ]

    assert citing == []
