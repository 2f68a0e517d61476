"""``gpscale methods [NAME]``: every registered method with its options, their defaults
and when to use it (the method's description); one method in detail with its docstring.

A method's options are the keyword arguments of its fit function. Where that function
passes further keywords on to a trainer (``**options``), the trainer's keyword
arguments are listed too, and where the trainer takes its settings as a dataclass
(e.g. :class:`gpscale.train.admm.ADMMOptions`) with keyword overrides, that
dataclass's fields.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
import types
import typing
from typing import Any

from ..methods import METHODS, Method
from ..methods.options import option_defaults

__all__ = ["method_options", "settings_class", "methods_text", "method_text", "methods_json"]

REQUIRED = inspect.Parameter.empty
#: parameters of a wrapped trainer that are not options a user gives
_NOT_OPTIONS = {"model", "X", "y", "kernel", "features", "options", "client"}


def method_options(method: Method) -> dict[str, Any]:
    """Option name -> default (``inspect.Parameter.empty`` when there is none) of
    ``method``, including what its fit function passes on to a trainer."""
    found, settings = _options(method)
    return {**found, **settings}


def settings_class(method: Method) -> type | None:
    """The dataclass of settings the method's trainer takes keyword overrides of."""
    inner = _trainer(method)
    return None if inner is None else _settings_class(_parameters(inner))


def _options(method: Method) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fit function's and its trainer's keyword options, the trainer's settings
    dataclass fields), each name -> default."""
    found = dict(option_defaults(method))
    inner = _trainer(method)
    if inner is None:
        return found, {}
    params = _parameters(inner)
    for p in params[1:]:  # after the model / X
        if p.name in _NOT_OPTIONS or p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        if found.get(p.name, REQUIRED) is REQUIRED and (
                p.name in found or method.options is None):
            found[p.name] = p.default
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
    cls = _settings_class(params)
    settings = {}
    if takes_any and cls is not None and method.options is None:
        settings = {f.name: f.default for f in dataclasses.fields(cls)
                    if f.name not in found and f.default is not dataclasses.MISSING}
    return found, settings


def _trainer(method: Method) -> Any:
    """The trainer a method's fit function wraps (the function it closes over), if any."""
    try:
        free = inspect.getclosurevars(method.fit_fn).nonlocals
    except (TypeError, ValueError):
        return None
    calls = [v for v in free.values() if inspect.isfunction(v)]
    return calls[0] if len(calls) == 1 else free.get("fit_fn")


def _parameters(fn: Any) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn, eval_str=True).parameters.values())
    except (NameError, TypeError, ValueError):  # annotations that do not evaluate here
        return list(inspect.signature(fn).parameters.values())


def _settings_class(params: list[inspect.Parameter]) -> type | None:
    """The dataclass of an ``options: SomeOptions | None`` parameter."""
    for p in params:
        if p.name != "options":
            continue
        ann = p.annotation
        kinds = typing.get_args(ann) if isinstance(ann, types.UnionType) else (ann,)
        for k in kinds:
            if isinstance(k, type) and dataclasses.is_dataclass(k):
                return k
    return None


def _show(value: Any) -> str:
    if value is REQUIRED:
        return "(required)"
    if hasattr(value, "is_floating_point") and type(value).__module__ == "torch":
        return str(value)
    return repr(value)


def _options_line(method: Method, width: int, indent: str) -> str:
    opts, settings = _options(method)
    text = "  ".join(f"{k}={_show(v)}" for k, v in opts.items()) or "(none)"
    more = ""
    if settings:
        first = ", ".join(list(settings)[:2])
        more = (f"; and {len(settings)} settings of {settings_class(method).__name__} "
                f"({first}, ...: gpscale methods {method.name})")
    elif method.options is None:
        more = "; other keywords go to the trainer"
    return textwrap.fill(text + more, width=width, initial_indent=indent + "options: ",
                         subsequent_indent=indent + "         ", break_on_hyphens=False)


def _flags(method: Method) -> str:
    return ", ".join(w for w, on in (("streams rows from files or a cluster", method.streams),
                                     ("runs folds on a cluster", method.cluster)) if on)


def methods_text(width: int = 92) -> str:
    """Every registered method: name, description (what it is and when to use it) and
    options with their defaults."""
    blocks = []
    for name in sorted(METHODS, key=lambda n: n != "exact"):  # the reference first
        m = METHODS[name]
        head = textwrap.fill(m.description or "(no description)", width=width,
                             initial_indent=f"{name:<16}", subsequent_indent=" " * 16)
        flags = _flags(m)
        lines = [head] + ([" " * 16 + flags] if flags else [])
        lines.append(_options_line(m, width, " " * 16))
        blocks.append("\n".join(lines))
    return ("\n\n".join(blocks) + "\n\nset an option with gpscale fit --method NAME --option "
            "NAME=VALUE; details: gpscale methods NAME")


def method_text(name: str, width: int = 92) -> str:
    """One method in detail: description, options with defaults, the fit function's
    docstring."""
    m = METHODS[name]
    lines = [f"{name}: {m.description or '(no description)'}"]
    if _flags(m):
        lines.append(_flags(m))
    lines.append("")
    opts = method_options(m)
    if opts:
        lines.append("options (gpscale fit --option NAME=VALUE, parsed by the option's type):")
        w = max(len(k) for k in opts)
        lines += [f"  {k:<{w}}  {_show(v)}" for k, v in opts.items()]
    if m.options is None:
        lines.append("  (other keywords are passed on to the trainer)")
    doc = inspect.getdoc(m.fit_fn)
    if doc:
        lines += ["", doc]
    return "\n".join(lines)


def methods_json(names: list[str] | None = None) -> list[dict[str, Any]]:
    """The listing as plain values: name, description, streams, cluster, options."""
    out = []
    for name in names or list(METHODS):
        m = METHODS[name]
        opts = {k: (None if v is REQUIRED else _plain(v)) for k, v in method_options(m).items()}
        out.append({"name": name, "description": m.description, "streams": m.streams,
                    "cluster": m.cluster, "options": opts,
                    "required": [k for k, v in method_options(m).items() if v is REQUIRED],
                    "any_option": m.options is None})
    return out


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)
