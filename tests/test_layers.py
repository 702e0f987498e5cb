"""The layering: contracts at the bottom, every layer importing only those below it.

    draftgen_contracts  <  draftgen_simulator  <  jobrunner  <  draftgen  <  draftgen_operator  <  draftgen_dev
                                                                                          (development only)

Every import counts, the lazy ones inside functions too, and every string that names a module (a
command table's "draftgen_operator.main"). Beyond the order:
- the contracts import no HTTP or Kubernetes library (they hold the wire formats, not the wires);
- the SGLang simulator stands apart from the product's stages: it imports only the contracts, and
  jobrunner names it only in its command table (`jobrunner simulate`), never imports it;
- jobrunner's shared libraries (`jobrunner.shared`) import no stage: only each other, the SGLang
  client and the contracts;
- draftgen's pure core (API, plan, fold, policies, reconcile) imports nothing of jobrunner: only its
  local executor (`draftgen run`) and its command line start jobrunner's programs;
- nothing in the product imports the development package or the tests, and neither does bench/.
Unit tests beside their modules (`*_test.py`) are tests, not product, and may use the builders.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = ["draftgen_contracts", "draftgen_simulator", "jobrunner", "draftgen", "draftgen_operator", "draftgen_dev"]
SOURCES = {"draftgen_contracts": REPO / "draftgen_contracts", "draftgen_simulator": REPO / "draftgen_simulator",
           "jobrunner": REPO / "jobrunner",
           "draftgen": REPO / "draftgen", "draftgen_operator": REPO / "draftgen_operator",
           "draftgen_dev": REPO / "devtools" / "draftgen_dev"}
NO_WIRES = {"aiohttp", "httpx", "kubernetes", "kopf", "requests", "urllib3"}
# draftgen modules that run jobrunner's programs (the local executor).
DRAFTGEN_STARTS_JOBRUNNER = ("draftgen.local.",)
# A string that names a module of the layers ("draftgen_operator.main", as a dispatcher's table does):
# a link the imports do not show, held to the same order.
MODULE_STRING = re.compile(r"^(draftgen_contracts|draftgen_simulator|jobrunner|draftgen|draftgen_operator|draftgen_dev)"
                           r"(\.[a-z_][a-z0-9_]*)+$|^(draftgen_contracts|draftgen_simulator|draftgen_operator|draftgen_dev)$")
# The one place jobrunner names the simulator: its command table.
JOBRUNNER_NAMES_SIMULATOR = ("jobrunner.cli",)
# What jobrunner's shared libraries may import of jobrunner.
SHARED_IMPORTS = ("jobrunner.shared", "jobrunner.sglang")


def module_name(package: str, path: Path) -> str:
    parts = path.relative_to(SOURCES[package]).with_suffix("").parts
    return ".".join([package, *(p for p in parts if p != "__init__")])


def imported_modules(path: Path, module: str) -> set[str]:
    """Every module a file imports, relative imports resolved."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level + (1 if path.name == "__init__.py" else 0) or None]
                found.add(".".join([*base, *([node.module] if node.module else [])]))
            else:
                found.add(node.module)
    return found


def is_module(name: str) -> bool:
    """Whether a dotted name is one of the layers' modules ("draftgen.io", an API group, is not)."""
    where = SOURCES[top(name)].joinpath(*name.split(".")[1:])
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def named_modules(path: Path) -> set[str]:
    """Every string constant of a file that is a module's dotted name."""
    return {node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value)
            and is_module(node.value)}


def product_files():
    for package, root in SOURCES.items():
        for path in sorted(root.rglob("*.py")):
            if not path.name.endswith("_test.py"):
                yield package, path


def top(module: str) -> str:
    return module.split(".")[0]


