"""The rules docs/design.md states, checked from the source: imports run one way between
the layers of its picture (function-level imports and imports for type checkers count),
with no cycle and no import made by a string; models never import trainers; the library
never imports its benchmarks (the top-level ``benchmarks`` package; ``gpscale bench``
runs it as a child process) nor edits ``sys.path``, and the benchmarks use only
gpscale's public names; no import is moved into a function to step around a cycle;
every registered method's adapter lives in gpscale.methods, and none is recognised by
its fit function; only gpscale.parallel.cluster imports dask; no module imports
another's private names; one data path; one exact-GP model class; no kernel looked up
by its class name, and linalg never reads a kernel's parameters."""

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import NamedTuple

import gpscale

PACKAGE = Path(gpscale.__file__).resolve().parent
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"

#: docs/design.md's picture, its first row first: a module imports modules of its own
#: layer and of the layers before it, never of one after it (each layer by the first
#: part of its modules' names after ``gpscale.``; "" is gpscale/__init__.py)
LAYERS = [
    ("shared", {"params", "priors", "preprocessing", "validation", "files", "sizes", "rng",
                "deadline", "metrics", "progress", "quality", "threads", "checksum"}),
    ("parallel", {"parallel"}),
    ("linalg", {"linalg"}),
    ("kernels", {"kernels"}),
    ("features", {"features"}),
    ("data", {"data"}),
    ("io", {"io"}),
    ("models", {"models"}),
    ("train", {"train"}),
    ("methods", {"methods"}),
    ("doors", {"plan", "api", "predictor", "cli", "commands", "sklearn", "demo", ""}),
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Import(NamedTuple):
    line: int
    module: str  # absolute (relative imports resolved), as written
    names: list[str]  # the names of a ``from`` import; [] for ``import x``
    where: str  # "module", "function" (runs when called) or "type-checking" (never runs)


def _import_nodes(tree: ast.AST, where: str = "module"):
    """(node, where) for every import statement under ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, where
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for part in node.body:
                yield from _import_nodes(ast.Module(body=[part], type_ignores=[]),
                                         "type-checking")
            for part in node.orelse:
                yield from _import_nodes(ast.Module(body=[part], type_ignores=[]), where)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _import_nodes(node, "function")
        else:
            yield from _import_nodes(node, where)


def _all_imports(path: Path) -> list[Import]:
    """Every import statement in ``path``, relative ones made absolute."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node, where in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, a.name, [], where) for a in node.names]
            continue
        mod = node.module or ""
        if node.level:
            base = package.split(".")
            base = base[: len(base) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        found.append(Import(node.lineno, mod, [a.name for a in node.names], where))
    return found


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.is_dir() or path.with_suffix(".py").exists()


def _imports(path: Path, kinds: tuple[str, ...] = ("module", "function")) -> set[str]:
    """gpscale modules imported by ``path`` where ``kinds`` says (module level, in
    functions, for type checkers)."""
    found = set()
    for imp in _all_imports(path):
        if imp.where not in kinds or not imp.module.startswith("gpscale"):
            continue
        if not imp.names:
            found.add(imp.module)
        for n in imp.names:  # `from . import x` may name a submodule
            sub = f"{imp.module}.{n}"
            found.add(sub if _is_module(sub) else imp.module)
    return found


def _graph(kinds: tuple[str, ...] = ("module", "function")) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for mod in _imports(path, kinds):
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


EVERY_IMPORT = ("module", "function", "type-checking")


def test_no_import_cycle_between_modules():
    # function-level imports count (a cycle moved into a function is still a cycle), and
    # so do imports for type checkers (the layers' direction holds for them too). A
    # package's __init__ re-exports its modules; edges into an __init__ from its own
    # submodules would be cycles by construction, so they count as the package's parts
    graph = {n: {d for d in deps if not (_is_package_init(d) and n.startswith(d + "."))}
             for n, deps in _graph(EVERY_IMPORT).items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_import_cycle_between_packages():
    # kernels/feature.py imported gpscale.features in a function while features/ imported
    # kernels: no two modules formed a cycle, the two packages did
    top = {name: name.split(".")[1] if "." in name else "" for name in _graph()}
    graph: dict[str, set[str]] = {}
    for name, deps in _graph(EVERY_IMPORT).items():
        graph.setdefault(top[name], set()).update(top[d] for d in deps if top[d] != top[name])
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def _layer(module: str) -> int:
    """The index in LAYERS of a gpscale module's layer."""
    top = module.split(".")[1] if "." in module else ""
    found = [i for i, (_, tops) in enumerate(LAYERS) if top in tops]
    assert found, (f"{module} is in no layer: place gpscale.{top} in docs/design.md's "
                   "picture and table, and in LAYERS here")
    return found[0]


def test_imports_run_one_way_between_the_layers():
    wrong = []
    for name, deps in _graph(EVERY_IMPORT).items():
        wrong += [f"{name} ({LAYERS[_layer(name)][0]}) imports {d} ({LAYERS[_layer(d)][0]})"
                  for d in sorted(deps) if _layer(d) > _layer(name)]
    assert not wrong, wrong


def test_models_never_import_trainers():
    # the layers say so too; this is the rule a reader looks for by name
    for name, deps in _graph(EVERY_IMPORT).items():
        if name.startswith("gpscale.models"):
            assert not {d for d in deps if d.startswith("gpscale.train")}, (name, deps)


def test_linalg_imports_no_kernel_nor_feature_map():
    # K + σ²I over row blocks is the kernels' (kernels/operator.py); linalg solves with it
    for name, deps in _graph(EVERY_IMPORT).items():
        if name.startswith("gpscale.linalg"):
            assert not {d for d in deps if d.startswith(("gpscale.kernels",
                                                         "gpscale.features"))}, (name, deps)


def _picture() -> list[str]:
    """The names in the left column of docs/design.md's picture (its first code block),
    in order: the layers from the first row to the last."""
    block = DESIGN.read_text(encoding="utf-8").split("```")[1]
    names = []
    for line in block.splitlines():
        left = re.split(r" {3,}", line.strip())[0]
        names += [w for w in re.split(r"[\s,←↑]+", left) if w and w != "..."]
    return names


def test_the_layers_are_the_design_pictures():
    ranks = [_layer(f"gpscale.{name}") for name in _picture()]
    assert ranks == sorted(ranks), list(zip(_picture(), ranks))
    assert set(ranks) == set(range(len(LAYERS))), "a layer missing from the picture"


def test_the_design_table_names_every_module_of_the_package():
    table = [line.split("|")[1] for line in DESIGN.read_text(encoding="utf-8").splitlines()
             if line.startswith("| `")]
    named = {n.rstrip("/").removesuffix(".py") for cell in table
             for n in re.findall(r"`([^`]+)`", cell)}
    tops = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"} | \
        {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert tops <= named, f"not in docs/design.md's table: {sorted(tops - named)}"
    for top in tops:
        _layer(f"gpscale.{top}")


def _absolute_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import in ``path``, in functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or "", [a.name for a in node.names]))
    return found


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def test_the_library_never_imports_its_benchmarks():
    assert not list(PACKAGE.glob("bench/*.py")), "the benchmarks live in benchmarks/"
    for path in PACKAGE.rglob("*.py"):
        for line, mod, _ in _absolute_imports(path):
            assert mod.split(".")[0] != "benchmarks", f"{path.relative_to(PACKAGE)}:{line}"


def test_no_import_is_made_by_a_string():
    # an import by name (importlib.import_module, __import__) is an edge the tests of
    # the layers cannot see: the command line once imported dask and the benchmarks so
    for path, tree in _sources():
        for name in ("import_module", "__import__"):
            calls = [c.lineno for c in _calls(tree, name)]
            assert not calls, f"{path.relative_to(PACKAGE)}:{calls} calls {name}"


def test_the_library_never_edits_sys_path():
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "path" \
                    and getattr(node.value, "id", None) == "sys":
                raise AssertionError(f"{path.relative_to(PACKAGE)}:{node.lineno} uses sys.path")
            assert getattr(node, "attr", None) != "addsitedir", path


#: a comment that says an import steps around a cycle
CYCLE_WORDS = re.compile(r"\b(a?cycl\w*|circular)\b", re.IGNORECASE)


def _comments(text: str) -> dict[int, str]:
    return {tok.start[0]: tok.string
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT}


def test_no_import_is_moved_into_a_function_to_step_around_a_cycle():
    # the cycle test counts such imports; this finds the comment that would excuse one
    for path in PACKAGE.rglob("*.py"):
        comments = _comments(path.read_text(encoding="utf-8"))
        for imp in _all_imports(path):
            near = [comments.get(i, "") for i in (imp.line - 1, imp.line)]
            assert not any(CYCLE_WORDS.search(c) for c in near), \
                f"{path.relative_to(PACKAGE)}:{imp.line}: {near}"


def test_no_method_is_recognised_by_its_fit_function():
    # a method declares what it is (Method.exact, reads, cluster, chooses_kernel): an
    # identity test on fit_fn misses a wrapped or re-registered fit
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot))
                                                     for o in node.ops):
                sides = [node.left, *node.comparators]
                assert not any(getattr(s, "attr", None) == "fit_fn"
                               or getattr(s, "id", "").startswith("fit_") for s in sides), \
                    f"{path.relative_to(PACKAGE)}:{node.lineno}"


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


