"""bfloat16 comes from ml_dtypes, which is imported only when a program meets bfloat16.

``import ml_dtypes`` (0.7) spends 0.55 s registering its types with NumPy, which had been most
of ``import gingham``. Each case runs in a fresh process: in this one ml_dtypes is long
imported, and a path that still needed it up front would pass unnoticed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gingham.tile import dtypes as dt


def _fresh(code: str) -> str:
    """What ``code`` prints, run after ``import numpy as np, gingham`` in a new process."""
    script = f"import sys\nimport numpy as np\nimport gingham\n{code}\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_a_float32_program_does_not_import_ml_dtypes():
    printed = _fresh("x = gingham.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), "
                     "device='cpu')\n"
                     "print((x @ x.T).sum().item(), 'ml_dtypes' in sys.modules)")
    assert printed == "83.0 False"  # [[0,1,2],[3,4,5]] @ its transpose: 5 + 14 + 14 + 50


@pytest.mark.parametrize("make", [
    "gingham.tensor(np.arange(4, dtype=np.float32), dtype='bfloat16', device='cpu')",
    "gingham.tensor(np.arange(4, dtype=np.float32), device='cpu').astype('bfloat16')",
    "gingham.arange(4, dtype='bfloat16', device='cpu')",
    "gingham.full((4,), 1.5, dtype='bfloat16', device='cpu')",
    "gingham.zeros((4,), dtype='bfloat16', device='cpu') + 2",
])
def test_bfloat16_by_name_works_in_a_fresh_process(make):
    """Each way of asking for bfloat16 by name imports ml_dtypes itself (NumPy knows the
    name only after that) and computes in it."""
    printed = _fresh(f"t = {make}\nprint(t.dtype, (t * 2).astype('float32').numpy().tolist())")
    name, values = printed.split(" ", 1)
    assert name == "bfloat16"
    assert values in ("[0.0, 2.0, 4.0, 6.0]", "[3.0, 3.0, 3.0, 3.0]", "[4.0, 4.0, 4.0, 4.0]")


def test_autocast_by_name_in_a_fresh_process():
    printed = _fresh("w = gingham.tensor(np.eye(3, dtype=np.float32), device='cpu')\n"
                     "with gingham.autocast('bfloat16'):\n"
                     "    y = w @ w\n"
                     "print(y.dtype, y.astype('float32').numpy().trace())")
    assert printed == "bfloat16 3.0"


def test_names_and_checks_agree_with_ml_dtypes():
    import ml_dtypes
    import numpy as np

    bf16 = np.dtype(ml_dtypes.bfloat16)
    assert dt.bfloat16 == bf16 and dt.DTYPES["bfloat16"] == bf16 and "bfloat16" in dt.DTYPES
    assert list(dt.DTYPES)[:3] == ["float16", "bfloat16", "float32"]
    for spelling in (bf16, ml_dtypes.bfloat16, "bfloat16"):
        assert dt.is_bfloat16(spelling) and dt.is_half(spelling)
        assert dt.as_tile_dtype(spelling) == bf16
    assert dt.dtype_name(bf16) == "bfloat16" and dt.is_float(bf16) and not dt.is_integer(bf16)
    for other in (np.float16, np.float32, np.int16, np.uint16, bool):
        assert not dt.is_bfloat16(np.dtype(other)) and not dt.is_bfloat16(other)
    assert dt.promote(bf16, np.dtype(np.float16)) == np.float32
    assert dt.promote(bf16, np.dtype(np.int8)) == bf16
    with pytest.raises(TypeError, match="not supported by Tile"):
        dt.as_tile_dtype(np.complex64)


def test_a_tile_cast_to_bfloat16_in_a_fresh_process():
    printed = _fresh("from gingham import tile\n"
                     "N, = tile.dims('N')\n"
                     "X = tile.input('X', [N])\n"
                     "Y = tile.cast(tile.cast(X, 'bfloat16') * 3, 'float32')\n"
                     "fn = tile.function(tile.program([X], {'Y': Y}))\n"
                     "out = fn(np.array([1.0, 1.5, 2.0], np.float32), device='cpu')\n"
                     "print(np.asarray(out).tolist())")
    assert printed == "[3.0, 4.5, 6.0]"
