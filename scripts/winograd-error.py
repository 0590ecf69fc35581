#!/usr/bin/env python3
"""Float32 emulation of the CUDA backend's Winograd F(2x2, 3x3) convolution
(backends/cuda/conv_winograd.cu) against a float64 direct sum, on the shapes
of tests/gpu/test_device_conv.c, with the test's metric:

    error = |got - expected| / sum |terms of the direct sum|

and with the test's Winograd metric, which divides by the largest such sum
among the outputs of the output's 2x2 tile instead (tile_max below), both
in units of the mode's roundoff (2^-24 fp32, 2^-11 tf32, 2^-21 3xtf32).
The first has a heavy tail at outputs that are mostly padding (pad 3): an
output whose few terms happen to be small shares its tile's rounding with
neighbours whose terms are not; the second does not. Every step rounds to float32
as the GPU does: the transforms term by term in the kernels' order, the
GEMM's accumulation one channel at a time (no FMA: a little pessimistic).
tf32 rounds (or, as wgmma does, truncates) the GEMM's operands U and V to
10 mantissa bits first; 3xtf32 splits each into two such parts.

Usage: scripts/winograd-error.py [seeds]   (numpy only)
"""
import sys

import numpy as np

F = np.float32

# The test's cases with a 3x3 filter and stride 1: (batch, C, H, W, K, pad).
CASES = [(b, 3, 11, 13, 5, p) for b in (1, 3) for p in (0, 1, 3)] + [
    (2, 32, 28, 28, 64, 1),
    (2, 19, 10, 9, 130, 1),
    (2, 130, 9, 7, 100, 1),
]


def tf32(x, truncate):
    bits = np.asarray(x, dtype=F).view(np.uint32).astype(np.uint64)
    if not truncate:
        bits = bits + 0x1000  # round half away: a bound, like the mma's
    return (bits & 0xFFFFE000).astype(np.uint32).view(F)


def operands(x, mode):
    """The (big, small) parts the GEMM multiplies in `mode`."""
    if mode == "fp32":
        return [x]
    if mode in ("tf32", "tf32-trunc"):
        return [tf32(x, mode == "tf32-trunc")]
    big = tf32(x, False)
    return [big, tf32(x - big, False)]


def filter_transform(g):
    """U = G g G^T, (K, C, 3, 3) -> (4, 4, K, C), in float32."""
    h = F(0.5)
    t = [g[:, :, 0, :], h * (g[:, :, 0, :] + g[:, :, 1, :] + g[:, :, 2, :]),
         h * (g[:, :, 0, :] - g[:, :, 1, :] + g[:, :, 2, :]), g[:, :, 2, :]]
    u = np.empty((4, 4) + g.shape[:2], dtype=F)
    for j in range(4):
        r = t[j]
        u[j, 0] = r[..., 0]
        u[j, 1] = h * (r[..., 0] + r[..., 1] + r[..., 2])
        u[j, 2] = h * (r[..., 0] - r[..., 1] + r[..., 2])
        u[j, 3] = r[..., 2]
    return u


def input_transform(x, pad, th, tw):
    """V = B^T d B over 4x4 tiles at stride 2: (N, C, H, W) -> (4, 4, C, T)."""
    n, c, h, w = x.shape
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype=F)
    hh = min(h, 2 * th + 2 - pad)
    ww = min(w, 2 * tw + 2 - pad)
    xp[:, :, pad:pad + hh, pad:pad + ww] = x[:, :, :hh, :ww]
    d = np.empty((4, 4, n, c, th, tw), dtype=F)
    for i in range(4):
        for j in range(4):
            d[i, j] = xp[:, :, i:i + 2 * th:2, j:j + 2 * tw:2]

    def bt(a):  # B^T applied along the first axis
        return [a[0] - a[2], a[1] + a[2], a[2] - a[1], a[1] - a[3]]

    rows = bt(d)
    v = np.empty((4, 4, n, c, th, tw), dtype=F)
    for i in range(4):
        v[i] = np.stack(bt([rows[i][j] for j in range(4)]))
    # (4, 4, n, c, th, tw) -> (4, 4, c, n*th*tw)
    return v.transpose(0, 1, 3, 2, 4, 5).reshape(4, 4, c, -1)


