"""The package declares what it imports and imports what it declares (issue 23).

Read from the source (an AST walk, imports inside functions included) and from
pyproject.toml, so neither can drift: every third-party import of a core module is a core
dependency or an optional one behind a guard that names its extra; every declared
dependency is imported somewhere. A subprocess then imports the whole core package with
every optional dependency hidden. The wheel holds the library and not its benchmarks
(the top-level ``benchmarks/`` package, which imports only core packages and the
``bench`` and ``plot`` extras). The ``slow`` test installs the package into a fresh
venv (``pip install .``, needs the package registry) and runs ``gpscale demo``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from functools import cache
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
version = pytest.importorskip("packaging.version")

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "gpscale"
TESTS = ROOT / "tests"
BENCHMARKS = ROOT / "benchmarks"

#: import name -> distribution name, where they differ
DIST_OF_IMPORT = {"sklearn": "scikit-learn"}
#: declared for their command or as a pytest plugin (make test's -n), never imported
TOOLS = {"ruff", "pytest-xdist"}
#: sub-packages that belong to an extra: they may import that extra's packages at any level
EXTRA_MODULES = {"gpscale.sklearn": ("sklearn",)}
#: the extras the benchmarks may import besides the core packages
BENCH_EXTRAS = ("bench", "plot")
#: optional imports in core modules that are reached only with an object of that package
#: in hand, so the package is necessarily installed (no install hint needed)
REACHED_WITH_OWN_OBJECT = {
    ("gpscale.io.memory", "pandas"): "only after a pandas frame's to_numpy() failed",
}
#: the oldest versions known to work (found in a venv at the declared minimums): the
#: declared minimum may not be lower
KNOWN_MINIMUMS = {
    "scikit-learn": "1.6",  # sklearn.utils.validation.validate_data
    "numpy": "1.23.2",  # the first numpy with wheels for Python 3.11
    "statsmodels": "0.13.5",  # the first statsmodels with wheels for Python 3.11
    "pyarrow": "16",  # RecordBatch.rename_columns; 14 and 15 lack it
}


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _req(requirement: str) -> tuple[str, str | None]:
    """'dask[array]>=2024.1' -> ('dask', '2024.1')."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    low = re.search(r">=\s*([0-9][^,;\s]*)", requirement)
    return canon(name), low.group(1) if low else None


@cache
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def core() -> dict[str, str | None]:
    return dict(map(_req, project()["dependencies"]))


def extras() -> dict[str, dict[str, str | None]]:
    return {e: dict(map(_req, reqs)) for e, reqs in project()["optional-dependencies"].items()}


def extras_of(dist: str) -> set[str]:
    return {e for e, deps in extras().items() if dist in deps}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def extra_of_module(mod: str) -> tuple[str, ...] | None:
    for prefix, names in EXTRA_MODULES.items():
        if mod == prefix or mod.startswith(prefix + "."):
            return names
    return None


def _guarded(chain: list[ast.AST], node: ast.AST) -> bool:
    """``node`` sits in the body of a ``try`` whose handlers catch ImportError."""
    catches = {"ImportError", "ModuleNotFoundError", "Exception"}
    for parent, child in zip(chain, chain[1:] + [node]):
        if isinstance(parent, ast.Try) and child in parent.body:
            for h in parent.handlers:
                types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                if h.type is None or any(getattr(t, "id", None) in catches for t in types):
                    return True
    return False


def _visit(node: ast.AST, chain: list[ast.AST], path: Path, root: Path, found: list) -> None:
    names = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
        names = [node.module]
    for name in names:
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in ("gpscale", "benchmarks") or \
                (root == TESTS and (TESTS / f"{top}.py").exists()):
            continue
        found.append({
            "path": path, "line": node.lineno, "import": top,
            "dist": canon(DIST_OF_IMPORT.get(top, top)),
            "module": module_name(path) if root == PKG else path.stem,
            "in_function": any(isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef))
                               for c in chain),
            "guarded": _guarded(chain, node),
        })
    for child in ast.iter_child_nodes(node):
        _visit(child, chain + [node], path, root, found)


def third_party_imports(root: Path) -> list[dict]:
    """Every absolute import of a non-stdlib, non-gpscale package under ``root`` (for
    ``benchmarks``, its modules and not the reports' scripts)."""
    found: list[dict] = []
    for path in sorted(root.glob("*.py") if root == BENCHMARKS else root.rglob("*.py")):
        _visit(ast.parse(path.read_text(encoding="utf-8")), [], path, root, found)
    return found


def _where(rec: dict) -> str:
    return f"{rec['path'].relative_to(ROOT)}:{rec['line']} imports {rec['import']}"


