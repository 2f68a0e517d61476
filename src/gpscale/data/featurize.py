"""Strings to tensors for the discrete kernels of :mod:`gpscale.kernels.discrete`.

* SMILES → Morgan count fingerprints (RDKit, an optional extra: ``pip install
  'gpscale[chem]'``), for :class:`~gpscale.kernels.Tanimoto`; reaction SMILES → the
  counts of both sides side by side (:func:`reaction_counts`);
* equal-length sequences → integer codes, for :class:`~gpscale.kernels.Hamming`;
* any strings → k-mer count vectors over a vocabulary built from the (training) data,
  for :class:`~gpscale.kernels.Spectrum`.

Featurisers that build a vocabulary return it, so that test strings map consistently:
``X_test, _ = kmer_counts(test, k, vocab=vocab)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

CHEM_HINT = "pip install 'gpscale[chem]'"


def _strings(values, name: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{name} must be a sequence of strings, not a single string")
    out = list(values)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise ValueError(f"{name}[{i}] is {type(v).__name__}, expected str")
    return out


def _import_rdkit():
    try:
        from rdkit import Chem, RDLogger
        from rdkit.Chem import rdFingerprintGenerator
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(f"Morgan fingerprints need RDKit: {CHEM_HINT}") from err
    return Chem, RDLogger, rdFingerprintGenerator


def morgan_counts(
    smiles: Sequence[str],
    radius: int = 2,
    n_bits: int = 2048,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Morgan (ECFP-like) count fingerprints, shape (n, n_bits): entry f counts the atom
    environments of radius ≤ ``radius`` hashed to bit f (counts, not bits).

    Raises ValueError naming the first unparsable SMILES (row index and string), and
    ImportError with the install hint when RDKit is missing.
    """
    smiles = _strings(smiles, "smiles")
    out = morgan_rows(smiles, radius, n_bits, lambda i: f"smiles[{i}]")
    return torch.as_tensor(out, dtype=dtype, device=device)


