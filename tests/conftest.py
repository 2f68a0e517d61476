import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GPSCALE_DATA", ROOT.parent / "shared" / "data"))

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    """Dense-reference tests run on every available device."""
    return torch.device(request.param)


@pytest.fixture
def data_dir():
    if not DATA.exists():
        pytest.skip(f"shared data not found at {DATA} (set GPSCALE_DATA)")
    return DATA
