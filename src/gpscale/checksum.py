"""The checksum a model file carries over its content, tensors included.

``torch.save`` writes a zip archive whose readers do not check the stored tensors'
bytes, so a file damaged inside a tensor loads and predicts wrong numbers. The saved
dictionary's ``checksum`` is ``"sha256:<hex>"`` of a canonical serialisation of every
other entry (:func:`content_digest`): keys in sorted order, each tensor as its dtype,
shape and bytes, each plain value (None, bool, int, float, str, list, dict) tagged by
type, floats by their exact hexadecimal form. :func:`check_content` recomputes it at
load; a file written before the checksum has none and is checked for nothing new."""

from __future__ import annotations

import hashlib
from typing import Any

import torch

__all__ = ["CHECKSUM_KEY", "content_digest", "check_content"]

#: the key of the saved dictionary that holds the checksum
CHECKSUM_KEY = "checksum"


def content_digest(saved: dict[str, Any]) -> str:
    """``"sha256:<hex>"`` of ``saved`` without its :data:`CHECKSUM_KEY` (module
    docstring); TypeError for a value that is not a tensor or a plain value."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in saved.items() if k != CHECKSUM_KEY})
    return "sha256:" + h.hexdigest()


def check_content(saved: dict[str, Any], where: str) -> None:
    """ValueError naming ``where`` as damaged when ``saved`` carries a checksum that
    its content does not match; nothing when it carries none (an older file)."""
    stored = saved.get(CHECKSUM_KEY)
    if stored is None:
        return
    try:
        found = content_digest(saved)
    except TypeError:
        found = None
    if stored != found:
        raise ValueError(f"model file {where!r} is damaged: its content does not match the "
                         "checksum written with it (bytes changed after it was saved); "
                         "fit the model again (gpscale fit or Predictor.save) or restore "
                         "the file from a copy")


def _feed(h: Any, obj: Any) -> None:
    """Add ``obj``'s canonical bytes to the hash ``h``: each value tagged by its type and
    framed by its length, so that no two different contents give the same stream."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        _frame(h, b"T", f"{t.dtype}|{tuple(t.shape)}".encode())
        _frame(h, b"B", t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        _frame(h, b"{", str(len(obj)).encode())
        for key in sorted(obj, key=str):
            _feed(h, str(key))
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        _frame(h, b"[", str(len(obj)).encode())
        for item in obj:
            _feed(h, item)
    elif obj is None:
        _frame(h, b"N", b"")
    elif isinstance(obj, bool):
        _frame(h, b"b", b"1" if obj else b"0")
    elif isinstance(obj, int):
        _frame(h, b"i", str(obj).encode())
    elif isinstance(obj, float):
        _frame(h, b"f", obj.hex().encode())
    elif isinstance(obj, str):
        _frame(h, b"s", obj.encode("utf-8", "surrogatepass"))
    else:
        raise TypeError(f"cannot checksum a {type(obj).__name__}")


def _frame(h: Any, tag: bytes, body: bytes) -> None:
    h.update(tag + len(body).to_bytes(8, "little") + body)