# -- declared vs imported -------------------------------------------------------------------
def test_every_import_is_declared():
    declared = set(core()).union(*extras().values())
    bad = [_where(r) for root in (PKG, TESTS, BENCHMARKS) for r in third_party_imports(root)
           if r["dist"] not in declared]
    assert not bad, f"imported but declared nowhere in pyproject.toml: {bad}"


def test_every_declared_dependency_is_imported():
    imported = {r["dist"] for r in third_party_imports(PKG)}
    unused_core = set(core()) - imported
    assert not unused_core, f"core dependencies that src/gpscale never imports: {unused_core}"
    imported |= {r["dist"] for root in (TESTS, BENCHMARKS) for r in third_party_imports(root)}
    unused = {f"{e}: {d}" for e, deps in extras().items() for d in deps
              if d not in imported and d not in TOOLS}
    assert not unused, f"extras that neither src/gpscale, tests nor benchmarks import: {unused}"


def test_core_modules_import_only_core_packages_unguarded():
    bad = []
    for r in third_party_imports(PKG):
        extra = extra_of_module(r["module"])
        if r["dist"] in core():
            continue
        if extra is not None:  # the sub-package of an extra: that extra's packages
            if not extras_of(r["dist"]) & set(extra):
                bad.append(f"{_where(r)}, which is in none of the extras {extra}")
        elif not r["in_function"]:
            bad.append(f"{_where(r)} (optional) at module level: `import gpscale` would "
                       "need it")
    assert not bad, bad


def test_benchmarks_import_only_core_packages_and_the_bench_extras():
    allowed = set(core()).union(*(extras()[e] for e in BENCH_EXTRAS))
    bad = [_where(r) for r in third_party_imports(BENCHMARKS) if r["dist"] not in allowed]
    assert not bad, f"benchmarks import packages outside the extras {BENCH_EXTRAS}: {bad}"


def test_optional_imports_say_which_extra_to_install():
    """A core module that imports an optional package names ``gpscale[extra]`` in its
    message and guards the import (try/except ImportError or a find_spec check)."""
    bad = []
    by_module: dict[tuple[str, str], list[dict]] = {}
    for r in third_party_imports(PKG):
        if r["dist"] not in core() and extra_of_module(r["module"]) is None:
            by_module.setdefault((r["module"], r["dist"]), []).append(r)
    assert by_module, "no optional imports found: the AST walk is broken"
    for (mod, dist), recs in sorted(by_module.items()):
        if (mod, dist) in REACHED_WITH_OWN_OBJECT:
            continue
        text = recs[0]["path"].read_text(encoding="utf-8")
        hinted = set(re.findall(r"gpscale\[(\w+)\]", text))
        if not hinted & extras_of(dist):
            bad.append(f"{mod} imports {dist} but its messages name no extra holding it "
                       f"(extras that hold it: {sorted(extras_of(dist))}); found {hinted}")
        top = recs[0]["import"]
        if not (any(r["guarded"] for r in recs) or f'find_spec("{top}")' in text):
            bad.append(f"{mod}: the import of {dist} is not guarded by try/except "
                       "ImportError or find_spec")
    assert not bad, bad
    for key in REACHED_WITH_OWN_OBJECT:  # no stale exceptions
        assert key in by_module, f"{key} no longer imports that package; drop the entry"


def test_install_hints_name_declared_extras():
    texts = [p.read_text(encoding="utf-8") for p in PKG.rglob("*.py")]
    texts.append((ROOT / "README.md").read_text(encoding="utf-8"))
    named = {e for t in texts for e in re.findall(r"gpscale\[([\w,]+)\]", t)}
    unknown = {e for n in named for e in n.split(",")} - set(extras())
    assert not unknown, f"install hints name extras pyproject.toml lacks: {unknown}"


def test_declared_minimums_are_not_below_the_known_ones():
    declared = {**{d: v for deps in extras().values() for d, v in deps.items()}, **core()}
    for dist, known in KNOWN_MINIMUMS.items():
        for where, deps in [("dependencies", core()), *extras().items()]:
            if dist in deps:
                assert deps[dist] is not None, f"{where}: {dist} has no lower bound"
                assert version.Version(deps[dist]) >= version.Version(known), \
                    f"{where} asks for {dist}>={deps[dist]}, but {known} is the oldest that works"
    assert declared["scikit-learn"] and "scipy" not in core()


