"""Method options given as text (``--option NAME=VALUE`` on the command line), parsed by
the type of the method's own keyword default."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from ..validation import as_dtype, check_device
from .registry import METHODS, Method

__all__ = ["option_defaults", "parse_option", "placement_options", "takes_options"]


def takes_options(options: type) -> Callable[[Callable], Callable]:
    """Decorator of a fit function ``fit_fn(X, y, kernel, **options)`` whose options are
    the fields of the dataclass ``options``: its signature lists them, keyword-only, with
    their defaults, so that the registry, the CLI and ``gpscale methods`` read them as
    they read any fit function's (:func:`option_defaults`)."""

    def deco(fit_fn: Callable) -> Callable:
        head = list(inspect.signature(fit_fn).parameters.values())[:3]  # X, y, kernel
        fields = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                    annotation=f.type)
                  for f in dataclasses.fields(options) if f.init]
        fit_fn.__signature__ = inspect.signature(fit_fn).replace(parameters=head + fields)
        return fit_fn

    return deco


def option_defaults(method: Method) -> dict[str, Any]:
    """The keyword options of ``method``'s fit function with their defaults (an option
    without a default maps to ``inspect.Parameter.empty``)."""
    params = list(inspect.signature(method.fit_fn).parameters.values())[3:]
    found = {p.name: p.default for p in params
             if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "client"}
    for name in method.options or ():
        found.setdefault(name, inspect.Parameter.empty)
    return found


def parse_option(method: Method, text: str) -> tuple[str, Any]:
    """``"NAME=VALUE"`` as (name, value): an int, float or bool default parses VALUE as
    that type; otherwise VALUE is read as a Python literal (a number, None, a list) and,
    failing that, kept as text. ValueError naming the accepted options otherwise."""
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
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return name, value.lower() in ("true", "1", "yes")
        if isinstance(default, int):
            return name, int(value)
        if isinstance(default, float):
            return name, float(value)
    except ValueError:
        raise ValueError(f"option {name} of method {method.name!r} must be of type "
                         f"{type(default).__name__} (default {default!r}), got {value!r}") \
            from None
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
