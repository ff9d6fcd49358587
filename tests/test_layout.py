"""The layout keeps its promises: imports only go down the layers, no import circles, library code neither parses arguments nor
prints, one copy of each shared helper, and the config is usable without torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suite"
MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in sorted(SUITE.rglob("*.py"))
}
LIBRARY = {m: p for m, p in MODULES.items() if not m.startswith("suite.cli") and m != "suite.__main__"}


def _imports(module: str, path: Path) -> set[str]:
    """Suite modules that ``module`` imports anywhere (top level or inside functions)."""
    out = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            for a in node.names:  # `from pkg import submodule` imports the submodule
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {m for m in out if m in MODULES and m != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


# Bottom to top: a module imports only from its own layer or those below (function-level imports too).
LAYERS = [
    ("suite.registry", "suite.files", "suite.interrupt", "suite.learned"),
    ("suite.config",),
    ("suite.data", "suite.models", "suite.store", "suite.results", "suite.grouping", "suite.declared"),
    ("suite.engine", "suite.analysis"),
    ("suite.sweep",),
    ("suite.bench",),
    ("suite.cli", "suite.__main__"),
]


def _layer(module: str) -> int | None:
    return next((i for i, names in enumerate(LAYERS) for n in names if module == n or module.startswith(n + ".")),
                None)


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "suite" and _layer(m) is None] == []


def test_imports_only_go_down_the_layers():
    upward = [f"{m} (layer {_layer(m)}) imports {n} (layer {_layer(n)})" for m, p in MODULES.items()
              if m != "suite" for n in sorted(_imports(m, p)) if n != "suite" and _layer(n) > _layer(m)]
    assert upward == []


def test_the_sweep_imports_nothing_from_the_analysis():
    """The sweep reads runs through suite.results and suite.grouping; what judges them is passed in."""
    reach = [f"{m} imports {n}" for m, p in MODULES.items() if m.startswith("suite.sweep")
             for n in sorted(_imports(m, p)) if n.startswith("suite.analysis")]
    assert reach == []


def test_no_module_imports_another_modules_private_names():
    private = [f"{m}: from {node.module} import {a.name}" for m, p in MODULES.items()
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("suite")
               for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert private == []


def test_no_function_imports_a_dotted_module():
    """``import torch._dynamo`` inside a function makes ``torch`` a local name of the whole function, so a
    use of ``torch`` above it raises UnboundLocalError, on a path the CPU may never take (the first device
    check found one in a compiled pack's CUDA branch): write ``from torch import _dynamo``."""
    scripts = {p.stem: p for p in (ROOT / "scripts").glob("*.py")}
    found = [f"{m}: {fn.name}: import {a.name}" for m, p in {**MODULES, **scripts}.items()
             for fn in ast.walk(ast.parse(p.read_text())) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(fn) if isinstance(node, ast.Import) for a in node.names
             if "." in a.name and a.asname is None]
    assert found == []


def test_the_graph_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circles_even_through_function_level_imports():
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    assert _cycle(graph) is None


def test_each_product_is_one_folder():
    products = {p.name for p in SUITE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert products == {"models", "data", "engine", "sweep", "analysis", "bench", "cli"}
    flat = {p.name for p in SUITE.glob("*.py")}
    assert flat == {"__init__.py", "__main__.py", "config.py", "declared.py", "files.py", "grouping.py", "interrupt.py",
                    "learned.py", "registry.py", "results.py", "store.py"}
    for package in products:
        assert ast.get_docstring(ast.parse((SUITE / package / "__init__.py").read_text())), package


@pytest.mark.parametrize("module", sorted(LIBRARY))
def test_library_modules_never_parse_arguments_or_print(module):
    tree = ast.parse(LIBRARY[module].read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            assert "argparse" not in names, f"{module} imports argparse: parsing belongs in suite/cli"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "print", f"{module}:{node.lineno} prints: output belongs in suite/cli"


def _defining(pattern: str) -> list[str]:
    return sorted(m for m, p in MODULES.items() if pattern in p.read_text())


@pytest.mark.parametrize("init", sorted(SUITE.rglob("__init__.py")), ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_each_package_docstring_names_every_module_and_subpackage(init):
    """A package's docstring is its map: a module added without a line there is a map that lies."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    here = [p.name for p in init.parent.glob("*.py") if p.name != "__init__.py"]
    here += [f"{d.name}/" for d in init.parent.iterdir() if (d / "__init__.py").exists()]
    assert not [name for name in sorted(here) if name not in doc], f"{init}: its docstring does not name these"


def test_one_copy_of_each_shared_helper():
    assert _defining("get_close_matches") == ["suite.registry"]  # did-you-mean
    assert _defining('("ok", "diverged", "failed"') == ["suite.store"]  # the statuses
    assert _defining("def read_metrics") == ["suite.store"]
    assert _defining("json.dump") == ["suite.store"]  # one JSON policy
    assert _defining("json.loads(") == ["suite.store"]  # results JSON: strict store.loads only


def test_every_module_imports_and_the_config_needs_no_torch():
    code = (
        "import sys\n"
        "from suite.config import load_config\n"
        "from suite.sweep.spec import load_ablation\n"
        "load_config(None, ['model.residual=layerscale', 'data.name=digits', 'model.patch_size=4'])\n"
        f"ablation = load_ablation({str(ROOT / 'ablations' / 'default.yaml')!r})\n"
        "from suite.sweep.cost import estimate\n"
        "estimate(ablation)\n"
        "assert 'torch' not in sys.modules, 'validating configs or costing an ablation imported torch'\n"
        "from suite.sweep.cost import measure_step_ms\n"
        "measure_step_ms(load_config(None, ['model.depth=1', 'model.dim=8', 'train.batch_size=2']), 1, steps=1, warmup=0)\n"
        "assert 'torch._dynamo' not in sys.modules, 'the estimate imported torch._dynamo'\n"
        "import importlib\n"
        f"for m in {sorted(MODULES)!r}:\n"
        "    if m != 'suite.__main__':\n"
        "        importlib.import_module(m)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_one_definition_of_each_rule_issue_63_named():
    """The learning-rate and depth keys are spelled once (suite.config.LR, DEPTH); one ``load_runs`` (the notebook
    DataFrame; the list of records is ``suite.results.run_records``); one ``best_rate``."""
    spelled, defined = {}, {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in ("train.lr", "model.depth"):
                spelled.setdefault(node.value, set()).add(module)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("load_runs", "best_rate"):
                defined.setdefault(node.name, []).append(module)
    assert spelled == {"train.lr": {"suite.config"}, "model.depth": {"suite.config"}}, spelled
    assert defined == {"load_runs": ["suite.sweep.results"], "best_rate": ["suite.results"]}


def test_a_results_folders_ablation_yaml_has_one_reader():
    """Its name is spelled once (suite.results.ABLATION_FILE) and only suite.results.recorded_ablation opens it
    as YAML, under one policy (links refused, the size and alias-bomb guards); issue 63 counted 8 readers."""
    spelled = {m for m, p in MODULES.items() for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.Constant) and node.value == "ablation.yaml"}
    assert spelled == {"suite.results"}


def test_every_endpoint_is_a_registered_class_with_its_rule():
    """An endpoint is one class (suite/analysis/endpoints/) registered with what it asks of the grid."""
    from suite.analysis.endpoints import Endpoint
    from suite.declared import ENDPOINTS, RULES

    assert list(ENDPOINTS) == list(RULES) and len(ENDPOINTS) >= 5
    for name in ENDPOINTS:
        kind = ENDPOINTS.get(name)
        assert isinstance(kind, type) and issubclass(kind, Endpoint) and kind.name == name and kind.what, name
        for method in ("test", "verdict", "decided", "cells", "plan_row"):
            assert getattr(kind, method) is not getattr(Endpoint, method), f"{name} lacks {method}"


def test_no_module_branches_on_an_endpoint_name():
    """Only the endpoint classes know what an endpoint does: nothing else compares an endpoint with a name."""
    from suite.declared import ENDPOINTS

    names = set(ENDPOINTS)

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(named(e) for e in node.elts)

    found = [f"{m}:{node.lineno}" for m, p in MODULES.items() if not m.startswith("suite.analysis.endpoints")
             for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Compare)
             and any(named(side) for side in (node.left, *node.comparators))]
    assert found == []
