/* The lowering passes of conv2d (NCHW input, KCRS filter); the GEMMs that
 * follow them are gemm.cl's. Same layouts as the CPU backend
 * (backends/cpu/im2col.c, backends/cpu/mec.c has MEC's derivation). One
 * work-item per element written, the range flattened and rounded up to
 * whole work-groups, hence the bound check. */

/* cols[i][(c R + r) S + s][p Q + q] = X[first + i][c][p sh + r - ph]
 * [q sw + s - pw], zero outside the image. */
__kernel void locus_im2col(__global const float *x, ulong x_off,
                           __global float *cols, ulong total, uint C, uint H,
                           uint W, uint R, uint S, uint P, uint Q, uint sh,
                           uint sw, uint ph, uint pw)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const ulong pq_count = (ulong)P * Q;
    const ulong crs = (ulong)C * R * S;
    const uint pq = id % pq_count;
    const ulong rest = id / pq_count;
    const uint row = rest % crs;
    const ulong image = rest / crs;
    const uint s = row % S, r = (row / S) % R, c = row / (R * S);
    const uint p = pq / Q, q = pq % Q;
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
