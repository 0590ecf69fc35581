"""ctx.gemm against numpy in float64 on every device: f32 and f64 (and f16
inputs where a device offers them) over odd shapes, both transposes,
C-contiguous, Fortran-ordered, row-strided and copied (negative-stride)
operands, and the BLAS rules for alpha and beta."""

import itertools

import locus
import numpy as np
import pytest
from conftest import DEVICES

rng = np.random.default_rng(2601)
SHAPES = [(1, 1, 1), (7, 3, 5), (33, 17, 1), (1, 40, 9), (65, 31, 47)]
EPS = {np.float32: 2.0**-24, np.float64: 2.0**-53, np.float16: 2.0**-24}


def layout(array, how):
    """The same values in another memory layout."""
    if how == "C":
        return np.array(array, order="C")  # a copy: c0 stays as it was
    if how == "F":
        return np.array(array, order="F")
    if how == "rows":  # every other row of a wider array: a leading dim
        wide = np.full((array.shape[0] * 2, array.shape[1] + 3), np.nan,
                       array.dtype)
        wide[::2, 1:array.shape[1] + 1] = array
        return wide[::2, 1:array.shape[1] + 1]
    if how == "reversed":  # a negative stride: copied by the binding
        return np.ascontiguousarray(array[::-1])[::-1]
    raise ValueError(how)


def check(result, a64, b64, c64, alpha, beta, k, dtype):
    expected = alpha * (a64 @ b64) + (beta * c64 if beta else 0)
    # locus.h's bounds: 2(k+4) u P; f16 inputs on CUDA's tensor cores
    # (8 + 8 sqrt(k)) u P, larger for small k.
    factor = 2 * (k + 4)
    if dtype == np.float16:
        factor = max(factor, 8 + 8 * np.sqrt(k))
    bound = factor * EPS[dtype] * (abs(alpha) * (abs(a64) @ abs(b64))
                                   + abs(beta * c64 if beta else 0))
    error = abs(result.astype(np.float64) - expected)
    assert (error <= bound + 1e-300).all(), error.max()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shapes_and_transposes(ctx, device, dtype):
    for (m, n, k), ta, tb in itertools.product(SHAPES, (False, True),
                                               (False, True)):
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        c = np.full((m, n), np.nan, dtype)
        got = ctx.gemm(a, b, c, trans_a=ta, trans_b=tb, device=device)
        assert got is c
        a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
        b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
        check(c, a64, b64, 0, 1.0, 0.0, k, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_memory_layouts(ctx, device, dtype):
    m, n, k = 13, 9, 11
    a0 = rng.standard_normal((m, k)).astype(dtype)
    b0 = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    for la, lb, lc in itertools.product(("C", "F", "rows", "reversed"),
                                        repeat=3):
        a, b, c = layout(a0, la), layout(b0, lb), layout(c0, lc)
        address = c.ctypes.data
        got = ctx.gemm(a, b, c, alpha=0.5, beta=-2.0, device=device)
        assert got is c and c.ctypes.data == address, (la, lb, lc)
        check(c, a0.astype(np.float64), b0.astype(np.float64),
              c0.astype(np.float64), 0.5, -2.0, k, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_rules(ctx, device, dtype):
    a = rng.standard_normal((6, 4)).astype(dtype)
    b = rng.standard_normal((4, 5)).astype(dtype)
    # beta 0: C is never read, its NaN never survive.
    c = np.full((6, 5), np.nan, dtype)
    ctx.gemm(a, b, c, alpha=2.0, beta=0.0, device=device)
    check(c, a.astype(np.float64), b.astype(np.float64), 0, 2.0, 0.0, 4,
          dtype)
    # alpha 0: A and B are not read (NaN there never reach C), C = beta C.
    nan_a = np.full_like(a, np.nan)
    c = rng.standard_normal((6, 5)).astype(dtype)
    before = c.copy()
    ctx.gemm(nan_a, b, c, alpha=0.0, beta=1.0, device=device)
    assert np.array_equal(c, before)
    ctx.gemm(nan_a, b, c, alpha=0.0, beta=0.0, device=device)
    assert (c == 0).all() and not np.signbit(c).any()
    # k == 0: C = beta C.
    c = before.copy()
    ctx.gemm(np.zeros((6, 0), dtype), np.zeros((0, 5), dtype), c,
             beta=3.0, device=device)
    np.testing.assert_array_equal(c, 3.0 * before)
    # m == 0: a quick return.
    empty = ctx.gemm(np.zeros((0, 4), dtype), b, device=device)
    assert empty.shape == (0, 5)
    assert ctx.last_record["algorithm"] == "quick return"
    # No c: a new array, alpha op(a) op(b).
    fresh = ctx.gemm(a, b, device=device)
    check(fresh, a.astype(np.float64), b.astype(np.float64), 0, 1.0, 0.0,
          4, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_f16_inputs(ctx, device):
    dev = ctx.device(device)
    if not dev.offers("gemm", "f16"):
        print(f"{device}: gemm in f16 not offered")
        return
    a = rng.standard_normal((17, 8)).astype(np.float16)
    b = rng.standard_normal((8, 5)).astype(np.float16)
    c = ctx.gemm(a, b, device=device)
    assert c.dtype == np.float32
    check(c, a.astype(np.float64), b.astype(np.float64), 0, 1.0, 0.0, 8,
          np.float16)
    with pytest.raises(locus.InvalidArgumentError):
        ctx.gemm(a, b, np.zeros((17, 5), np.float16), device=device)
