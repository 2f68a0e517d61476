"""The README is a user's guide whose examples run, so they cannot go stale (issue 23).

Every fenced ``bash`` / ``sh`` / ``shell`` / ``python`` block of README.md and of the
pages under docs/ is run in a fresh temporary folder that holds small data under the
names the README uses (``train.csv``, ``test.csv``, ``parts/``, ``new/``, ...; see
:func:`make_files`): a shell block as one ``bash -e`` script with the ``gpscale`` console
script first on PATH, a python block as a script of its own after a prelude that defines
``X``, ``y`` and ``X_new``. A block is marked by an HTML comment on the line just before its fence:

* ``<!-- not run -->``: installation lines, a cluster to start by hand: never run here;
* ``<!-- slow -->``: run only with ``-m slow``.

Besides, the README's first example is complete (it runs without the prelude) and prints
what the README shows under it (a ``text`` block marked ``<!-- output -->``); the README
names every method and kernel a user can ask for, and every relative link in it and in
docs/ reaches a file and a heading that exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the pages whose code blocks run: the README and the docs
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
SRC = ROOT / "src"
BIN = Path(sys.executable).parent  # where the gpscale console script lives
LANGS = {"bash": "sh", "sh": "sh", "shell": "sh", "console": "sh", "python": "python"}
MARKS = ("not run", "slow")
MARK = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    kind: str  # "sh" or "python"
    code: str
    line: int  # of the opening fence, 1-based
    mark: str | None
    page: str = "README.md"  # relative to the repository root

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.kind}"


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The fenced code blocks of ``text`` in a language of :data:`LANGS`, each with the
    marker comment of the nearest non-blank line before its fence (or None)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        m = re.match(r"^\s*```\s*([\w+-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1).lower()
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if lang not in LANGS:
            continue
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARK.match(before)
        out.append(Block(LANGS[lang], textwrap.dedent("\n".join(body)) + "\n", start + 1,
                         marker.group(1) if marker else None, page))
    return out


BLOCKS = [b for page in PAGES for b in readme_blocks(page.read_text(encoding="utf-8"),
                                                      page.relative_to(ROOT).as_posix())]


def test_blocks_are_found_and_markers_are_known():
    in_readme = [b for b in BLOCKS if b.page == "README.md"]
    assert any(b.mark is None and b.kind == "sh" for b in in_readme)
    assert any(b.mark is None and b.kind == "python" for b in in_readme)
    unknown = [f"{b.id}: <!-- {b.mark} -->" for b in BLOCKS
               if b.mark is not None and b.mark not in MARKS]
    assert not unknown, f"marker comments must be one of {MARKS}: {unknown}"


def test_block_parser_reads_fences_languages_and_markers():
    text = ("intro\n\n<!-- not run -->\n```bash\npip install x\n```\n\n```python\n"
            "a = 1\n```\n```text\nnot code\n```\n<!-- slow -->\n\n```sh\n  gpscale demo\n```\n")
    got = readme_blocks(text)
    assert [(b.kind, b.code, b.line, b.mark) for b in got] == [
        ("sh", "pip install x\n", 4, "not run"), ("python", "a = 1\n", 8, None),
        ("sh", "gpscale demo\n", 16, "slow")]


# -- small data under the README's file names ----------------------------------------------
def _table(n: int, seed: int, target: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 3))
    cols = {f"x{j + 1}": X[:, j] for j in range(3)}
    if target:
        cols["y"] = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return cols


def _csv(path: Path, cols: dict) -> None:
    rows = zip(*cols.values())
    path.write_text(",".join(cols) + "\n" + "".join(
        ",".join(v if isinstance(v, str) else repr(float(v)) for v in r) + "\n" for r in rows))


def make_files(folder: Path) -> None:
    """The inputs the README's examples name. Add a file here when an example needs one."""
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    _csv(folder / "train.csv", _table(80, 0))
    _csv(folder / "test.csv", _table(20, 1, target=False))
    for name, parts, target in (("parts", 3, True), ("new", 2, False)):
        (folder / name).mkdir()
        for k in range(parts):
            pq.write_table(pa.table(_table(100, 10 * parts + k, target)),
                           folder / name / f"part-{k}.parquet")
    rng = np.random.default_rng(2)
    # 150 molecules: enough for the README's m = 128 inducing points
    chains = ["C" * k + tail for k in range(1, 31) for tail in ("", "O", "N", "Cl", "=O")]
    _csv(folder / "molecules.csv",
         {"id": [f"m{i}" for i in range(len(chains))], "smiles": chains,
          "y": [len(s) + 0.1 * rng.standard_normal() for s in chains]})
    _csv(folder / "new.csv", {"id": ["n0", "n1", "n2"], "smiles": ["CCCO", "CCN", "CCCCCl"]})
    n = 120  # a table as it comes: an id, a text category, ISO dates, a number with gaps
    city = rng.choice(["Austin", "Dallas", "El Paso"], n)
    size = rng.uniform(50, 200, n)
    days = rng.integers(0, 700, n)
    per_m2 = np.array([{"Austin": 3.0, "Dallas": 2.0, "El Paso": 1.5}[c] for c in city])
    price = size * per_m2 + 0.1 * days + rng.normal(0, 5, n)
    _csv(folder / "houses.csv", {
        "listing": [f"L{i:04d}" for i in range(n)], "city": list(city),
        "sold": [str(np.datetime64("2023-01-01") + int(d)) for d in days],
        "size": ["" if i % 10 == 3 else repr(float(v)) for i, v in enumerate(size)],
        "price": price})
    seqs = ["".join(rng.choice(list("ACDEFGHIK"), 12)) for _ in range(40)]
    for name, target in (("sequences.csv", "y"), ("mutants.csv", "fitness")):
        _csv(folder / name, {"sequence": seqs,
                             target: [s.count("A") + 0.1 * rng.standard_normal() for s in seqs]})


