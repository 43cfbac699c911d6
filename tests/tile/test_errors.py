"""Errors of spec section 7: each wrong program raises its specific TileError subclass with a
message that names the problem and the place."""

from __future__ import annotations

import numpy as np
import pytest

from gingham.errors import (
    TileAffineError,
    TileConflictError,
    TileError,
    TileIndexError,
    TileNameError,
    TileShapeError,
    TileSyntaxError,
    TileTypeError,
)
from _util import tile_function


def _loc(src: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the ``occurrence``-th ``needle`` in ``src``."""
    pos = -1
    for _ in range(occurrence + 1):
        pos = src.index(needle, pos + 1)
    line = src.count("\n", 0, pos) + 1
    col = pos - (src.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _line_of(src: str, needle: str) -> int:
    return _loc(src, needle)[0]


def _statement_span(src: str, needle: str) -> tuple[int, int, int]:
    """(line, first column, last column) of the statement line containing ``needle``."""
    line, _ = _loc(src, needle)
    text = src.split("\n")[line - 1]
    first = len(text) - len(text.lstrip()) + 1
    return line, first, len(text)


def _assert_points_into_statement(err, src, needle):
    line, first, last = _statement_span(src, needle)
    assert err.line == line, f"line {err.line}, expected {line}: {err}"
    assert err.column is not None and first <= err.column <= last, f"column {err.column} not in {first}..{last}: {err}"


def test_error_classes_derive_from_tile_error():
    import gingham

    for cls in (TileSyntaxError, TileNameError, TileIndexError, TileAffineError, TileShapeError, TileTypeError,
                TileConflictError):
        assert issubclass(cls, gingham.TileError)
    assert gingham.TileError is TileError


# ---------------------------------------------------------------------------------------------
# Found at tile.function(...) time
# ---------------------------------------------------------------------------------------------

SYNTAX_CASES = [
    # (source, the offending token's text, occurrence of it)
    ("function (A[M, K], B[K, N]) -> (C) {\n    C[i, j : M, N] = +(A[i, k;\n}\n", ";", 0),
    ("function (A[N]) -> (O) {\n    O[i : N] = +(A[i]))\n}\n", ")", 3),
    ("function (A[N]) -> (O) {\n    O[i : N] = +(A[i]);\n    P = A $ 2;\n}\n", "$", 0),
    ("function (A[N]) -> (O) {\n    O[i : N] = +(A[i]) + 1;\n}\n", "+ 1", 0),
    ("function (A[N] -> (O) {\n    O = A;\n}\n", "->", 0),
]


@pytest.mark.parametrize("src,token,occ", SYNTAX_CASES, ids=["unclosed_bracket", "extra_paren", "bad_char",
                                                             "elementwise_after_contraction", "header"])
def test_syntax_error_location_and_text(src, token, occ):
    with pytest.raises(TileSyntaxError) as info:
        tile_function(src)
    err = info.value
    line, col = _loc(src, token, occ)
    assert (err.line, err.column) == (line, col), f"got ({err.line}, {err.column}), expected ({line}, {col}): {err}"
    offending_line = src.split("\n")[line - 1]
    assert offending_line.strip() in str(err), f"the offending line is not shown: {err}"
    assert f"line {line}" in str(err) and f"column {col}" in str(err)


def test_syntax_error_unterminated_block():
    src = "function (A[N]) -> (O) {\n    O = A;\n"
    with pytest.raises(TileSyntaxError) as info:
        tile_function(src)
    assert info.value.line is not None and info.value.line >= 2


def test_syntax_error_empty():
    with pytest.raises(TileSyntaxError):
        tile_function("")


def test_unknown_tensor():
    src = "function (A[M, K], B[K, N]) -> (C) {\n    C[i, j : M, N] = +(A[i, k] * Q[k, j]);\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    err = info.value
    assert "Q" in str(err)
    _assert_points_into_statement(err, src, "Q[k, j]")


def test_unknown_tensor_elementwise():
    src = "function (X) -> (O) {\n    O = X + Missing;\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    assert "Missing" in str(info.value)
    _assert_points_into_statement(info.value, src, "Missing")


def test_unknown_dimension_in_output_size():
    src = "function (A[N]) -> (O) {\n    O[i : Z] = +(A[i]);\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    assert "Z" in str(info.value)


def test_unknown_function():
    src = "function (X) -> (O) {\n    O = frobnicate(X);\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    assert "frobnicate" in str(info.value)


def test_undefined_output():
    src = "function (X) -> (O, P) {\n    O = X;\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    assert "P" in str(info.value)


def test_index_variable_only_in_output():
    src = "function (A[M], B[N]) -> (O) {\n    O[i, j : M, N] = =(A[i]);\n}\n"
    with pytest.raises(TileIndexError) as info:
        tile_function(src)
    err = info.value
    assert "j" in str(err) and "O" in str(err)
    _assert_points_into_statement(err, src, "O[i, j")


def test_index_variable_in_elementwise_statement():
    src = "function (A[N]) -> (O) {\n    O = A[i] + 1;\n}\n"
    with pytest.raises((TileIndexError, TileSyntaxError)) as info:
        tile_function(src)
    assert info.value.line == 2


def test_non_affine_product_of_indices():
    src = "function (A[N], B[N, N]) -> (O) {\n    O[i : N] = +(A[i * j] * B[i, j]);\n}\n"
    with pytest.raises(TileAffineError) as info:
        tile_function(src)
    err = info.value
    assert "i" in str(err) and "j" in str(err)
    _assert_points_into_statement(err, src, "i * j")


def test_non_affine_dimension_times_index():
    src = "function (A[N], B[M]) -> (O) {\n    O[i : M] = +(A[N * i] * B[i]);\n}\n"
    with pytest.raises(TileAffineError) as info:
        tile_function(src)
    _assert_points_into_statement(info.value, src, "N * i")


def test_tensor_assigned_twice():
    src = "function (A) -> (O) {\n    O = A + 1;\n    O = A * 2;\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    err = info.value
    assert "O" in str(err)
    assert err.line == 3, err


def test_input_reassigned():
    src = "function (A) -> (O) {\n    A = A + 1;\n    O = A;\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    assert info.value.line == 2


def test_name_both_dimension_and_tensor():
    src = "function (A[N]) -> (O) {\n    N = A + 1;\n    O = N;\n}\n"
    with pytest.raises(TileNameError) as info:
        tile_function(src)
    assert "N" in str(info.value)


def test_duplicate_output_names():
    src = "function (A) -> (O, O) {\n    O = A;\n}\n"
    with pytest.raises(TileNameError):
        tile_function(src)


def test_unbounded_variable_via_constraint_only_two_variables():
    # j appears only in the output and in no access or constraint: an index error.
    src = "function (A[N]) -> (O) {\n    O[i, j : N, 3] = +(A[i]), i < 2;\n}\n"
    with pytest.raises(TileIndexError) as info:
        tile_function(src)
    assert "j" in str(info.value)


def test_conflict_detected_statically_when_provable():
    # O[i] = =(A[i, k]) with k not in the output: provably many-to-one once K > 1.
    src = "function (A[N, K]) -> (O) {\n    O[i : N] = =(A[i, k]);\n}\n"
    a = np.arange(6, dtype=np.float64).reshape(3, 2)
    with pytest.raises(TileConflictError) as info:
        fn = tile_function(src)
        fn(a)
    assert "O" in str(info.value)


def test_conflict_on_every_device(device):
    src = "function (A[N, K]) -> (O) {\n    O[i : N] = =(A[i, k]);\n}\n"
    a = np.arange(6, dtype=np.float64).reshape(3, 2)
    with pytest.raises(TileConflictError):
        tile_function(src)(a, device=device)


def test_conflict_at_run_time_reference():
    # O[i + j] = =(A[i, j]): (0, 1) and (1, 0) both write cell 1.
    src = "function (A[N, M]) -> (O) {\n    O[i + j : N + M] = =(A[i, j]);\n}\n"
    a = np.ones((2, 2))
    with pytest.raises(TileConflictError):
        tile_function(src)(a, device="reference")


# ---------------------------------------------------------------------------------------------
# Found at call time
# ---------------------------------------------------------------------------------------------

MATMUL = "function (A[M, K], B[K, N]) -> (C) {\n    C[i, j : M, N] = +(A[i, k] * B[k, j]);\n}\n"


def test_rank_mismatch_names_tensor(device):
    fn = tile_function(MATMUL)
    with pytest.raises(TileShapeError) as info:
        fn(np.zeros((2, 3, 4)), np.zeros((4, 5)), device=device)
    msg = str(info.value)
    assert "A" in msg and "3" in msg and "2" in msg, msg


def test_rank_mismatch_second_argument(device):
    fn = tile_function(MATMUL)
    with pytest.raises(TileShapeError) as info:
        fn(np.zeros((2, 3)), np.zeros(3), device=device)
    assert "B" in str(info.value)


def test_shared_dimension_mismatch(device):
    fn = tile_function(MATMUL)
    with pytest.raises(TileShapeError) as info:
        fn(np.zeros((2, 3)), np.zeros((4, 5)), device=device)
    msg = str(info.value)
    assert "K" in msg and "3" in msg and "4" in msg, msg


def test_square_dimension_equality(device):
    fn = tile_function("function (A[N, N]) -> (O) {\n    O[i : N] = +(A[i, j]);\n}\n")
    with pytest.raises(TileShapeError) as info:
        fn(np.zeros((3, 4)), device=device)
    msg = str(info.value)
    assert "N" in msg and "3" in msg and "4" in msg and "A" in msg, msg


def test_literal_header_dimension(device):
    fn = tile_function("function (A[3, N]) -> (O) {\n    O[j : N] = +(A[i, j]);\n}\n")
    with pytest.raises(TileShapeError) as info:
        fn(np.zeros((4, 2)), device=device)
    msg = str(info.value)
    assert "A" in msg and "3" in msg and "4" in msg, msg


@pytest.mark.parametrize("n_args", [1, 3])
def test_wrong_number_of_arguments(device, n_args):
    fn = tile_function(MATMUL)
    args = [np.zeros((2, 2))] * n_args
    with pytest.raises(TileError) as info:
        fn(*args, device=device)
    msg = str(info.value)
    assert "2" in msg and str(n_args) in msg, msg


def test_broadcasting_mismatch(device):
    src = "function (A, B) -> (C) {\n    C = A + B;\n}\n"
    fn = tile_function(src)
    with pytest.raises(TileShapeError) as info:
        fn(np.zeros((3, 4)), np.zeros(5), device=device)
    msg = str(info.value)
    assert "4" in msg and "5" in msg, msg
    assert info.value.line in (None, 2)


def test_bitand_on_floats(device):
    src = "function (A, B) -> (C) {\n    C = A & B;\n}\n"
    fn = tile_function(src)
    with pytest.raises(TileTypeError) as info:
        fn(np.zeros(3), np.zeros(3), device=device)
    assert "&" in str(info.value)


@pytest.mark.parametrize("op", ["|", "^", "<<", ">>"])
def test_bit_ops_on_floats(device, op):
    fn = tile_function(f"function (A, B) -> (C) {{\n    C = A {op} B;\n}}\n")
    with pytest.raises(TileTypeError):
        fn(np.zeros(3, np.float32), np.zeros(3, np.float32), device=device)


def test_shift_on_bool_is_type_error(device):
    fn = tile_function("function (A, B) -> (C) {\n    C = A << B;\n}\n")
    with pytest.raises(TileTypeError):
        fn(np.ones(2, bool), np.ones(2, bool), device=device)


def test_reshape_count_mismatch(device):
    fn = tile_function("function (X) -> (O) {\n    O = reshape(X, 5);\n}\n")
    with pytest.raises(TileShapeError):
        fn(np.zeros((2, 3)), device=device)


def test_default_shape_mismatch(device):
    src = "function (A[N, K], B[M]) -> (O) {\n    O[i : N] = +(A[i, k]) default B;\n}\n"
    fn = tile_function(src)
    with pytest.raises(TileShapeError):
        fn(np.zeros((3, 2)), np.zeros(4), device=device)


def test_gather_with_float_indices(device):
    fn = tile_function("function (X, I) -> (O) {\n    O = gather(X, I);\n}\n")
    with pytest.raises(TileTypeError):
        fn(np.zeros((3, 2)), np.zeros(2), device=device)


def test_unsupported_dtype(device):
    fn = tile_function("function (X) -> (O) {\n    O = X + 1;\n}\n")
    with pytest.raises((TileError, TypeError)) as info:
        fn(np.zeros(3, np.complex128), device=device)
    assert "complex" in str(info.value)
