/* The lowering passes of conv2d (NCHW input, KCRS filter); the GEMMs that
 * follow them are gemm.cl's. Same layouts as the CPU backend
 * (backends/cpu/im2col.c, backends/cpu/mec.c has MEC's derivation).
 *
 * GPU variant: one work-item per element written, the range flattened and
 * rounded up to whole work-groups, hence the bound check. CPU variant
 * (LOCUS_CPU_KERNELS): `total` is the number of rows of the lowered
 * matrix (or of the permuted filter), shared out over a few work-items per
 * core; a work-item finds each row's indices once and copies the row with
 * plain loops, where the element-wise kernels spent several 64-bit
 * divisions per float. */

#ifndef LOCUS_CPU_KERNELS

/* cols[i][(c R + r) S + s][p Q + q] = X[first + i][c][p sh + r - ph]
 * [q sw + s - pw], zero outside the image. The index is split with 32-bit
 * divisions wherever the range allows (a uniform branch): 64-bit ones
 * cost several times as much, and were most of this kernel's time. */
__kernel void locus_im2col(__global const float *x, ulong x_off,
                           __global float *cols, ulong total, uint C, uint H,
                           uint W, uint R, uint S, uint P, uint Q, uint sh,
                           uint sw, uint ph, uint pw)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const uint pq_count = P * Q, crs = C * R * S;
    ulong image;
    uint row, pq;
    if (total <= 0xffffffffUL) {
        const uint id32 = (uint)id, rest = id32 / pq_count;
        pq = id32 - rest * pq_count;
        image = rest / crs;
        row = rest - (uint)image * crs;
    } else {
        const ulong rest = id / pq_count;
        pq = (uint)(id - rest * pq_count);
        image = rest / crs;
        row = (uint)(rest - image * crs);
    }
    const uint rs_count = R * S;
    const uint c = row / rs_count, rs = row - c * rs_count;
    const uint r = rs / S, s = rs - r * S;
    const uint p = pq / Q, q = pq - p * Q;
    const int h = (int)(p * sh + r) - (int)ph;
    const int w = (int)(q * sw + s) - (int)pw;
    float v = 0.0f;
    if (h >= 0 && h < (int)H && w >= 0 && w < (int)W)
        v = x[x_off + ((image * C + c) * H + (uint)h) * W + (uint)w];
    cols[id] = v;
}

/* MEC's lowered matrix, per image (Hp C S) rows by Q columns:
 * L[i][h][c][s][q] = Xpad[first + i][c][h][q sw + s], Hp = H + 2 ph. */
__kernel void locus_mec_lower(__global const float *x, ulong x_off,
                              __global float *lowered, ulong total, uint C,
                              uint H, uint W, uint S, uint Q, uint sw,
                              uint ph, uint pw)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const uint q = id % Q;
    ulong rest = id / Q;
    const uint s = rest % S;
    rest /= S;
    const uint c = rest % C;
    rest /= C;
    const uint hp = H + 2 * ph;
    const uint hpad = rest % hp;
    const ulong image = rest / hp;
    const int h = (int)hpad - (int)ph;
    const int w = (int)(q * sw + s) - (int)pw;
    float v = 0.0f;
    if (h >= 0 && h < (int)H && w >= 0 && w < (int)W)
        v = x[x_off + ((image * C + c) * H + (uint)h) * W + (uint)w];
    lowered[id] = v;
}

/* F'[k][r][c][s] = F[k][c][r][s]: MEC contracts in (r, c, s) order. */
__kernel void locus_filter_krcs(__global const float *f,
                                __global float *permuted, ulong total, uint C,
                                uint R, uint S)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const uint s = id % S;
    ulong rest = id / S;
    const uint c = rest % C;
    rest /= C;
    const uint r = rest % R;
    const ulong k = rest / R;
    permuted[id] = f[((k * C + c) * R + r) * S + s];
}

#else /* LOCUS_CPU_KERNELS */

/* dst[q] = src[q sw + s - pw] for q < Q, zero where that is outside
 * [0, W); src is one input row, NULL for a row of padding. restrict: the
 * input and the workspace never overlap, and without it the copy loop
 * is not vectorized. */