def reaction_counts(
    reactions: Sequence[str],
    radius: int = 2,
    n_bits: int = 2048,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Count fingerprints of reaction SMILES ``reactants>agents>products`` (agents may
    be empty: ``A.B>>C``), shape (n, 2·n_bits): the Morgan counts of the left side
    (reactants and agents, summed) followed by those of the products.

    Both halves are non-negative counts, so the Tanimoto / MinMax and intersection
    kernels apply (they need non-negative inputs) and compare reactants with reactants
    and products with products; the signed difference fingerprint (products minus
    reactants) is the second half minus the first. ValueError naming the row for a
    string that is not a reaction or a part RDKit cannot parse.
    """
    reactions = _strings(reactions, "reactions")
    out = reaction_rows(reactions, radius, n_bits, lambda i: f"reactions[{i}]")
    return torch.as_tensor(out, dtype=dtype, device=device)


def is_reaction(s: str) -> bool:
    """Whether ``s`` is written as a reaction SMILES (it contains ``>``)."""
    return ">" in s


def morgan_rows(smiles: list[str], radius: int, n_bits: int,
                label: Callable[[int], str]) -> np.ndarray:
    """Morgan count fingerprints (n, n_bits) as float64; errors name row i as label(i)."""
    count = _counter(radius, n_bits)
    out = np.zeros((len(smiles), int(n_bits)), dtype=np.float64)
    with _quiet_rdkit():
        for i, s in enumerate(smiles):
            if is_reaction(s):
                raise ValueError(f"{label(i)} = {s!r} is a reaction SMILES (it has '>'), "
                                 "not a molecule: fingerprint reactions with reaction_counts, "
                                 "and keep reactions and molecules in separate columns")
            fp = count(s)
            if fp is None:
                raise ValueError(f"{label(i)} = {s!r} cannot be parsed by RDKit; fix or drop "
                                 "that row")
            out[i] = fp
    return out


def reaction_rows(reactions: list[str], radius: int, n_bits: int,
                  label: Callable[[int], str]) -> np.ndarray:
    """:func:`reaction_counts` as a float64 array; errors name row i as label(i)."""
    count = _counter(radius, n_bits)
    n_bits = int(n_bits)
    out = np.zeros((len(reactions), 2 * n_bits), dtype=np.float64)
    with _quiet_rdkit():
        for i, s in enumerate(reactions):
            sides = s.split(">")
            if len(sides) != 3 or not sides[0].strip() or not sides[2].strip():
                raise ValueError(f"{label(i)} = {s!r} is not a reaction SMILES "
                                 "'reactants>agents>products' (e.g. 'CCO.CC(=O)O>>CCOC(C)=O')"
                                 "; give reactions only, or molecules only")
            left = ".".join(p for p in sides[:2] if p.strip())
            for half, part in ((0, left), (1, sides[2])):
                fp = count(part)
                if fp is None:
                    raise ValueError(f"{label(i)} = {s!r}: RDKit cannot parse {part!r}; fix "
                                     "or drop that row")
                out[i, half * n_bits:(half + 1) * n_bits] = fp
    return out


def _counter(radius: int, n_bits: int) -> Callable[[str], np.ndarray | None]:
    """A function smiles -> count fingerprint (None when RDKit cannot parse it)."""
    if int(radius) < 0:
        raise ValueError(f"radius must be >= 0, got {radius}")
    if int(n_bits) < 1:
        raise ValueError(f"n_bits must be >= 1, got {n_bits}")
    Chem, _, rdfp = _import_rdkit()
    gen = rdfp.GetMorganGenerator(radius=int(radius), fpSize=int(n_bits))

    def count(s: str) -> np.ndarray | None:
        mol = Chem.MolFromSmiles(s) if s.strip() else None
        return None if mol is None else gen.GetCountFingerprintAsNumPy(mol)

    return count


@contextmanager
def _quiet_rdkit() -> Iterator[None]:
    """RDKit's parse errors are reported by our ValueError, not on stderr."""
    _, RDLogger, _ = _import_rdkit()
    RDLogger.DisableLog("rdApp.*")
    try:
        yield
    finally:
        RDLogger.EnableLog("rdApp.*")


def sequence_codes(
    seqs: Sequence[str],
    alphabet: Sequence[str] | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, list[str]]:
    """Integer codes (n, L) of equal-length sequences, code = index in ``alphabet``.

    ``alphabet`` defaults to the sorted characters of ``seqs``; pass the returned
    alphabet for test sequences. A character outside a given alphabet, or sequences of
    different lengths, raise ValueError naming the row.
    """
    seqs = _strings(seqs, "seqs")
    if not seqs:
        raise ValueError("seqs is empty")
    L = len(seqs[0])
    for i, s in enumerate(seqs):
        if len(s) != L:
            raise ValueError(f"seqs[{i}] has length {len(s)} but seqs[0] has length {L}; "
                             "the Hamming kernel needs equal-length (aligned) sequences")
    if alphabet is None:
        alphabet = sorted(set("".join(seqs)))
    alphabet = list(alphabet)
    index = {c: j for j, c in enumerate(alphabet)}
    codes = np.empty((len(seqs), L), dtype=np.float64)
    for i, s in enumerate(seqs):
        try:
            codes[i] = [index[c] for c in s]
        except KeyError as err:
            raise ValueError(f"seqs[{i}] contains {err.args[0]!r}, which is not in the "
                             "alphabet") from None
    return torch.as_tensor(codes, dtype=dtype, device=device), alphabet


def kmer_counts(
    seqs: Sequence[str],
    k: int = 3,
    vocab: dict[str, int] | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, dict[str, int]]:
    """k-mer count vectors (the spectrum-kernel feature map φ_k) over a vocabulary.

    Returns (counts, vocab) with counts of shape (n, len(vocab) + 1). ``vocab`` (k-mer →
    column) is built from ``seqs`` in order of first appearance unless given. The last
    column holds the Euclidean norm of the counts of k-mers missing from ``vocab``
    (zero for the strings the vocabulary was built from), so ‖φ‖ — and hence the
    normalised :class:`~gpscale.kernels.Spectrum` kernel between a new string and any
    vocabulary string — is exact; only the similarity between two new strings through
    their unseen k-mers is approximated (by the product of those norms).
    """
    seqs = _strings(seqs, "seqs")
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    k = int(k)
    build = vocab is None
    vocab = {} if vocab is None else dict(vocab)
    if not build and sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError("vocab must map k-mers to the columns 0..len(vocab)-1")
    rows: list[dict[str, int]] = []
    for s in seqs:
        c: dict[str, int] = {}
        for p in range(len(s) - k + 1):
            w = s[p : p + k]
            c[w] = c.get(w, 0) + 1
            if build and w not in vocab:
                vocab[w] = len(vocab)
        rows.append(c)
    out = np.zeros((len(seqs), len(vocab) + 1), dtype=np.float64)
    for i, c in enumerate(rows):
        unseen = 0.0
        for w, v in c.items():
            j = vocab.get(w)
            if j is None:
                unseen += v * v
            else:
                out[i, j] = v
        out[i, -1] = np.sqrt(unseen)
    return torch.as_tensor(out, dtype=dtype, device=device), vocab
