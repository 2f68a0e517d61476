"""Arrow columns to float64 without pandas: the same values as ``to_numpy``."""

import decimal
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from gpscale.io.batch import float_column


@pytest.mark.parametrize("values, type_", [
    ([1.5, None, -2.0, 3.25, None, 7.0], pa.float64()),
    ([1, None, 3, -4, 5, 6], pa.int64()),
    ([1.0, 2.0, None, 4.0, 5.0, 6.0], pa.float32()),
    ([True, False, None, True, True, False], pa.bool_()),
    ([decimal.Decimal("1.25"), None, decimal.Decimal("-3.5"), decimal.Decimal("0"),
      decimal.Decimal("2"), decimal.Decimal("9.75")], pa.decimal128(5, 2)),
    ([None] * 6, pa.null()),
])
def testfloat_column_equals_to_numpy(values, type_):
    arr = pa.array(values, type=type_)
    for col in (arr, arr.slice(2), arr.slice(1, 3),
                pa.chunked_array([arr.slice(0, 2), arr.slice(2)])):
        ref = pa.array(col.to_pylist(), type=type_).cast(pa.float64(), safe=False) \
            .to_numpy(zero_copy_only=False)
        got = float_column(col)
        assert got.dtype == np.float64 and got.flags.writeable
        np.testing.assert_array_equal(got, ref)


@pytest.mark.slow  # a fresh interpreter imports torch
def test_reading_a_csv_does_not_import_pandas(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,y\n1,2.5,3\n,4,5\n6,7,\n")
    code = ("import sys; from gpscale.io import training_data; "
            "import gpscale.io.batch as b, pyarrow.csv as c; "
            f"t = c.read_csv({str(path)!r}); [b.float_column(t.column(k)) for k in 'aby']; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