def gemm(u, v, mode):
    """M[xi] = U[xi] V[xi], float32 accumulation over c in order."""
    us, vs = operands(u, mode), operands(v, mode)
    pairs = [(a, b) for a in us for b in vs][:3]  # 3xtf32 drops small*small
    acc = np.zeros(u.shape[:3] + (v.shape[3],), dtype=F)
    for c in range(u.shape[3]):
        for a, b in pairs:
            acc = acc + a[:, :, :, c, None] * b[:, :, None, c, :]
    return acc


def output_transform(m, n, th, tw, p, q):
    """Y = A^T m A: (4, 4, K, T) -> (N, K, P, Q)."""
    k = m.shape[2]
    t = [m[0] + m[1] + m[2], m[1] - m[2] - m[3]]
    y = np.empty((2, 2, k, m.shape[3]), dtype=F)
    for j in range(2):
        r = t[j]
        y[j, 0] = r[0] + r[1] + r[2]
        y[j, 1] = r[1] - r[2] - r[3]
    y = y.reshape(2, 2, k, n, th, tw).transpose(3, 2, 4, 0, 5, 1)
    return y.reshape(n, k, 2 * th, 2 * tw)[:, :, :p, :q]


def direct(x, g, pad):
    """float64 sum and sum |terms| of the direct convolution."""
    n, c, h, w = x.shape
    k = g.shape[0]
    p, q = h + 2 * pad - 2, w + 2 * pad - 2
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + w] = x
    s = np.zeros((n, k, p, q))
    a = np.zeros((n, k, p, q))
    for r in range(3):
        for t in range(3):
            win = xp[:, :, r:r + p, t:t + q]
            s += np.einsum("nchw,kc->nkhw", win, g[:, :, r, t].astype(float))
            a += np.einsum("nchw,kc->nkhw", np.abs(win),
                           np.abs(g[:, :, r, t].astype(float)))
    return s, a


def tile_max(a):
    """Each output's largest sum |terms| among the outputs of its 2x2 tile
    (those inside P x Q): the tile is computed together, so its rounding
    scales with the tile's terms, not with the one output's."""
    n, k, p, q = a.shape
    t = np.zeros((n, k, p + p % 2, q + q % 2))
    t[:, :, :p, :q] = a
    t = np.maximum(np.maximum(t[:, :, 0::2, 0::2], t[:, :, 1::2, 0::2]),
                   np.maximum(t[:, :, 0::2, 1::2], t[:, :, 1::2, 1::2]))
    return np.repeat(np.repeat(t, 2, 2), 2, 3)[:, :, :p, :q]


def worst(case, mode, rng):
    n, c, h, w, k, pad = case
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(F)
    g = rng.uniform(-1, 1, (k, c, 3, 3)).astype(F)
    p, q = h + 2 * pad - 2, w + 2 * pad - 2
    th, tw = (p + 1) // 2, (q + 1) // 2
    u = filter_transform(g)
    v = input_transform(x, pad, th, tw)
    y = output_transform(gemm(u, v, mode), n, th, tw, p, q)
    s, a = direct(x, g, pad)
    err = np.abs(y.astype(float) - s)
    t = tile_max(a)
    return (float((err / np.where(a > 0, a, 1.0)).max()),
            float((err / np.where(t > 0, t, 1.0)).max()))


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for mode, unit in (("fp32", 2.0**-24), ("tf32", 2.0**-11),
                       ("tf32-trunc", 2.0**-11), ("3xtf32", 2.0**-21)):
        print(f"{mode}: worst errors in units u = {unit:.3g}: "
              "by the output's own terms, by its tile's")
        for case in CASES:
            runs = [worst(case, mode, np.random.default_rng(s))
                    for s in range(seeds)]
            own = max(r[0] for r in runs) / unit
            tile = max(r[1] for r in runs) / unit
            print(f"  N{case[0]} C{case[1]} {case[2]}x{case[3]} K{case[4]} "
                  f"pad {case[5]}: {own:6.2f} u  {tile:5.2f} u  "
                  f"(sqrt(CRS) {(case[1] * 9) ** 0.5:.1f})")


if __name__ == "__main__":
    main()