def problems_of(package: str, path: Path) -> list[str]:
    module = module_name(package, path)
    problems = []
    for imported in sorted(imported_modules(path, module)):
        root = top(imported)
        if root in LAYERS and LAYERS.index(root) > LAYERS.index(package):
            problems.append(f"{module} imports {imported}, a higher layer")
        if root == "tests":
            problems.append(f"{module} imports the tests ({imported})")
        if package == "draftgen_contracts" and root in NO_WIRES:
            problems.append(f"{module} imports {imported}: the contracts hold no HTTP or Kubernetes client")
        if package == "draftgen" and root == "jobrunner" and not module.startswith(DRAFTGEN_STARTS_JOBRUNNER):
            problems.append(f"{module} imports {imported}: draftgen's core must not depend on jobrunner")
        if package == "jobrunner" and root == "draftgen_simulator":
            problems.append(f"{module} imports {imported}: the product's stages never import the simulator")
        if (module.startswith("jobrunner.shared") and root == "jobrunner"
                and not imported.startswith(SHARED_IMPORTS)):
            problems.append(f"{module} imports {imported}: a shared library imports no stage")
    for named in sorted(named_modules(path)):
        if LAYERS.index(top(named)) > LAYERS.index(package):
            problems.append(f"{module} names {named} in a string, a higher layer")
        if package == "jobrunner" and top(named) == "draftgen_simulator" and module not in JOBRUNNER_NAMES_SIMULATOR:
            problems.append(f"{module} names {named}: only the command table names the simulator")
    return problems


def test_every_layer_imports_only_what_is_below_it():
    problems = [p for package, path in product_files() for p in problems_of(package, path)]
    assert problems == []


def test_bench_uses_no_test_code():
    problems = [f"{path.name} imports {m}" for path in sorted((REPO / "bench").glob("*.py"))
                for m in imported_modules(path, path.stem) if top(m) == "tests"]
    assert problems == []


def test_bench_has_no_import_circle():
    """The benchmarks import each other one way (a shared module when two need the same code)."""
    scripts = {path.stem: path for path in (REPO / "bench").glob("*.py")}
    imports = {name: {top(m) for m in imported_modules(path, name)} & set(scripts) for name, path in scripts.items()}

    def reaches(start: str, goal: str, seen: frozenset = frozenset()) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in imports[start])
    assert [name for name in scripts if reaches(name, name)] == []


@pytest.mark.parametrize("source, module, expected", [
    ("from jobrunner import generate\n", "draftgen_contracts.names", "a higher layer"),
    ("def f():\n    import draftgen.plan\n", "jobrunner.merge", "a higher layer"),
    ("import aiohttp\n", "draftgen_contracts.names", "no HTTP or Kubernetes client"),
    ("from jobrunner.shared.output import record_files\n", "draftgen.fold", "must not depend on jobrunner"),
    ("from draftgen_dev import builders\n", "draftgen_operator.handlers", "a higher layer"),
    ("from ..plan import x\n", "draftgen_operator.apply", ""),
    ("COMMANDS = {'operator': ('draftgen_operator.main', 'run it')}\n", "draftgen.cli", "names draftgen_operator.main"),
    ("LOG = 'jobrunner.generate'\nWORD = 'draftgen'\n", "jobrunner.cli", ""),
    ("from jobrunner.shared.output import record_files\n", "draftgen_simulator.server", "a higher layer"),
    ("from draftgen_simulator.config import SimConfig\n", "jobrunner.generate.engine", "never import the simulator"),
    ("RUN = 'draftgen_simulator.cli'\n", "jobrunner.generate.run", "only the command table"),
    ("COMMANDS = {'simulate': ('draftgen_simulator.cli', 'run it')}\n", "jobrunner.cli", ""),
    ("def f():\n    from jobrunner.generate import engine\n", "jobrunner.shared.output", "imports no stage"),
    ("from jobrunner.shared import corpus\nfrom jobrunner.sglang import rids\n", "jobrunner.shared.output", ""),
])
def test_the_check_finds_a_back_import(tmp_path, source, module, expected):
    package = top(module)
    path = SOURCES[package] / (module.split(".", 1)[1].replace(".", "/") + ".py")
    fake = tmp_path / path.relative_to(REPO)
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text(source)
    roots = dict(SOURCES)
    SOURCES[package] = tmp_path / SOURCES[package].relative_to(REPO)
    try:
        found = problems_of(package, fake)
    finally:
        SOURCES.update(roots)
    assert (expected in " ".join(found)) if expected else found == []