# -- the installed package without its extras ------------------------------------------------
_BLOCKED_RUN = textwrap.dedent("""
    import importlib, pkgutil, sys
    blocked = set(sys.argv[1].split(","))

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in blocked:
                raise ModuleNotFoundError(f"No module named {name!r} (hidden)")

    sys.meta_path.insert(0, Block())
    import gpscale
    import numpy as np

    optional = tuple(sys.argv[2].split(","))
    for m in pkgutil.walk_packages(gpscale.__path__, "gpscale."):
        if not m.name.startswith(optional):
            importlib.import_module(m.name)
    X = np.linspace(0, 1, 20)[:, None]
    model = gpscale.fit(X, np.sin(6 * X[:, 0]), method="exact", kernel="rbf", max_iter=5,
                        progress=False)
    assert model.predict(X).shape == (20,)
    for what, call in [
        ("sklearn", lambda: importlib.import_module("gpscale.sklearn")),
        ("chem", lambda: gpscale.data.morgan_counts(["CCO"])),
        ("distributed", lambda: gpscale.parallel.cluster.connect(workers=1).__enter__()),
        ("data", lambda: gpscale.data.sources._pooch()),
    ]:
        try:
            call()
        except ImportError as err:
            assert f"gpscale[{what}]" in str(err), (what, str(err))
        else:
            raise AssertionError(f"{what}: no ImportError with its extra hidden")
    print("ok")
""")


def test_core_package_works_with_every_optional_dependency_hidden():
    optional_imports = {"sklearn", "pooch", "matplotlib", "dask", "distributed", "gpytorch",
                        "linear_operator", "botorch", "rdkit", "pytest", "hypothesis"}
    assert {canon(DIST_OF_IMPORT.get(i, i)) for i in optional_imports} >= \
        set().union(*extras().values()) - set(core()) - TOOLS - {"scipy", "pandas"}
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", _BLOCKED_RUN, ",".join(sorted(optional_imports)),
         ",".join(EXTRA_MODULES)],
        capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# -- the wheel: the library, not its benchmarks ------------------------------------------------
def test_the_wheel_holds_the_library_and_no_benchmarks(tmp_path):
    """Built offline (``pip wheel --no-build-isolation``) from a copy of the checkout, so
    the build leaves nothing in the source tree."""
    tree = tmp_path / "tree"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "results")
    for name in ("src", "benchmarks"):
        shutil.copytree(ROOT / name, tree / name, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("gpscale-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("benchmarks/", "gpscale/bench/"))], names
    modules = {p.relative_to(SRC).as_posix() for p in PKG.rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules == {n for n in names if n.endswith(".py")}


# -- data downloads are checksummed ---------------------------------------------------------
def test_every_download_has_a_checksum_or_is_listed_as_unverified():
    from gpscale.data import sources

    unverified = set()
    for key, entry in sources.SOURCES.items():
        for r in entry.remotes:
            for h in (r.sha256, r.member_sha256):
                assert h is None or re.fullmatch(r"[0-9a-f]{64}", h), (key, h)
            if r.member is not None:
                assert r.member_sha256, f"{key}: archive member {r.member} has no sha256"
            if r.sha256 is None:
                unverified.add((key, r.url))
    assert unverified == set(sources.UNVERIFIED)
    # the README names exactly these, on its "Not checksummed:" line
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = re.search(r"^Not checksummed:(.*?)(?:\n\n|\Z)", readme, re.M | re.S)
    assert line, "README.md lacks its 'Not checksummed:' line"
    listed = set(re.findall(r"`([\w.-]+)`", line.group(1))) - {"data.csv.gz"}
    assert listed == {k.split("/")[-1] for k, _ in unverified}, listed


# -- a fresh venv: pip install . and gpscale demo ---------------------------------------------
@pytest.mark.slow
def test_pip_install_then_demo_in_a_fresh_venv(tmp_path):
    """``pip install .`` (core only, not editable) into a new venv, then ``gpscale demo``
    from outside the source tree. Needs the package registry; torch through
    constraints.txt (the CPU build where it is on pip's path)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, gpscale = venv / "bin" / "python", venv / "bin" / "gpscale"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["GPSCALE_DATA"] = str(tmp_path / "no-shared-data")  # nothing but the package
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
         str(ROOT)], capture_output=True, text=True, env=env, timeout=3000)
    assert install.returncode == 0, install.stderr[-3000:]
    listed = subprocess.run([str(py), "-m", "pip", "list"], capture_output=True, text=True,
                            env=env, check=True).stdout
    assert "matplotlib" not in listed and "scikit-learn" not in listed  # core only
    run = tmp_path / "run"
    run.mkdir()
    demo = subprocess.run([str(gpscale), "demo", "--max-iter", "60"], cwd=run,
                          capture_output=True, text=True, env=env, timeout=1200)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "RMSE" in demo.stdout and "no forecast plot" in demo.stdout, demo.stdout[-2000:]
    rmse = float(re.search(r"RMSE ([0-9.]+) ppm", demo.stdout).group(1))
    assert rmse < 5.0, demo.stdout[-2000:]
