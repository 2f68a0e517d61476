"""``gpscale info MODEL``: what a saved model is, in the data's own units.

The model is trained on standardised columns by default (x ↦ (x − mean_j)/s_j,
y ↦ (y − ȳ)/s_y; the scaler is saved with the model), so its hyperparameters are
reported both as trained and mapped back: a lengthscale or period of input column j
times s_j, a variance (signal, noise, feature weight) times s_y², a constant mean
ȳ + c·s_y. A lengthscale shared by several columns (an isotropic kernel) is one length
per column in the data's units. Values with no unit (a periodic kernel's lengthscale,
a rational-quadratic α, a Hamming lengthscale counted in mismatches) are unchanged;
anything else is shown as trained.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import torch
from torch import nn

from ..io.encoding import TableEncoding, day_text
from ..methods import METHODS
from ..params import positive_params
from ..predictor import Predictor, load
from ..quality import quality_state, saved_quality

__all__ = ["model_info", "info_text"]

#: (owning class name or "*", parameter) -> unit: "x" (input column units), "y2"
#: (variance in the target's units), "none" (no unit), "trained" (shown as trained)
_UNITS = {("Periodic", "lengthscale"): "none", ("LocallyPeriodic", "lengthscale"): "trained",
          ("Hamming", "lengthscale"): "none", ("Exchangeable", "theta"): "none",
          ("*", "lengthscale"): "x",
          ("*", "period"): "x", ("*", "alpha"): "none", ("*", "noise"): "y2",
          ("Scale", "outputscale"): "y2", ("ScaledFeatures", "outputscale"): "y2"}


def model_info(path: str | os.PathLike) -> dict[str, Any]:
    """A saved model described as plain values (what ``gpscale info --json`` prints)."""
    pred = load(path)
    saved = torch.load(path, map_location="cpu", weights_only=True)
    result = pred.result
    iterations = max((int(h.get("iter", 0)) for h in result.history), default=0)
    method = METHODS.get(pred.method)
    names = _column_names(pred)
    n = getattr(pred.model, "observations", getattr(pred.model, "n", None))
    distinct = getattr(pred.model, "n", None) if getattr(pred.model, "copies", None) else None
    return {
        "file": os.fspath(path),
        "format_version": saved.get("format_version"),
        "written_by": saved.get("written_by"),
        "method": pred.method,
        "method_description": method.description if method else None,
        "kernel": pred.kernel_name,
        "kernel_structure": _kernel_text(saved.get("kernel_config")),
        "model": type(pred.model).__name__,
        "model_options": saved.get("model_options"),
        "n": None if n is None else int(n),
        "distinct_inputs": None if distinct is None else int(distinct),
        "d": pred.n_features,
        "inputs": names,
        "target": pred.target_name,
        "standardized": bool(pred.standardize),
        "scaler": {"x_mean": _vec(pred.scaler.x_mean), "x_scale": _vec(pred.scaler.x_scale),
                   "y_mean": float(pred.scaler.y_mean), "y_scale": float(pred.scaler.y_scale)},
        "fit": {"objective": _num(result.objective), "iterations": iterations,
                "evaluations": int(result.n_evals), "time_s": _num(result.wall_s),
                "converged": bool(result.converged), "reason": result.reason},
        "solver": _solver(pred.model),
        "skill": dict(result.skill) or None,
        "picked_by_auto": None if pred.choice is None else {
            "method": pred.choice.method, "options": dict(pred.choice.options),
            "reason": pred.choice.reason},
        "kernel_choice": None if pred.kernel_choice is None else {
            "kernel": pred.kernel_choice.kernel, "criterion": pred.kernel_choice.criterion,
            "rows": pred.kernel_choice.rows, "scored_rows": pred.kernel_choice.scored_rows,
            "note": pred.kernel_choice.note,
            "scores": {k: _num(v) for k, v in pred.kernel_choice.scores.items()},
            "seconds": _num(pred.kernel_choice.seconds)},
        "data_quality": _quality(pred, saved, names),
        "columns": _column_lines(pred.inputs),
        "table": _table(pred.inputs),
        "hyperparameters": hyperparameters(pred),
        "other_parameters": {k: list(p.shape) for k, p in _others(pred.model).items()},
    }


def _column_lines(inputs: Any) -> list[str] | None:
    """What was done to each input column of a table, one line each."""
    return inputs.lines() if isinstance(inputs, TableEncoding) else None


def _table(inputs: Any) -> dict[str, Any] | None:
    """A table's input columns as data: name, kind and (categories) levels, whether it
    had missing values, a number's or date's training mean (dates: days since
    ``origin``, the first training date), a date's periodic components; and the training
    rows left out because their target was missing."""
    if not isinstance(inputs, TableEncoding):
        return None
    columns = []
    for c in inputs.codes:
        entry: dict[str, Any] = {"name": c.name, "kind": c.kind, "missing": c.missing}
        if c.kind == "category":
            entry["levels"] = list(c.levels)
        else:
            entry["mean"] = _num(c.mean)
        if c.kind == "date":
            entry["origin"] = day_text(c.origin)
            entry["periodic"] = list(c.periodic)
        columns.append(entry)
    return {"columns": columns, "rows_left_out": int(inputs.dropped)}


def _quality(pred: Predictor, saved: dict[str, Any], names: list[str]
             ) -> dict[str, Any] | None:
    """The training data's quality report (:mod:`gpscale.quality`), as saved in the file,
    with its findings as text (``lines``); None for models fitted without
    standardisation or saved without the report."""
    q = getattr(pred.scaler, "quality", None) or saved_quality(saved)
    if q is None:
        return None
    return {**quality_state(q), "lines": q.lines(names)}


def _solver(model: nn.Module) -> dict[str, Any] | None:
    """How an exact GP solved by CG solved its posterior (CG iterations, residual, ...) and
    what its file holds for prediction, in bytes; None for the other models."""
    solver = getattr(model, "solver", None)
    info = getattr(solver, "solve_info", None)
    if not info:
        return None
    return {**{k: (_num(v) if isinstance(v, float) else v) for k, v in info.items()},
            "tol": _num(solver.tol), "refined": dict(solver.refined),
            "stored_bytes": model.state_bytes(),
            "variances": getattr(solver.cache, "note", lambda: None)()}


def hyperparameters(pred: Predictor) -> dict[str, dict[str, Any]]:
    """Each hyperparameter: ``value`` in the data's units, ``unit`` ("x": the units of
    the input ``columns``, "y^2", "y", "none", or "standardised" when shown as trained)
    and ``trained`` (the value the model holds)."""
    model = pred.model
    xs = np.asarray(pred.scaler.x_scale, dtype=np.float64)
    ys = float(pred.scaler.y_scale)
    names = _column_names(pred)
    dims = _columns(model, pred.n_features)
    params = list(positive_params(model))
    has_signal = any(_unit(sub, desc.name, True) == "y2" and desc.name != "noise"
                     for _, sub, desc in params)
    out: dict[str, dict[str, Any]] = {}
    for name, sub, desc in params:
        v = getattr(sub, desc.name).detach().to("cpu", torch.float64).reshape(-1).numpy()
        unit = _unit(sub, desc.name, has_signal)
        entry: dict[str, Any] = {"trained": _vec(v)}
        cols = dims.get(name[: -len(desc.name)].rstrip("."), list(range(pred.n_features)))
        if unit == "x" and len(v) in (1, len(cols)):
            entry.update(value=_vec(v * xs[cols]) if len(v) == len(cols) or len(cols) > 1
                         else _vec(v * xs[cols]), unit="x",
                         columns=[names[j] for j in cols])
        elif unit == "y2":
            entry.update(value=_vec(v * ys**2), unit="y^2")
        elif unit == "none":
            entry.update(value=_vec(v), unit="none")
        else:
            entry.update(value=_vec(v), unit="standardised" if pred.standardize else "data")
        out[name] = entry
    for name, p in model.named_parameters():
        if name.split(".")[-1] == "mean_constant":
            c = p.detach().to("cpu", torch.float64).reshape(-1).numpy()
            out[name] = {"trained": _vec(c), "value": _vec(pred.scaler.y_mean + c * ys),
                         "unit": "y"}
    return out


def _unit(sub: nn.Module, attr: str, has_signal: bool) -> str:
    if attr == "weight":  # W in K = Φ W Φᵀ: the signal variance unless another one is
        return "trained" if has_signal else "y2"
    return _UNITS.get((type(sub).__name__, attr), _UNITS.get(("*", attr), "trained"))


def _columns(model: nn.Module, d: int) -> dict[str, list[int]]:
    """Module name -> the input columns it reads (``active_dims`` composed down the
    tree: a child's indices select among its parent's columns)."""
    out: dict[str, list[int]] = {"": list(range(d))}
    for prefix, sub in model.named_modules():
        if not prefix:
            continue
        parent = out.get(prefix.rsplit(".", 1)[0] if "." in prefix else "", list(range(d)))
        active = getattr(sub, "active_dims", None)
        out[prefix] = [parent[j] for j in active] if active is not None else parent
    return out


def _others(model: nn.Module) -> dict[str, torch.Tensor]:
    """Trainable tensors that are not hyperparameters (inducing inputs, variational
    parameters, network weights)."""
    raw = {name[: -len(desc.name)] + desc.raw_name for name, _, desc in positive_params(model)}
    return {k: p for k, p in model.named_parameters()
            if k not in raw and k.split(".")[-1] != "mean_constant"}


def _column_names(pred: Predictor) -> list[str]:
    return list(pred.input_names or [f"x{j}" for j in range(pred.n_features)])


def _kernel_text(cfg: Any) -> str | None:
    """``Scale(RBF(ard_dims=2))`` from a saved :meth:`Kernel.config`."""
    if not isinstance(cfg, dict):
        return None
    kids = [_kernel_text(c) for c in cfg.get("children", [])]
    if cfg.get("type") in ("Sum", "Product"):
        return (" + " if cfg["type"] == "Sum" else " * ").join(
            f"({k})" if cfg["type"] == "Product" and " + " in k else k for k in kids)
    args = ", ".join(f"{k}={v}" for k, v in cfg.get("args", {}).items() if v is not None)
    inner = ", ".join([*kids, *([args] if args else [])])
    return f"{cfg.get('type')}({inner})"


def _vec(a: Any) -> float | list[float]:
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    return float(a[0]) if a.size == 1 else [float(x) for x in a]


def _num(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# -- text -----------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else ", ".join(f"{x:.4g}" for x in v)


def _value_text(entry: dict[str, Any]) -> str:
    v, unit = entry["value"], entry["unit"]
    if unit == "x":
        vals = v if isinstance(v, list) else [v]
        return "  ".join(f"{c}: {x:.4g}" for c, x in zip(entry["columns"], vals))
    if unit == "y^2":
        vals = v if isinstance(v, list) else [v]
        if len(vals) == 1:
            return f"{vals[0]:.4g} (std {math.sqrt(vals[0]):.4g})"
        return _fmt(v)
    return _fmt(v) + {"none": " (no unit)", "standardised": " (standardised units)"}.get(unit, "")


def info_text(info: dict[str, Any]) -> str:
    """The human-readable form of :func:`model_info`."""
    fit = info["fit"]
    by = f", written by {info['written_by']}" if info.get("written_by") else ""
    kernel = info["kernel"] + (f" = {info['kernel_structure']}"
                               if info.get("kernel_structure") else "")
    inputs = ", ".join(info["inputs"])
    scaled = ("X and y standardised for training" if info["standardized"]
              else "trained on the raw columns")
    conv = "converged" if fit["converged"] else "not converged"
    stop = f"stopped: {fit['reason'] or '?'} ({conv})"
    objective = "?" if fit["objective"] is None else f"{fit['objective']:.6g}"
    secs = "" if not fit["time_s"] else f" in {fit['time_s']:.2f} s"
    lines = [
        f"{info['file']}: gpscale model, format version {info['format_version']}{by}",
        f"method   {info['method']}"
        + (f": {info['method_description']}" if info.get("method_description") else ""),
        f"kernel   {kernel}",
        f"model    {info['model']}",
        f"data     n = {info['n'] if info['n'] is not None else '?'} rows, d = {info['d']} "
        f"inputs ({inputs})" + (f" -> target {info['target']}" if info["target"] else "")
        + f"; {scaled}"
        + (f"; held as {info['distinct_inputs']} distinct inputs (copies merged, noise σ²/c"
           " at an input seen c times: the same GP)" if info.get("distinct_inputs") else ""),
        f"fit      objective {objective} after {fit['iterations']} iterations, "
        f"{fit['evaluations']} evaluations{secs}; {stop}",
        "",
        "hyperparameters in the data's units (lengths in each input column's units, "
        "variances in the target's units squared):",
    ]
    if info.get("columns"):
        lines[-2:-2] = [f"column   {line}" for line in info["columns"]]
    left_out = (info.get("table") or {}).get("rows_left_out")
    if left_out:
        lines[-2:-2] = [f"rows     {left_out} training row(s) left out: their target was "
                        "missing"]
    picked = info.get("picked_by_auto")
    if picked:
        lines[2:2] = [f"auto     picked {picked['method']}: {picked['reason']}"]
    chosen = info.get("kernel_choice")
    if chosen:
        ranked = sorted(chosen["scores"].items(), key=lambda kv: (kv[1] is None, kv[1] or 0))
        listed = ", ".join(f"{k} {'failed' if v is None else f'{v:.4g}'}" for k, v in ranked)
        how = chosen.get("note") or f"the lowest {chosen['criterion']}"
        lines[3 if picked else 2:3 if picked else 2] = [
            f"kernel   {chosen['kernel']} chosen from the data: {how} "
            f"({chosen['criterion']} of {len(chosen['scores'])} families fitted on "
            f"{chosen['rows']} rows: {listed})"]
    solver = info.get("solver")
    if solver:
        held = solver.get("stored_bytes") or {}
        lines[-2:-2] = [
            f"solver   preconditioned CG on every row: {solver.get('iterations')} iterations,"
            f" relative residual {solver.get('residual', float('nan')):.2e} (tol "
            f"{solver.get('tol')}); the file holds "
            + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in held.items())]
        if solver.get("variances"):
            lines[-2:-2] = [f"         {solver['variances']}"]
        refined = solver.get("refined") or {}
        if refined.get("evaluations"):
            lines[-2:-2] = [
                f"refine   θ from a row sample ({refined.get('start')} start) refined on every "
                f"row by {refined['evaluations']} stochastic gradient evaluations "
                f"({refined.get('probes')} probes; {refined.get('reason')})"]
    skill = info.get("skill")
    if skill:
        share = skill.get("lengthscale_share")
        lines[-2:-2] = [
            f"skill    leave-one-out R² {skill.get('loo_r2', float('nan')):.3g} on "
            f"{skill.get('loo_rows')} rows" + ("" if share is None else
                                              f"; smallest lengthscale {share:.2g} x its "
                                              "column's standard deviation")
            + ("" if skill.get("levels_r2") is None else
               f"; one row left out at a time R² {skill['rows_r2']:.3g} against "
               f"{skill['levels_r2']:.3g} for its category levels' means")]
        if skill.get("problem"):
            lines[-2:-2] = [f"         {skill['problem']}"]
    quality = info.get("data_quality")
    if quality is not None:
        found = quality["lines"] or ["no constant columns, duplicated rows or heavy tails found"]
        lines[-2:-2] = [f"quality  {found[0]}", *(f"         {t}" for t in found[1:])]
    rows = [(name, _value_text(e)) for name, e in info["hyperparameters"].items()]
    width = max((len(r[0]) for r in rows), default=0)
    lines += [f"  {name:<{width}}  {text}" for name, text in rows]
    if info["other_parameters"]:
        shown = ", ".join(f"{k} {tuple(s)}" for k, s in info["other_parameters"].items())
        lines.append(f"other trained tensors: {shown}")
    return "\n".join(lines)
