"""A trained model with its scaler (:class:`Predictor`): predictions in the data's own
units, a readable summary, and the saved file (:meth:`Predictor.save`, :func:`load`).

The file is a ``torch.save`` of plain values and tensors, readable with
``weights_only=True``: ``model_class`` names a :class:`~gpscale.models.GPModel`
subclass, ``model_options`` holds its ``to_config()``, ``state_dict`` its
``saved_state()`` and ``kernel_config`` its kernel's ``Kernel.config()``. Format
version 2 keeps a feature model's statistics (ΦᵀΦ, Φᵀy, yᵀy, n) and a GRIEF model's
grid instead of the training rows; version 1 files, which hold the rows, still load.
``inputs`` (absent from older files) holds how the inputs were made from a string
column (:class:`gpscale.io.inputs.StringInputs`) or from a table's columns
(:class:`gpscale.io.encoding.TableEncoding`), None for numeric columns.
``reference`` (absent from older files and from models not fitted on a table): a
uniform sample of the encoded training rows, the values a table's gaps are integrated
over at prediction (:mod:`gpscale.io.gaps`); without it a gap is filled as before it
existed (a number's training mean, an unknown level's zeros).
``gap_loo`` (absent from older files and from fits other than the exact GP by Cholesky
on a table with gaps): the (2, d) leave-one-out α of each gap column and its row count
(:func:`gpscale.io.gaps.loo_scales`), which widens the intervals of rows with those
gaps; without it nothing is widened.
``gap_donors`` (absent from older files and from the same other fits): the training
rows (a sample), in the model's standardised units, by which a gap training had is
placed (:func:`gpscale.io.gaps.fill_gaps`); without it such a gap stays at the mean.
``written_by`` (absent from older files) names the gpscale version that wrote the file.
``checksum`` (absent from older files) is a sha256 over every other entry, tensors
included (:mod:`gpscale.checksum`), checked at load: a damaged file is refused.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from . import kernels as _kernels
from .checksum import CHECKSUM_KEY, check_content, content_digest
from .files import atomic_bytes
from .io.encoding import TableEncoding
from .io.gaps import (
    FILL_NEIGHBOURS,
    NEIGHBOURS,
    completions,
    fill_gaps,
    mixture,
    widening,
    widening_lines,
)
from .io.given import column_names, writable
from .io.inputs import StringInputs, inputs_from_state, table_inputs
from .kernels import Kernel
from .methods import METHODS
from .methods.auto import Choice
from .methods.kernel_choice import KernelChoice
from .models import GPModel, model_class
from .preprocessing import Standardizer
from .quality import quality_entry, saved_quality
from .train import FitResult
from .validation import as_matrix, check_device

__all__ = ["Predictor", "load", "FORMAT_VERSION", "column_names", "writable"]

FORMAT_VERSION = 2  #: version of the file written by :meth:`Predictor.save`
_FORMAT_TAG = "gpscale-model"


class Predictor:
    """A trained model with its scaler: predictions in the data's original units."""

    def __init__(self, model: nn.Module, scaler: Standardizer, result: FitResult,
                 method: str, kernel_name: str, standardize: bool = True,
                 feature_names: list[str] | None = None,
                 target_name: str | None = None,
                 inputs: StringInputs | TableEncoding | None = None,
                 choice: Choice | None = None,
                 kernel_choice: KernelChoice | None = None,
                 reference: np.ndarray | None = None,
                 gap_loo: np.ndarray | None = None,
                 gap_donors: np.ndarray | None = None) -> None:
        self.model, self.scaler, self.result = model, scaler, result
        self.method, self.kernel_name, self.standardize = method, kernel_name, standardize
        #: input column names and target name, when the training data had them
        self.feature_names, self.target_name = feature_names, target_name
        #: how the inputs were made from a string column (SMILES, sequences) or from a
        #: table's columns (categories, dates, missing values), or None
        self.inputs = inputs
        #: what method="auto" picked and why (gpscale.methods.auto.Choice), else None
        self.choice = choice
        #: the kernel family chosen from the data with kernel="auto", and every
        #: candidate's score (gpscale.methods.kernel_choice.KernelChoice), else None
        self.kernel_choice = kernel_choice
        #: encoded training rows (unscaled) a table's gaps are integrated over, or None
        self.reference = None if reference is None else np.asarray(reference, np.float64)
        #: each gap column's leave-one-out α and row count (2, d), which widen the
        #: intervals of rows with a gap training had (:mod:`gpscale.io.gaps`), or None
        self.gap_loo = None if gap_loo is None else np.asarray(gap_loo, np.float64)
        #: complete training rows (standardised) that place a gap training had, or None
        self.gap_donors = None if gap_donors is None else np.asarray(gap_donors, np.float64)

    @property
    def n_features(self) -> int:
        return int(np.asarray(self.scaler.x_mean).shape[0])

    @property
    def input_names(self) -> list[Any] | None:
        """The names of X's columns: a table's encoded columns (e.g. ``city=Austin``),
        else the input columns'."""
        if isinstance(self.inputs, TableEncoding):
            return self.inputs.names
        return self.feature_names

    @property
    def kernel(self) -> Kernel | None:
        return getattr(self.model, "kernel", None)  # feature-space models have none

    def match_columns(self, names: list[Any], what: str = "X") -> list[Any]:
        """The training inputs among ``names`` (minus the target), in their training
        order; other columns are left out; ValueError naming the inputs missing.
        Names match as they are (``0`` is not ``"0"``), except that all-text names (a
        file's header) match a model trained on non-text names by their text."""
        trained = [*(self.feature_names or []), self.target_name]
        key = (str if all(isinstance(c, str) for c in names)
               and not all(isinstance(c, str) for c in trained if c is not None) else _same)
        if self.target_name is not None:
            names = [c for c in names if key(c) != key(self.target_name)]
        if self.feature_names is None:
            if len(names) != self.n_features:
                raise ValueError(f"{what} has {len(names)} input columns but the model "
                                 f"takes {self.n_features}")
            return names
        given = {key(c): c for c in names}
        want = [key(c) for c in self.feature_names]
        missing = [c for c, k in zip(self.feature_names, want) if k not in given]
        if missing:
            raise ValueError(f"the columns of {what} do not match the model's inputs "
                             f"{self.feature_names} (matched by name): missing {missing}. "
                             "Rename or add the columns; pass a plain array to match them "
                             "by position")
        return [given[k] for k in want]

    def _inputs(self, X: Any) -> np.ndarray:
        if isinstance(self.inputs, TableEncoding) and column_names(X) is not None:
            return table_inputs(self.inputs, X)
        if isinstance(self.inputs, StringInputs) and (strings := self._strings(X)) is not None:
            return self.inputs.transform(strings, lambda i: f"X[{i}]")
        names = column_names(X)
        if names is not None and self.feature_names is not None:
            X = X[self.match_columns(names)]
        Xn = as_matrix(writable(X), "X").cpu().numpy()
        if Xn.shape[1] != self.n_features:
            raise ValueError(f"X has {Xn.shape[1]} columns but the model was trained on "
                             f"{self.n_features}")
        return Xn

    def _strings(self, X: Any) -> list[Any] | None:
        """The strings of the model's string column in X (a data frame with that column,
        or a sequence of strings), None when X holds something else."""
        column = self.inputs.column
        if column_names(X) is not None and column in column_names(X):
            return list(X[column])
        if isinstance(X, str):
            raise ValueError(f"X must be a sequence of strings ({self.inputs.kind}), not "
                             "a single string: wrap it in a list")
        if isinstance(X, (list, tuple)) or (isinstance(X, np.ndarray) and X.dtype.kind in "OUS"):
            return list(X)
        return None

    def predict(self, X: Any, return_std: bool = False,
                include_noise: bool = True) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Predictive mean at X (and standard deviation with ``return_std``), in the
        original units of y. ``include_noise``: std of a new observation y (default)
        rather than of the latent function f. A table row with a value of a kind
        training never saw (:mod:`gpscale.io.gaps`) is predicted over what it could be."""
        return self.predict_encoded(self._inputs(X), return_std, include_noise)

    def predict_encoded(self, X: np.ndarray, return_std: bool = False,
                        include_noise: bool = True
                        ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """:meth:`predict` for rows already encoded as the model's inputs (a table's
        rows from :func:`gpscale.io.inputs.prediction_source`, NaN marking gaps)."""
        X = np.asarray(X, dtype=np.float64)
        mean, var = self._predict_scaled(X, include_noise)
        if self.gap_loo is not None:  # rows with a gap training had: widened by its α
            factor = widening(X, self.gap_loo)
            if (rows := factor > 1.0).any():
                var_y = var[rows] if include_noise else \
                    self._predict_scaled(X[rows], include_noise=True)[1]
                var = var.copy()
                var[rows] += (factor[rows] - 1.0) * var_y  # y's times the factor
        mean = self.scaler.inverse_y(mean)
        if not return_std:
            return mean
        return mean, self.scaler.inverse_std(np.sqrt(np.clip(var, 0.0, None)))

    def _predict_scaled(self, X: np.ndarray, include_noise: bool
                        ) -> tuple[np.ndarray, np.ndarray]:
        """The mean and variance at encoded rows, in standardised units, as the model
        and the gaps' mixture give them (before any widening)."""
        Xs = self.scaler.transform_x(X)
        if self.gap_donors is not None and isinstance(self.inputs, TableEncoding):
            Xs = fill_gaps(Xs, self.inputs.gap_blocks(), self.gap_donors)  # as in training
        gapped = np.isnan(Xs).any(axis=1)
        if gapped.any() and self.reference is None:  # a file written before gaps
            Xs = self.scaler.transform_x(np.where(np.isnan(X), self._old_fill(), X))
            gapped[:] = False
        mean, var = self._model_predict(Xs[~gapped], include_noise)
        if gapped.any():
            mean, var = _merge(gapped, mean, var, *self._predict_gaps(Xs[gapped],
                                                                      include_noise))
        return mean, var

    def _model_predict(self, Xs: np.ndarray, include_noise: bool
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The model's mean and variance at scaled inputs, as float64 arrays."""
        if len(Xs) == 0:
            return np.empty(0), np.empty(0)
        like = next(t for t in [*self.model.parameters(), *self.model.buffers()]
                    if t.is_floating_point())
        with torch.no_grad():
            mean, var = self.model.predict(torch.as_tensor(Xs, dtype=like.dtype,
                                                           device=like.device),
                                           include_noise=include_noise)
        return tuple(t.detach().to("cpu", torch.float64).numpy() for t in (mean, var))

    def _predict_gaps(self, Xs: np.ndarray, include_noise: bool
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Rows with gaps: the mixture of the predictions at their completions from the
        reference rows (:func:`gpscale.io.gaps.completions`)."""
        reference = self.scaler.transform_x(self.reference)
        k = min(NEIGHBOURS, len(reference))
        means, variances = [], []
        for start in range(0, len(Xs), 1000):  # 1000·k completed rows at a time
            filled, _ = completions(Xs[start:start + 1000], reference, k)
            mean, var = self._model_predict(filled, include_noise)
            means.append(mean)
            variances.append(var)
        return mixture(np.concatenate(means), np.concatenate(variances), k)

    def _old_fill(self) -> np.ndarray:
        """What a model file without reference rows fills a gap with: a number's training
        mean, 0 in a one-hot block (the raw encoding's values)."""
        fill = np.zeros(self.n_features)
        if isinstance(self.inputs, TableEncoding):
            start = 0
            for code in self.inputs.codes:
                if code.kind != "category":
                    fill[start] = code.mean
                start += code.width
        return fill

    def summary(self) -> str:
        """Method, data, fit outcome and the hyperparameter table."""
        m = METHODS.get(self.method)
        raw = self.kernel.raw_columns(self.n_features) if self.kernel is not None else []
        units = ("the data's units" if not self.standardize else
                 "standardised units (y scaled to mean 0, std 1; X as given: the kernel "
                 "reads counts or codes)" if len(raw) == self.n_features else
                 "standardised units (X columns and y scaled to mean 0, std 1)")
        table = self.model.summary() if hasattr(self.model, "summary") else repr(self.model)
        title = getattr(self.model, "title", "")  # the solver's line: a header, not a row
        solver = f"model: {title}\n" if title and table.startswith(f"{title}\n") else ""
        table = table.removeprefix(solver[len("model: "):])
        made = f" ({self.inputs.describe()})" if self.inputs is not None else ""
        picked = f"picked by method='auto': {self.choice}\n" if self.choice else ""
        if self.kernel_choice is not None:
            picked += f"kernel chosen from the data: {self.kernel_choice}\n"
        return (f"gpscale predictor: method {self.method!r} ({m.description if m else '?'}),"
                f" kernel {self.kernel_name!r}\ninputs: {self.n_features}{made}"
                f"{' ' + str(self.feature_names) if self.feature_names else ''}, training "
                f"points: {getattr(self.model, 'n', '?')}\n{picked}"
                f"{self._quality_text()}fit: {self.result}\n{solver}"
                f"hyperparameters, in {units}:\n{table}")

    def _quality_text(self) -> str:
        """The training data's quality findings (:mod:`gpscale.quality`), one
        ``data quality:`` line each; empty when there are none or no report."""
        q = getattr(self.scaler, "quality", None)
        found = q.lines(self.input_names) if q is not None else []
        table = self.inputs.lines() if isinstance(self.inputs, TableEncoding) else []
        if self.gap_loo is not None and self.input_names is not None:
            table += widening_lines(self.gap_loo, self.input_names)
        placed = ([] if self.gap_donors is None else [
            f"missing numbers: each placed at its column's mean over the {FILL_NEIGHBOURS} "
            f"training rows nearest on the row's other columns (of {len(self.gap_donors)} "
            "kept), not at the training mean\n"])
        return "".join([*(f"column {line}\n" for line in table), *placed,
                        *(f"data quality: {line}\n" for line in found)])

    def __repr__(self) -> str:
        return (f"Predictor(method={self.method!r}, kernel={self.kernel_name!r}, "
                f"n_features={self.n_features}, standardize={self.standardize})")

    # -- persistence ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The saved form: tensors and plain Python values only, with the checksum of
        the rest (:func:`gpscale.checksum.content_digest`)."""
        if not isinstance(self.model, GPModel):
            raise ValueError(f"cannot save a {type(self.model).__name__}: models are saved "
                             "through the gpscale.models.GPModel contract (to_config / "
                             "from_config); subclass GPModel")
        saved = {
            "format": _FORMAT_TAG, "format_version": FORMAT_VERSION,
            "written_by": f"gpscale {_version()}",
            "method": self.method, "kernel_name": self.kernel_name,
            "kernel_config": _plain(self.kernel.config()) if self.kernel is not None else None,
            "model_class": type(self.model).__name__,
            "model_options": _plain(self.model.to_config()),
            "state_dict": {k: v.detach().cpu().clone()
                           for k, v in self.model.saved_state().items()},
            "scaler": _plain(self.scaler.state()), "standardize": self.standardize,
            "feature_names": self.feature_names, "target_name": self.target_name,
            "inputs": None if self.inputs is None else _plain(self.inputs.state()),
            "result": _plain(dataclasses.asdict(self.result)),
            "choice": None if self.choice is None else _plain(dataclasses.asdict(self.choice)),
            "kernel_choice": None if self.kernel_choice is None else _plain(
                dataclasses.asdict(self.kernel_choice)),
            **({} if self.reference is None
               else {"reference": torch.as_tensor(self.reference, dtype=torch.float64)}),
            **({} if self.gap_loo is None
               else {"gap_loo": torch.as_tensor(self.gap_loo, dtype=torch.float64)}),
            **({} if self.gap_donors is None
               else {"gap_donors": torch.as_tensor(self.gap_donors, dtype=torch.float64)}),
            **quality_entry(self),
        }
        return {**saved, CHECKSUM_KEY: content_digest(saved)}

    def to_bytes(self) -> bytes:
        """The saved file's bytes (:meth:`to_dict` through ``torch.save``)."""
        buf = io.BytesIO()
        torch.save(self.to_dict(), buf)
        return buf.getvalue()

    def save(self, path: str | os.PathLike) -> Path:
        """Write the predictor to ``path`` (a torch file readable with
        ``weights_only=True``); a failed save leaves nothing behind. The file is made in
        memory first and then written by :func:`gpscale.files.atomic_bytes`, so a full
        disk is an OSError that says so (``torch.save`` writing the file itself reports
        it as "unexpected pos")."""
        return atomic_bytes(path, self.to_bytes(), "model file")


def load(path: str | os.PathLike, device: torch.device | str | None = None) -> Predictor:
    """Read a predictor written by :meth:`Predictor.save` (optionally onto ``device``).
    ValueError, in one line, for a file that is not a gpscale model, is damaged (its
    content does not match its checksum, :mod:`gpscale.checksum`; a file written before
    the checksum is checked for nothing more than before), or comes from a newer
    gpscale."""
    device = check_device(device)
    if not (path := Path(path)).is_file():
        raise FileNotFoundError(f"model file {str(path)!r} not found")
    saved = _read(path)
    _check_version(saved.get("format_version", _MISSING), path)
    check_content(saved, str(path))
    try:
        pred = _rebuild(saved, path)
    except KeyError as err:
        raise ValueError(f"model file {str(path)!r} is damaged or not written by gpscale: "
                         f"missing key {err.args[0]!r}; fit the model again (gpscale fit "
                         "or Predictor.save)") from None
    except (TypeError, AttributeError, IndexError, RuntimeError) as err:
        raise ValueError(f"model file {str(path)!r} is damaged or not written by gpscale: "
                         f"{type(err).__name__}: {err}; fit the model again (gpscale fit "
                         "or Predictor.save)") from None
    if device is not None:
        pred.model = pred.model.to(device)
    return pred


#: the first bytes of every file torch.save writes (a zip archive)
_ZIP_MAGIC = b"PK\x03\x04"
_MISSING = object()


def _read(path: Path) -> dict[str, Any]:
    """The saved dictionary; ValueError when ``path`` is not a gpscale model file
    (torch's own message for a CSV or a text file is a paragraph about weights_only)."""
    with open(path, "rb") as f:
        head = f.read(len(_ZIP_MAGIC))
    if head != _ZIP_MAGIC:
        raise ValueError(f"{str(path)!r} is not a gpscale model file ({_looks_like(head)}); "
                         "give a file written by gpscale fit or Predictor.save")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means "not ours"
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ValueError(f"{str(path)!r} is not a gpscale model file, or it is damaged "
                         f"(torch.load could not read it: {type(err).__name__}: {first})") \
            from None
    if not isinstance(saved, dict) or saved.get("format") != _FORMAT_TAG:
        raise ValueError(f"{str(path)!r} is not a gpscale model file "
                         "(write one with gpscale fit or Predictor.save)")
    return saved


def _looks_like(head: bytes) -> str:
    if not head:
        return "it is empty"
    if head[:1] == b"\x80":
        return "it is a Python pickle, not the zip archive torch.save writes"
    if all(32 <= b < 127 or b in b"\t\r\n" for b in head):
        return "it is text, e.g. a CSV file; the model file is the --out of gpscale fit"
    return "it is not the zip archive torch.save writes"


def _check_version(version: Any, path: Path) -> None:
    """ValueError unless ``version`` is one this gpscale reads (1 up to FORMAT_VERSION):
    a newer version needs a newer gpscale; anything else (missing, not a whole number,
    below 1) no gpscale ever wrote, so the file is damaged."""
    if isinstance(version, int) and not isinstance(version, bool):
        if 1 <= version <= FORMAT_VERSION:
            return
        if version > FORMAT_VERSION:
            raise ValueError(f"{str(path)!r} has format version {version}; this gpscale "
                             f"reads versions 1 to {FORMAT_VERSION}: upgrade gpscale")
    found = ("it has no format version" if version is _MISSING else
             f"format version {version!r} is not one gpscale writes (1 to "
             f"{FORMAT_VERSION})")
    raise ValueError(f"model file {str(path)!r} is damaged: {found}; fit the model again "
                     "(gpscale fit or Predictor.save)")


def _rebuild(saved: dict[str, Any], path: Path) -> Predictor:
    """The predictor a loaded file describes (KeyError etc. when it is damaged)."""
    try:
        cls = model_class(saved["model_class"])
    except ValueError as err:
        raise ValueError(f"{str(path)!r} holds a model this gpscale cannot rebuild: {err}") \
            from None
    state = saved["state_dict"]
    cfg = saved["kernel_config"]
    kernel = _kernels.from_config(cfg) if cfg is not None else None
    model = cls.from_config(saved["model_options"], state, kernel)
    model.load_state_dict(state)
    fields = {f.name for f in dataclasses.fields(FitResult)}
    result = FitResult(**{k: v for k, v in saved["result"].items() if k in fields})
    scaler = dataclasses.replace(_scaler(saved["scaler"], path), quality=saved_quality(saved))
    return Predictor(model, scaler, result,
                     method=saved["method"],
                     kernel_name=saved["kernel_name"], standardize=saved["standardize"],
                     feature_names=saved["feature_names"], target_name=saved["target_name"],
                     inputs=_string_inputs(saved.get("inputs"), path),
                     choice=_choice(saved.get("choice")),
                     kernel_choice=_kernel_choice(saved.get("kernel_choice")),
                     reference=_reference(saved.get("reference"), len(scaler.x_mean)),
                     gap_loo=_gap_loo(saved.get("gap_loo"), len(scaler.x_mean)),
                     gap_donors=_reference(saved.get("gap_donors"), len(scaler.x_mean),
                                           "the complete rows that place its gaps (gap_donors)"))


def _merge(gapped: np.ndarray, mean: np.ndarray, var: np.ndarray, gap_mean: np.ndarray,
           gap_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows without gaps (``mean``, ``var``) and with them, back in the rows' order."""
    out_mean, out_var = np.empty(len(gapped)), np.empty(len(gapped))
    out_mean[~gapped], out_var[~gapped] = mean, var
    out_mean[gapped], out_var[gapped] = gap_mean, gap_var
    return out_mean, out_var


def _reference(saved: Any, d: int, what: str = "its reference rows") -> np.ndarray | None:
    """The saved reference rows, or any saved rows ``what`` (None when absent); a
    TypeError (the file is damaged) unless a float matrix of finite values over the
    model's ``d`` inputs."""
    if saved is None:
        return None
    if not (isinstance(saved, torch.Tensor) and saved.ndim == 2 and saved.shape[1] == d
            and saved.shape[0] > 0 and saved.is_floating_point()
            and bool(torch.isfinite(saved).all())):
        raise TypeError(f"{what} are not a finite matrix over the model's inputs")
    return saved.numpy()


def _gap_loo(saved: Any, d: int) -> np.ndarray | None:
    """The saved leave-one-out α and row counts (None when absent); a TypeError (the
    file is damaged) unless a (2, d) float matrix of positive α and whole counts."""
    if saved is None:
        return None
    if not (isinstance(saved, torch.Tensor) and saved.is_floating_point()
            and tuple(saved.shape) == (2, d) and bool(torch.isfinite(saved).all())
            and bool((saved[0] > 0).all()) and bool((saved[1] >= 0).all())
            and bool((saved[1] == saved[1].round()).all())):
        raise TypeError("its leave-one-out widening (gap_loo) is not a (2, d) matrix of "
                        "positive factors and row counts over the model's inputs")
    return saved.numpy()


def _choice(saved: dict[str, Any] | None) -> Choice | None:
    """What ``method="auto"`` picked, as saved (None: the method was named, or the file
    predates saving it)."""
    return None if saved is None else Choice(**saved)


def _kernel_choice(saved: dict[str, Any] | None) -> KernelChoice | None:
    """The kernel family chosen from the data, as saved (None: the kernel was named)."""
    return None if saved is None else KernelChoice(**saved)


def _scaler(state: dict[str, Any], path: Path) -> Standardizer:
    """The saved scaler, after checking its numbers: a NaN or a zero scale would only
    surface later as a puzzling error about the new inputs."""
    for key in ("x_mean", "x_scale", "y_mean", "y_scale"):
        values = np.asarray(state[key], dtype=np.float64)
        bad = ~np.isfinite(values) | ((values <= 0) if key.endswith("scale") else False)
        if bad.any():
            raise ValueError(f"model file {str(path)!r} is damaged: its scaler's {key} holds "
                             f"{values[bad].ravel()[0]!r}; fit the model again (gpscale fit "
                             "or Predictor.save)")
    return Standardizer.from_state(state)


def _string_inputs(state: Any, path: Path) -> StringInputs | None:
    """The saved :class:`StringInputs` or :class:`TableEncoding` (files before them have
    none)."""
    if state is None:
        return None
    try:
        return inputs_from_state(state)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{str(path)!r}: its string-input settings cannot be read ({err}); "
                         "fit the model again") from None


# -- helpers --------------------------------------------------------------------------------
def _version() -> str:
    """The installed gpscale's version (from its package metadata)."""
    try:
        return importlib.metadata.version("gpscale")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def _same(name: Any) -> Any:
    return name


def _plain(obj: Any) -> Any:
    """``obj`` with numpy/torch scalars and arrays turned into Python values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (torch.Tensor, np.ndarray, np.generic)):
        return obj.tolist()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)
