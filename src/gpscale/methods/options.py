"""A method's options: declared once, as the fields of a dataclass that checks them
(:func:`takes_options` gives the fit function its signature from it), and given as text
(``--option NAME=VALUE`` on the command line), parsed by the field's type (by the type
of the default for a fit function that takes plain keyword options)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

from ..deadline import Deadline
from ..validation import as_dtype, check_device
from .registry import DATA_ARGUMENTS, METHODS, Method, option_parameters

__all__ = ["option_defaults", "options_class", "parse_option", "placement_options",
           "takes_options"]


def takes_options(options: type) -> Callable[[Callable], Callable]:
    """Decorator of a fit function ``fit_fn(X, y, kernel, **options)`` whose options are
    the fields of the dataclass ``options`` (checked in its ``__post_init__``): its
    signature lists them, keyword-only, with their defaults and types, and
    :func:`options_class` finds the dataclass, so that the registry, the CLI, the API,
    the estimator and ``gpscale methods`` read the one declaration. The planner builds
    it from the options given before any row is read; a dataclass whose checks also need
    to know which options were given (ADMM's settings over their preset) defines
    ``check_given(names)``, which the planner then calls."""

    def deco(fit_fn: Callable) -> Callable:
        head = list(inspect.signature(fit_fn).parameters.values())[:len(DATA_ARGUMENTS)]
        fields = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                    annotation=f.type)
                  for f in dataclasses.fields(options) if f.init]
        fit_fn.__signature__ = inspect.signature(fit_fn).replace(parameters=head + fields)
        fit_fn.options_class = options
        return fit_fn

    return deco


def options_class(method: Method) -> type | None:
    """The dataclass of ``method``'s options (:func:`takes_options`), or None for a fit
    function that takes plain keyword options."""
    return getattr(method.fit_fn, "options_class", None)


def option_defaults(method: Method) -> dict[str, Any]:
    """The options of ``method`` with their defaults (an option without a default maps to
    ``inspect.Parameter.empty``): its dataclass's fields, or its fit function's keyword
    parameters after X, y, kernel."""
    cls = options_class(method)
    if cls is not None:
        found = {f.name: f.default for f in dataclasses.fields(cls)
                 if f.init and f.name != "client"}  # the cluster is the planner's to give
    else:
        found = {p.name: p.default for p in option_parameters(method.fit_fn)
                 if p.kind is not p.VAR_KEYWORD}
    for name in method.options or ():
        found.setdefault(name, inspect.Parameter.empty)
    return found


def _field_type(method: Method, name: str) -> tuple[type | None, bool]:
    """(bool, int or float, whether None is accepted too) for an option whose dataclass
    field is declared as one of these, ``T | None`` included; (None, False) otherwise.
    A :class:`~gpscale.deadline.Deadline` in the union is left aside: code hands one
    down (``time_limit``), text gives the seconds."""
    cls = options_class(method)
    if cls is None:
        return None, False
    hint = typing.get_type_hints(cls).get(name)
    kinds = tuple(k for k in (typing.get_args(hint) if isinstance(hint, types.UnionType)
                              else (hint,)) if k is not Deadline)
    plain = [k for k in kinds if k is not type(None)]
    if len(plain) == 1 and plain[0] in (bool, int, float):
        return plain[0], len(kinds) == 2
    return None, False


def parse_option(method: Method, text: str) -> tuple[str, Any]:
    """``"NAME=VALUE"`` as (name, value): an option declared bool, int or float (or that
    or None) in the method's dataclass, or without one whose default is of that type,
    parses VALUE as that type; otherwise VALUE is read as a Python literal (a number,
    None, a list) and, failing that, kept as text. ValueError naming the accepted
    options otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    defaults = option_defaults(method)
    if not sep or not name:
        raise ValueError(f"--option takes NAME=VALUE, got {text!r}")
    if method.options is not None and name not in defaults:
        listed = ", ".join(f"{k}={_show(v)}" for k, v in defaults.items())
        raise ValueError(f"method {method.name!r} has no option {name!r}; it takes: {listed}")
    default = defaults.get(name, inspect.Parameter.empty)
    value = value.strip()
    kind, optional = _field_type(method, name)
    if optional and value in ("None", "none"):
        return name, None
    if kind is None and options_class(method) is None:  # typed by the default
        kind = next((k for k in (bool, int, float) if isinstance(default, k)), None)
    try:
        if kind is bool:
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return name, value.lower() in ("true", "1", "yes")
        if kind is int:
            return name, int(value)
        if kind is float:
            return name, float(value)
    except ValueError:
        what = kind.__name__ + (" or None" if optional else "")
        raise ValueError(f"option {name} of method {method.name!r} must be of type "
                         f"{what} (default {default!r}), got {value!r}") from None
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def placement_options(method: Method, device: str | None = None,
                      dtype: str | None = None) -> dict[str, Any]:
    """``{"device": ..., "dtype": ...}`` for the values given (``--device``, ``--dtype``),
    checked; ValueError when ``method`` cannot honour one, naming the methods that can."""
    out: dict[str, Any] = {}
    for name, value in (("device", device), ("dtype", dtype)):
        if value is None:
            continue
        if name not in option_defaults(method):
            able = [n for n, m in METHODS.items() if name in option_defaults(m)]
            why = "computes in float64 only" if name == "dtype" else "runs on the CPU only"
            raise ValueError(f"method {method.name!r} {why}: --{name} applies to "
                             f"{', '.join(able)}")
        out[name] = check_device(value) if name == "device" else as_dtype(value)
    return out


def _show(default: Any) -> str:
    return "(required)" if default is inspect.Parameter.empty else repr(default)