static void lower_row(__global const float *restrict src,
                      __global float *restrict dst, uint Q, uint W, uint sw,
                      uint s, uint pw)
{
    /* The q whose column is inside the row: q_lo <= q < q_hi. */
    uint q_lo = 0, q_hi = 0;
    if (src != 0) {
        q_lo = s >= pw ? 0 : (pw - s + sw - 1) / sw;
        const uint reach = W + pw - s; /* columns w < W: q sw < reach */
        q_hi = s >= W + pw ? 0 : min(Q, (reach + sw - 1) / sw);
        q_lo = min(q_lo, q_hi);
    }
    for (uint q = 0; q < q_lo; q++)
        dst[q] = 0.0f;
    if (q_lo < q_hi && sw == 1) {
        /* A contiguous copy, which the compiler vectorizes. */
        __global const float *from = src + (q_lo + s - pw);
        for (uint q = q_lo; q < q_hi; q++)
            dst[q] = from[q - q_lo];
    } else if (q_lo < q_hi) {
        for (uint q = q_lo; q < q_hi; q++)
            dst[q] = src[q * sw + s - pw];
    }
    for (uint q = q_hi; q < Q; q++)
        dst[q] = 0.0f;
}

/* The rows [first, end) of a lowered matrix this work-item writes: an
 * even share of `total` over the range, which the host keeps to a few
 * work-items per core (PoCL pays for each one, microseconds, more than a
 * short row costs). */
static void my_rows(ulong total, ulong *first, ulong *end)
{
    const ulong items = get_global_size(0);
    const ulong share = (total + items - 1) / items;
    *first = min(total, get_global_id(0) * share);
    *end = min(total, *first + share);
}

/* Rows (c R + r) S + s of image i's column matrix, each P lines of Q. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
locus_im2col(__global const float *x, ulong x_off, __global float *cols,
             ulong total, uint C, uint H, uint W, uint R, uint S, uint P,
             uint Q, uint sh, uint sw, uint ph, uint pw)
{
    ulong id, end;
    my_rows(total, &id, &end);
    const uint crs = C * R * S;
    for (; id < end; id++) {
        const uint row = id % crs;
        const ulong image = id / crs;
        const uint s = row % S, r = (row / S) % R, c = row / (R * S);
        __global const float *plane = x + x_off + (image * C + c) * H * W;
        __global float *dst = cols + id * P * Q;
        for (uint p = 0; p < P; p++, dst += Q) {
            const int h = (int)(p * sh + r) - (int)ph;
            lower_row(h >= 0 && h < (int)H ? plane + (uint)h * W : 0, dst, Q, W,
                      sw, s, pw);
        }
    }
}

/* Rows (i, h, c, s) of the MEC matrix, Q floats each. */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
locus_mec_lower(__global const float *x, ulong x_off, __global float *lowered,
                ulong total, uint C, uint H, uint W, uint S, uint Q, uint sw,
                uint ph, uint pw)
{
    ulong id, end;
    my_rows(total, &id, &end);
    const uint hp = H + 2 * ph;
    for (; id < end; id++) {
        const uint s = id % S;
        ulong rest = id / S;
        const uint c = rest % C;
        rest /= C;
        const uint hpad = rest % hp;
        const ulong image = rest / hp;
        const int h = (int)hpad - (int)ph;
        __global const float *src =
            h >= 0 && h < (int)H
                ? x + x_off + ((image * C + c) * H + (uint)h) * W
                : 0;
        lower_row(src, lowered + id * Q, Q, W, sw, s, pw);
    }
}

/* Rows (k, r) of F': for each c, F[k][c][r][0 .. S). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
locus_filter_krcs(__global const float *f, __global float *permuted,
                  ulong total, uint C, uint R, uint S)
{
    ulong id, end;
    my_rows(total, &id, &end);
    for (; id < end; id++) {
        const uint r = id % R;
        const ulong k = id / R;
        __global float *dst = permuted + id * C * S;
        for (uint c = 0; c < C; c++)
            for (uint s = 0; s < S; s++)
                dst[c * S + s] = f[((k * C + c) * R + r) * S + s];
    }
}

#endif /* LOCUS_CPU_KERNELS */