PRELUDE = """\
import numpy as np
import gpscale

_rng = np.random.default_rng(0)
X = _rng.uniform(-3, 3, (80, 3))
y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * _rng.standard_normal(80)
X_new = _rng.uniform(-3, 3, (10, 3))
"""


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess:
    # as from a checkout: the library from src/, the benchmarks package from the root
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
               [str(SRC), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
           "MPLBACKEND": "Agg"}
    if block.kind == "python":
        script = folder / "readme_block.py"
        script.write_text(PRELUDE + "\n" + block.code)
        cmd = [sys.executable, str(script)]
    else:
        script = folder / "readme_block.sh"
        script.write_text("set -e -o pipefail\n" + block.code)
        cmd = ["bash", str(script)]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=900)


def _params():
    for b in BLOCKS:
        if b.mark == "not run":
            continue
        marks = [pytest.mark.slow] if b.mark == "slow" else []
        yield pytest.param(b, id=b.id, marks=marks)


@pytest.mark.parametrize("block", list(_params()))
def test_readme_block_runs(block, tmp_path):
    make_files(tmp_path)
    out = run_block(block, tmp_path)
    assert out.returncode == 0, (
        f"{block.id} failed (exit {out.returncode}):\n{block.code}\n--- stdout\n"
        f"{out.stdout[-2000:]}\n--- stderr\n{out.stderr[-3000:]}")
    for name in re.findall(r"--out\s+([\w.][\w./-]*)", block.code):  # "-" is stdout
        assert (tmp_path / name).exists(), f"{block.id}: {name} was not written"


# -- the README is a guide, and the pages link up ---------------------------------------------
def test_readme_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    for command in ("make demo", "make test"):  # the two commands promised on a fresh machine
        assert f"\n{command}" in text, f"README.md lost `{command}`"


def _shown_output(text: str) -> str:
    """The README's ``text`` block marked ``<!-- output -->``: what its first example
    prints."""
    m = re.search(r"<!--\s*output\s*-->\s*\n```text\n(.*?)```", text, re.S)
    assert m, "README.md shows no output (a ```text block after <!-- output -->)"
    return m.group(1)


NUMBER = re.compile(r"-?\d+\.\d+")


def test_the_first_example_is_complete_and_prints_what_the_readme_shows(tmp_path):
    text = README.read_text(encoding="utf-8")
    first = next(b for b in readme_blocks(text) if b.kind == "python")
    script = tmp_path / "first.py"
    script.write_text(first.code)  # no prelude: a reader copies it as it is
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    shown, printed = _shown_output(text), out.stdout
    # the words as shown; the numbers to the third decimal the example prints, give or
    # take rounding differences between machines
    assert NUMBER.sub("#", printed).split() == NUMBER.sub("#", shown).split(), printed
    np.testing.assert_allclose([float(v) for v in NUMBER.findall(printed)],
                               [float(v) for v in NUMBER.findall(shown)], atol=2e-3)


def test_readme_names_every_method_and_kernel():
    import gpscale
    from gpscale.kernels import KERNELS

    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w+-]+)`", text))
    missing = sorted((set(gpscale.METHODS) | set(KERNELS) | {"auto"}) - named)
    assert not missing, f"README.md does not name these methods / kernels: {missing}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+\s+(.*)$", text, re.M)}


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links():
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if not re.match(r"\w+:", target):  # http(s), mailto: not checked here
                yield page, target


def test_slug_follows_github():
    assert _slug("The exact GP's iterative path") == "the-exact-gps-iterative-path"
    assert _slug("What `auto` picks, and why") == "what-auto-picks-and-why"
    assert _slug("5. The exact ML-II baseline") == "5-the-exact-ml-ii-baseline"


@pytest.mark.parametrize("page,target", list(_links()),
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_relative_link_resolves(page: Path, target: str):
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.name} links to {target}: no such file"
    if anchor:
        assert anchor in _anchors(dest), f"{page.name} links to {target}: no such heading"

