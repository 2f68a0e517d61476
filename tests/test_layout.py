"""The package's architecture, checked from its source: no import cycles between modules
(function-level imports included), models never import trainers, the library never
imports its benchmarks (the top-level ``benchmarks`` package; only ``gpscale bench``
reaches it, by name at run time) nor do they import its private names, every registered
method's adapter lives in gpscale.methods, only gpscale.parallel.cluster imports dask, and
no module imports another's private names."""

import ast
from pathlib import Path

import gpscale

PACKAGE = Path(gpscale.__file__).resolve().parent
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """gpscale modules imported anywhere in ``path`` (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):  # imports for type checkers only do not run
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("gpscale")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("gpscale"):
                continue
            for a in node.names:  # `from . import x` may name a submodule
                sub = f"{mod}.{a.name}"
                found.add(sub if (PACKAGE.parent / sub.replace(".", "/")).exists()
                          or (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                          else mod)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for mod in _imports(path):
            while mod and mod not in modules:  # gpscale.x.Name -> gpscale.x
                mod = mod.rsplit(".", 1)[0] if "." in mod else ""
            if mod and mod != name:
                deps.add(mod)
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _is_package_init(name: str) -> bool:
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()


def test_no_import_cycle_between_modules():
    # a package's __init__ re-exports its modules; edges into an __init__ from its own
    # submodules would be cycles by construction, so they count as the package's parts
    graph = {n: {d for d in deps if not (_is_package_init(d) and n.startswith(d + "."))}
             for n, deps in _graph().items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def _absolute_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import in ``path``, in functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or "", [a.name for a in node.names]))
    return found


def test_models_do_not_import_trainers_and_the_library_not_its_benchmarks():
    graph = _graph()
    for name, deps in graph.items():
        if name.startswith("gpscale.models"):
            assert not {d for d in deps if d.startswith("gpscale.train")}, (name, deps)
    assert not list(PACKAGE.glob("bench/*.py")), "the benchmarks live in benchmarks/"
    for path in PACKAGE.rglob("*.py"):
        for line, mod, _ in _absolute_imports(path):
            assert mod.split(".")[0] != "benchmarks", f"{path.relative_to(PACKAGE)}:{line}"


def test_benchmarks_use_only_gpscale_public_names():
    paths = sorted(BENCHMARKS.glob("*.py"))
    assert paths, f"no benchmarks under {BENCHMARKS}"
    for path in paths:
        for line, mod, names in _absolute_imports(path):
            if mod.split(".")[0] != "gpscale":
                continue
            private = [p for p in mod.split(".") + names
                       if p.startswith("_") and not p.endswith("__")]  # __version__ is public
            assert not private, f"benchmarks/{path.name}:{line} imports {mod} {private}"


def test_every_method_is_registered_from_the_methods_package():
    for name, method in gpscale.METHODS.items():
        assert method.fit_fn.__module__.startswith("gpscale.methods."), (name,
                                                                         method.fit_fn.__module__)


#: the types training data come as: only gpscale.io looks at which one it was given
DATA_TYPES = {"Rows", "PartitionRows", "TensorPartition", "Source", "TrainingData",
              "ArrayPartition", "FramePartition", "CsvPartition", "ParquetPartition",
              "DaskPartition", "Partition", "DataFrame", "ndarray"}


def _calls(tree: ast.AST, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if getattr(f, "id", None) == name or getattr(f, "attr", None) == name:
                yield node


def _names_in(node: ast.AST) -> set[str]:
    return {getattr(n, "id", None) or getattr(n, "attr", None) for n in ast.walk(node)}


def test_methods_trainers_and_models_never_ask_what_type_the_data_are():
    for sub in ("methods", "train", "models"):
        for path in (PACKAGE / sub).rglob("*.py"):
            for call in _calls(ast.parse(path.read_text()), "isinstance"):
                asked = _names_in(call.args[1]) & DATA_TYPES if len(call.args) > 1 else set()
                assert not asked, f"{path.relative_to(PACKAGE)}:{call.lineno} asks {asked}"


def test_the_cli_and_fit_reach_methods_only_through_the_planner():
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        if not rel.startswith(("methods/", "plan.py")):
            assert not list(_calls(tree, "choose_method")), f"{rel} picks a method itself"
        fit_fn_calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call)
                        and getattr(c.func, "attr", None) == "fit_fn"]
        if not rel.startswith("methods/"):
            assert rel == "api.py" or not fit_fn_calls, f"{rel} calls a method directly"
    api_tree = ast.parse((PACKAGE / "api.py").read_text())
    callers = {f.name for f in ast.walk(api_tree) if isinstance(f, ast.FunctionDef)
               and any(getattr(c.func, "attr", None) == "fit_fn" for c in ast.walk(f)
                       if isinstance(c, ast.Call))}
    assert callers <= {"_fit_held", "_fit_rows"}, callers  # both called by run(plan, ...)
    cli_tree = ast.parse((PACKAGE / "cli.py").read_text())
    called = {getattr(c.func, "attr", None) for c in ast.walk(cli_tree)
              if isinstance(c, ast.Call) and getattr(c.func, "value", None) is not None
              and getattr(c.func.value, "id", None) == "api"}
    assert "fit" not in called and "run" in called  # gpscale fit: plan, then api.run


def test_one_exact_gp_model_class_whose_solver_is_a_strategy():
    """The exact GP is one model class; Cholesky and CG are its solvers, not models."""
    from gpscale.models import GPModel, exact, exact_cg

    exact_models = {cls for cls in gpscale.models.MODEL_CLASSES.values()
                    if cls.__module__ in (exact.__name__, exact_cg.__name__)}
    assert exact_models == {gpscale.models.ExactGP}
    assert not any(isinstance(v, type) and issubclass(v, GPModel) and v.__module__ ==
                   exact_cg.__name__ for v in vars(exact_cg).values())
    for path in PACKAGE.rglob("*.py"):  # no second place that knows the CG model's fields
        text = path.read_text()
        assert "IterativeExactGP(" not in text and "from_exact(" not in text, path


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_no_kernel_is_looked_up_by_its_qualified_name():
    # kernels own their fast forms (``tiled_form``): a table keyed by class names would
    # send a subclass to the slow path, or a rewritten formula to its parent's
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs:
                assert not node.value.startswith("gpscale.kernels."), \
                    f"{path.relative_to(PACKAGE)}:{node.lineno} names {node.value!r}"


def test_linalg_never_reads_a_kernels_parameters():
    # the operator asks the kernel (tiled_form, tiled_gradients), never unwraps it
    for path in (PACKAGE / "linalg").rglob("*.py"):
        names = _names_in(ast.parse(path.read_text()))
        read = names & {"raw_lengthscale", "raw_outputscale", "lengthscale", "outputscale",
                        "base"}
        assert not read, f"{path.relative_to(PACKAGE)} reads {read}"


#: the one module of the library that talks to dask (connect, tasks, error translation)
CLUSTER_MODULE = "gpscale.parallel.cluster"
DASK_PACKAGES = {"dask", "distributed"}


def _imported_packages(tree: ast.AST) -> set[str]:
    """Top-level package names of the absolute imports anywhere in ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_the_cluster_module_imports_dask():
    importers = {_module_name(p) for p in PACKAGE.rglob("*.py")
                 if _imported_packages(ast.parse(p.read_text())) & DASK_PACKAGES}
    assert importers == {CLUSTER_MODULE}, sorted(importers)


def _private_imports(path: Path) -> list[str]:
    """``from gpscale.x import _y`` / ``from .x import _y`` in ``path`` (dunders allowed)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level
                                                 or (node.module or "").startswith("gpscale")):
            module = "." * node.level + (node.module or "")
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno} imports {a.name} from "
                      f"{module}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_a_private_name_of_another():
    found = [f for p in sorted(PACKAGE.rglob("*.py")) for f in _private_imports(p)]
    assert not found, found
