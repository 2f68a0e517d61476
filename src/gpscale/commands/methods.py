"""``gpscale methods [NAME]``: every registered method with its options, their defaults
and when to use it (the method's description); one method in detail with its docstring.

A method's options are the fields of its options dataclass
(:func:`gpscale.methods.options.takes_options`), or for a method registered with plain
keyword options, its fit function's keyword arguments.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

from ..methods import METHODS, Method
from ..methods.options import option_defaults

__all__ = ["method_options", "methods_text", "method_text", "methods_json"]

REQUIRED = inspect.Parameter.empty


def method_options(method: Method) -> dict[str, Any]:
    """Option name -> default (``inspect.Parameter.empty`` when there is none) of
    ``method``."""
    return dict(option_defaults(method))


def _show(value: Any) -> str:
    if value is REQUIRED:
        return "(required)"
    if hasattr(value, "is_floating_point") and type(value).__module__ == "torch":
        return str(value)
    return repr(value)


def _options_line(method: Method, width: int, indent: str) -> str:
    opts = method_options(method)
    text = "  ".join(f"{k}={_show(v)}" for k, v in opts.items()) or "(none)"
    more = "; other keywords go to the fit function" if method.options is None else ""
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
        lines.append("  (other keywords are passed on to the fit function)")
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
