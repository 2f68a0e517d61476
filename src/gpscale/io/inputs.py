"""A model's inputs made from one string column, and a saved model's inputs read the way
it was trained.

* SMILES (``smiles=COLUMN``): Morgan count fingerprints of molecules, or of reactions
  ``reactants>agents>products`` (the counts of both sides side by side, see
  :func:`gpscale.data.featurize.reaction_counts`), for the Tanimoto / MinMax kernels;
* sequences (``sequence=COLUMN``): integer codes of aligned, equal-length sequences for
  the Hamming kernel, or k-mer count vectors for the spectrum kernel (chosen by the
  kernel).

The settings (column, radius, bits, alphabet, vocabulary) are a :class:`StringInputs`;
the :class:`~gpscale.predictor.Predictor` saves them, so that ``gpscale predict``
featurises new rows the same way (:func:`prediction_source`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..data.featurize import is_reaction, kmer_counts, morgan_rows, reaction_rows
from ..kernels import Hamming, Kernel, Spectrum, make_kernel, mixed_kernel
from .batch import Batch, Columns, Origin, Partition
from .encoding import TableEncoding
from .source import Source, open_source

__all__ = ["StringInputs", "open_strings", "training_source", "prediction_source",
           "inputs_from_state", "table_inputs", "table_kernel"]

#: kernel names for tables with categorical columns -> the stationary factor of
#: :func:`gpscale.kernels.mixed_kernel` (ARD on the other columns, one exchangeable factor
#: per categorical column). Not the default: with the exact GP on 1600 rows it matched
#: ARD on the one-hot columns (RMSE 0.94-1.03x of it over four tables and two seeds), but
#: having neither a spectral density nor tiled products it steers method="auto" to
#: cholqr-vfe, several times slower than sgpr at 4000 rows for the same accuracy
TABLE_KERNELS = {"rbf-ard-cat": "rbf", "matern52-ard-cat": "matern52"}

#: the kernel each kind of string column gets when none is named
DEFAULT_KERNELS = {"smiles": "tanimoto", "sequence": "hamming"}

Label = Callable[[int], str]


@dataclass
class StringInputs:
    """How one string column becomes the inputs X: ``encoding`` ``"morgan"``,
    ``"reaction"`` (SMILES), ``"codes"`` or ``"kmers"`` (sequences)."""

    kind: str
    column: str
    encoding: str
    radius: int = 2
    n_bits: int = 2048
    k: int = 3
    length: int | None = None        # codes: positions per sequence
    alphabet: list[str] | None = None  # codes: characters, code = index
    vocab: dict[str, int] | None = field(default=None, repr=False)  # kmers: k-mer -> column

    @classmethod
    def learn(cls, kind: str, column: str, strings: list[str], label: Label,
              kernel: str | Kernel | None = None, radius: int = 2, n_bits: int = 2048,
              k: int = 3) -> StringInputs:
        """The settings for the training strings (alphabet, vocabulary, reaction or not)."""
        if kind not in DEFAULT_KERNELS:
            raise ValueError(f"kind must be 'smiles' or 'sequence', got {kind!r}")
        _check_strings(strings, label)
        if not strings:
            raise ValueError(f"column {column!r} has no rows")
        if kind == "smiles":
            encoding = "reaction" if is_reaction(strings[0]) else "morgan"
            return cls(kind, column, encoding, radius=int(radius), n_bits=int(n_bits))
        if _sequence_encoding(kernel) == "kmers":
            _, vocab = kmer_counts(strings, k)
            return cls(kind, column, "kmers", k=int(k), vocab=vocab)
        length = len(strings[0])
        for i, s in enumerate(strings):
            if len(s) != length:
                raise ValueError(f"{label(i)} has length {len(s)} but the first sequence has "
                                 f"{length}; the Hamming kernel needs aligned sequences of "
                                 "equal length (or use --kernel spectrum, on k-mer counts)")
        return cls(kind, column, "codes", length=length,
                   alphabet=sorted(set("".join(strings))))

    @property
    def num_features(self) -> int:
        return {"morgan": self.n_bits, "reaction": 2 * self.n_bits,
                "codes": self.length or 0,
                "kmers": len(self.vocab or {}) + 1}[self.encoding]

    def describe(self) -> str:
        return {"morgan": f"Morgan count fingerprints (radius {self.radius}, {self.n_bits} "
                          "bits)",
                "reaction": f"reaction fingerprints (reactant and product Morgan counts, "
                            f"radius {self.radius}, 2 x {self.n_bits} bits)",
                "codes": f"integer codes of {self.length}-character sequences",
                "kmers": f"{self.k}-mer counts ({len(self.vocab or {})} k-mers)",
                }[self.encoding] + f" of column {self.column!r}"

    def transform(self, strings: list[str], label: Label) -> np.ndarray:
        """X (n, :attr:`num_features`) float64 for ``strings``; errors name the row."""
        _check_strings(strings, label)
        if self.encoding == "morgan":
            return morgan_rows(strings, self.radius, self.n_bits, label)
        if self.encoding == "reaction":
            return reaction_rows(strings, self.radius, self.n_bits, label)
        if self.encoding == "kmers":
            return kmer_counts(strings, self.k, vocab=self.vocab)[0].numpy()
        return self._codes(strings, label)

    def _codes(self, strings: list[str], label: Label) -> np.ndarray:
        index = {c: j for j, c in enumerate(self.alphabet or [])}
        unseen = len(index)  # a character never trained on differs from all of them
        out = np.empty((len(strings), self.length or 0), dtype=np.float64)
        for i, s in enumerate(strings):
            if len(s) != self.length:
                raise ValueError(f"{label(i)} has length {len(s)}; the model's sequences "
                                 f"have {self.length} positions (the Hamming kernel compares "
                                 "aligned sequences of equal length)")
            out[i] = [index.get(c, unseen) for c in s]
        return out

    def state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> StringInputs:
        return cls(**state)


def _check_strings(strings: list[Any], label: Label) -> None:
    for i, s in enumerate(strings):
        if not isinstance(s, str):
            what = "empty (a missing value)" if s is None else f"a {type(s).__name__}"
            raise ValueError(f"{label(i)} is {what}, not a string; fix or drop that row")


def _sequence_encoding(kernel: str | Kernel | None) -> str:
    k = make_kernel(kernel if kernel is not None else DEFAULT_KERNELS["sequence"], 1)
    kinds = {type(m) for m in k.modules()}
    if Spectrum in kinds:
        return "kmers"
    if Hamming in kinds:
        return "codes"
    raise ValueError(f"a sequence column is read as integer codes for the 'hamming' kernel "
                     f"or as k-mer counts for the 'spectrum' kernel; kernel {kernel!r} is "
                     "neither")


def _labeller(column: str, origin: Origin, start: int) -> Label:
    def label(i: int) -> str:
        return f"column {column!r} {origin.at([start + i])[0]} of {origin.name}"
    return label


@dataclass(eq=False, repr=False)
class StringPartition(Partition):
    """A partition whose string column ``spec.column`` becomes X; ``keep`` columns are
    carried along as they are."""

    inner: Partition
    spec: StringInputs
    keep: tuple[str, ...] = ()

    @property
    def origin(self) -> Origin:
        return self.inner.origin

    @property
    def num_rows(self) -> int:
        return self.inner.num_rows

    def known_rows(self) -> int | None:
        return self.inner.known_rows()

    def batches(self, rows: int) -> Iterator[Batch]:
        done = 0
        for b in self.inner.batches(rows):
            strings = b.keep[self.spec.column].to_pylist()
            X = self.spec.transform(strings, _labeller(self.spec.column, self.origin, done))
            done += len(b)
            yield Batch(X, b.y, {k: v for k, v in b.keep.items() if k in self.keep})


def open_strings(data: Any, column: str, kind: str | None = None,
                 target: str | None = None, kernel: str | Kernel | None = None,
                 keep: Sequence[str] = (), spec: StringInputs | None = None,
                 **settings: Any) -> Source:
    """A :class:`Source` whose inputs are made from the string column ``column`` of
    ``data`` (files or a data frame, as :func:`open_source`): ``kind`` ``"smiles"`` or
    ``"sequence"`` with ``settings`` (``radius``, ``n_bits`` for SMILES; ``k`` for
    k-mers), learned from the rows (one pass over that column); or ``spec``, the
    settings of a trained model. ``source.inputs`` holds the settings."""
    raw = open_source(data, target=target, columns=[], keep=[column, *keep])
    if spec is None:
        if kind is None:
            raise ValueError("give kind='smiles' or kind='sequence' (or spec=)")
        strings: list[Any] = []
        labels: list[tuple[int, Label]] = []
        for p in raw.partitions():
            done = 0
            for b in p.batches(raw.default_rows()):
                labels.append((len(strings), _labeller(column, p.origin, done)))
                strings += b.keep[column].to_pylist()
                done += len(b)

        def label(i: int) -> str:
            start, lab = next((s, f) for s, f in reversed(labels) if s <= i)
            return lab(i - start)

        spec = StringInputs.learn(kind, column, strings, label, kernel, **settings)
    parts = [StringPartition(p, spec, tuple(keep)) for p in raw.partitions()]
    cols = Columns(tuple(f"{column}[{j}]" for j in range(spec.num_features)), target,
                   tuple(keep), named=False)
    source = Source(parts, cols, raw.description, None, raw.target_name)
    source.inputs = spec
    return source


def training_source(data: Any, target: str, kernel: str | None = None,
                    smiles: str | None = None, sequence: str | None = None,
                    keep: Sequence[str] = (), columns: Sequence[str] | None = None,
                    exclude: Sequence[str] = (), categorical: Sequence[str] = (),
                    date_features: Any = "days", client: Any = None) -> tuple[Source, str]:
    """The training rows and the kernel name for ``gpscale fit``: every column but the
    target and ``exclude`` (or ``columns``), encoded as a table needs
    (:mod:`gpscale.io.encoding`; kernel default ``auto``: chosen from the data), or the
    inputs made from the string column ``smiles`` (default ``tanimoto``) or ``sequence`` (default
    ``hamming``); a table's survey pass on ``client``'s workers when given."""
    if smiles is not None and sequence is not None:
        raise ValueError("give one string column: --smiles or --sequence, not both")
    if smiles is None and sequence is None:
        return open_source(data, target=target, columns=columns, exclude=exclude, keep=keep,
                           categorical=categorical, date_features=date_features,
                           client=client), kernel or "auto"
    if columns is not None or exclude or categorical or date_features != "days":
        raise ValueError("--columns, --exclude, --categorical and --date-features choose "
                         "a table's input columns; with --smiles / --sequence the inputs "
                         "are that column's")
    kind, column = ("smiles", smiles) if smiles is not None else ("sequence", sequence)
    kernel = kernel or DEFAULT_KERNELS[kind]
    return open_strings(data, column, kind, target=target, kernel=kernel, keep=keep), kernel


def prediction_source(predictor: Any, data: Any, keep: Sequence[str] = ()) -> Source:
    """The inputs of ``data`` for ``predictor``, read as it was trained: its table
    columns encoded, its string column featurised with its saved settings, or its input
    columns by name (other columns are left out)."""
    spec = getattr(predictor, "inputs", None)
    if isinstance(spec, TableEncoding):
        return open_source(data, columns=spec.columns, keep=keep, encoding=spec)
    if spec is not None:
        return open_strings(data, spec.column, spec=spec, keep=keep)
    others = open_source(data, keep=keep).feature_names  # the columns not kept
    inputs = set(predictor.feature_names or ())
    names = predictor.match_columns(others + [c for c in keep if c in inputs], data)
    return open_source(data, columns=names, keep=keep)


def table_inputs(encoding: TableEncoding, frame: Any) -> np.ndarray:
    """X for the rows of a data frame, its columns encoded by ``encoding`` (found by
    name: other columns are left out)."""
    return open_source(frame, columns=encoding.columns, encoding=encoding).to_arrays()[0]


def table_kernel(name: str, d: int, inputs: Any) -> tuple[Kernel, str] | None:
    """(the kernel, its name) for a name of :data:`TABLE_KERNELS` on a table whose
    ``inputs`` (a :class:`TableEncoding`) have categorical columns: that stationary
    kernel on the other columns times an exchangeable kernel per categorical column;
    None for other names; ValueError for data without categorical columns."""
    base = TABLE_KERNELS.get(name.lower())
    if base is None:
        return None
    blocks = inputs.category_blocks() if isinstance(inputs, TableEncoding) else []
    if not blocks:
        raise ValueError(f"kernel {name!r} is for tables with categorical columns (text, "
                         f"category or --categorical columns), and these inputs have none; "
                         f"use {name.lower().removesuffix('-cat')!r}")
    return mixed_kernel(d, blocks, base), name.lower()


def inputs_from_state(state: dict[str, Any]) -> StringInputs | TableEncoding:
    """A saved :class:`StringInputs` or :class:`TableEncoding`."""
    if state.get("kind") == "table":
        return TableEncoding.from_state(state)
    return StringInputs.from_state(state)