#: the longest a function may be, ``def`` to its last line, docstring included; the
#: command line's parser, a list of its arguments, is the one exception
MAX_FUNCTION_LINES = 100
LONG_FUNCTIONS_ALLOWED = {"cli.py:build_parser"}


def _long_functions(tree: ast.AST, where: str) -> list[str]:
    return [f"{where}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
            and f"{where}:{node.name}" not in LONG_FUNCTIONS_ALLOWED]


def test_no_function_is_over_a_hundred_lines_but_the_parser():
    found = [f for path, tree in _sources()
             for f in _long_functions(tree, str(path.relative_to(PACKAGE)))]
    assert not found, found


def test_the_function_length_rule_counts_a_long_function():
    def function(name: str, lines: int) -> ast.AST:  # ``def`` and lines - 1 statements
        body = "\n".join(f"    x{i} = {i}" for i in range(lines - 1))
        return ast.parse(f"def {name}():\n{body}\n")

    assert _long_functions(function("f", 101), "m.py") == ["m.py:f (101 lines)"]
    assert _long_functions(function("f", 100), "m.py") == []
    assert _long_functions(function("build_parser", 101), "cli.py") == []


def test_each_method_declares_its_options_once_as_a_dataclass():
    from gpscale.methods.options import options_class

    ours = {n: m for n, m in gpscale.METHODS.items()
            if m.fit_fn.__module__.startswith("gpscale.methods.")}
    missing = sorted(n for n, m in ours.items() if options_class(m) is None)
    assert not missing, missing
    assert {"admm-hocv", "admm-kfold", "admm-consensus"} <= set(ours)
