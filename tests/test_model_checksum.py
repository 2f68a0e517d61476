"""Model files carry a checksum of their content (:mod:`gpscale.checksum`): bytes
flipped inside a stored tensor make ``load``, ``gpscale predict`` and ``gpscale info``
refuse the file as damaged (exit 1) before any prediction; intact files and files
written before the checksum still load."""

from pathlib import Path

import numpy as np
import pytest
import torch

import gpscale
from gpscale import cli
from gpscale.checksum import CHECKSUM_KEY, content_digest
from gpscale.predictor import load

FIXTURES = Path(__file__).parent / "data" / "format_v1"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """An iterative-exact model file (the issue's case) and its training columns."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    pred = gpscale.fit(X, y, method="exact", solver="cg", max_iter=10)
    path = tmp_path_factory.mktemp("model") / "m.pt"
    pred.save(path)
    return path, X, pred


def _flip_inside(path: Path, tensor: torch.Tensor, out: Path) -> None:
    """Flip 64 bytes in the middle of ``tensor``'s bytes as stored in ``path``."""
    data = bytearray(path.read_bytes())
    raw = tensor.detach().cpu().contiguous().numpy().tobytes()
    start = data.find(raw)
    assert start > 0, "the tensor's bytes are stored as they are (uncompressed)"
    mid = start + len(raw) // 2
    for i in range(mid, mid + 64):
        data[i] ^= 0xFF
    out.write_bytes(bytes(data))


def test_an_intact_file_loads_and_predicts_the_same(saved):
    path, X, pred = saved
    again = load(path)
    np.testing.assert_array_equal(again.predict(X[:5])[0], pred.predict(X[:5])[0])
    assert torch.load(path, weights_only=True)[CHECKSUM_KEY].startswith("sha256:")


@pytest.mark.parametrize("which", ["X", "alpha"])
def test_bytes_flipped_in_a_tensor_are_refused_as_damaged(saved, tmp_path, capsys, which):
    path, X, pred = saved
    bad = tmp_path / "bad.pt"
    _flip_inside(path, pred.model.saved_state()[which], bad)
    with pytest.raises(ValueError, match="is damaged: its content does not match"):
        load(bad)
    data = tmp_path / "x.csv"
    np.savetxt(data, X[:5], delimiter=",", header="x0,x1,x2", comments="")
    for argv in (["predict", "--model", str(bad), "--data", str(data), "--out",
                  str(tmp_path / "p.csv")], ["info", str(bad)]):
        assert cli.main(argv) == 1
        err = capsys.readouterr().err
        assert f"{str(bad)!r} is damaged" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.csv").exists()


def test_files_without_a_checksum_still_load(saved, tmp_path):
    path, X, pred = saved
    old = torch.load(path, weights_only=True)
    del old[CHECKSUM_KEY]
    torch.save(old, tmp_path / "v2.pt")
    np.testing.assert_array_equal(load(tmp_path / "v2.pt").predict(X[:3])[0],
                                  pred.predict(X[:3])[0])
    for fixture in sorted(FIXTURES.glob("*.pt")):
        load(fixture)


def test_the_digest_sees_every_entry_and_type():
    base = {"a": 1, "b": [1.0, None, "x"], "t": torch.arange(4.0, dtype=torch.float64)}
    digest = content_digest(base)
    assert content_digest({**base, CHECKSUM_KEY: "anything"}) == digest
    for changed in ({"a": True}, {"a": 1.0}, {"b": [1.0, None, "y"]},
                    {"t": torch.arange(4.0, dtype=torch.float32)},
                    {"t": base["t"].reshape(2, 2)}, {"c": None}):
        assert content_digest({**base, **changed}) != digest, changed
