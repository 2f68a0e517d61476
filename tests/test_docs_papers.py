"""docs/papers.md maps paper equations to code and tables to reports: every
`src/gpscale/<file>.py[:name]` or `benchmarks/<file>.py[:name]` and every report folder or
file it names must exist, so that a rename or a move fails here instead of leaving the
map stale. The same holds for the reports that docs/benchmarks.md and the README cite."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "papers.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
#: the pages whose report folders and files are checked (docs/design.md describes the
#: layout the package is moving to, so its folder names are not checked here)
PAGES = (DOC, BENCHMARKS, ROOT / "README.md")
#: `src/gpscale/path/file.py` or `src/gpscale/path/file.py:Name` or `…:Class.member`, or
#: the same under `benchmarks/` (the name group is "" for a file reference)
REF = re.compile(r"`((?:src/gpscale|benchmarks)/[\w/]+\.py)"
                 r"(?::([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?))?`")


def references() -> list[tuple[str, str]]:
    return sorted(set(REF.findall(DOC.read_text(encoding="utf-8"))),
                  key=lambda r: (r[0], r[1]))


def _defined(body: list[ast.stmt]) -> set[str]:
    """Names bound at this level: functions, classes and assignment targets."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@cache
def _module(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)


def _resolve(path: str, name: str) -> bool:
    body = _module(path).body
    head, _, member = name.partition(".")
    if not member:
        return head in _defined(body)
    cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == head), None)
    return cls is not None and member in _defined(cls.body)


def test_the_map_names_code():
    text = DOC.read_text(encoding="utf-8")
    spans = re.findall(r"`(src/[^`]*)`", text)
    bad = [s for s in spans if not REF.fullmatch(f"`{s}`")]
    assert not bad, f"malformed code references in {DOC.name}: {bad}"
    refs = references()
    assert len(refs) > 100, f"only {len(refs)} code references found in {DOC}"
    assert sum(1 for _, name in refs if name) > 100


@pytest.mark.parametrize("path,name", references(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_reference_exists(path: str, name: str):
    assert (ROOT / path).is_file(), f"{DOC.name} names {path}, which does not exist"
    if name:
        assert _resolve(path, name), f"{DOC.name} names {path}:{name}, which is not defined there"


#: a backticked folder (`name/`), report (`name.md`, `name.jsonl`) or glob of reports
#: (`benchmarks/results/name-*`), outside src/
PLACE = re.compile(r"`([\w.*-]+(?:/[\w.*-]+)*(?:/|\.md|\.jsonl)|[\w.-]+(?:/[\w.*-]+)+\*)`")
#: where a bare place name may live: the repository, the reports, the package
PLACE_ROOTS = (ROOT, ROOT / "benchmarks" / "results", ROOT / "src" / "gpscale")


def places(page: Path = DOC) -> list[str]:
    return sorted(set(PLACE.findall(page.read_text(encoding="utf-8"))))


def test_the_map_names_reports():
    assert sum(1 for p in places() if p.startswith(("stochastic-", "admm-", "cholqr"))) > 20


def test_the_results_page_names_reports():
    reports = [p for p in places(BENCHMARKS) if p.startswith("benchmarks/results/")]
    assert len(reports) > 10, reports
    assert "benchmarks/results/" in places(ROOT / "README.md")


@pytest.mark.parametrize("page,place", [(page, p) for page in PAGES for p in places(page)],
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_place_exists(page: Path, place: str):
    assert any(any(root.glob(place.rstrip("/"))) for root in PLACE_ROOTS), (
        f"{page.name} names {place}, which is neither under the repository, "
        f"benchmarks/results/ nor src/gpscale/")
