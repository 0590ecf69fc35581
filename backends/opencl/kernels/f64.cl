/* The f64 kernels: reduce, GEMM, C = beta C and im2col in double, a
 * program of their own (opencl_program.c builds it at a device's first
 * f64 op, only where the device has cl_khr_fp64), so that the f32
 * program and its first op are untouched. The kernels keep the f32
 * program's names and arguments (doubles where those are floats), so the
 * host enqueues them the same way.
 *
 * Build options as the f32 program's: RWG (the reduce's work-group),
 * LOCUS_CPU_KERNELS for CPU implementations (PoCL), where a barrier saves
 * every work-item's state and so the GEMM below avoids local memory. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define LOCUS_SUM 0
#define LOCUS_MIN 1
#define LOCUS_MAX 2

/* ---- reduce --------------------------------------------------------- */

/* Sums are compensated: each work-item keeps four lanes of (s, c), every
 * value added to s by TwoSum and its exact rounding error to c; the lanes,
 * then the work-group's items (a tree in local memory), are folded the
 * same way, and the group writes its pair (s, c) to partials[2g], [2g + 1]
 * for the host to fold in group order (deterministic). The error is then
 * about 2u |S| + n u^2 sum |x|. Past an infinity or NaN, s is what the
 * plain sum gives and the error terms are dropped (they are NaN there).
 * min and max propagate NaN; between -0 and +0 either may win. */

static void add_pair(double *s, double *c, double s2, double c2)
{
    const double t = *s + s2;
    if (isfinite(t)) {
        const double v = t - *s;
        *c += c2 + ((*s - (t - v)) + (s2 - v));
    } else {
        *c = 0.0;
    }
    *s = t;
}

static double combine(int op, double acc, double v)
{
    if (op == LOCUS_MIN)
        return (isnan(acc) || v >= acc) ? acc : v;
    return (isnan(acc) || v <= acc) ? acc : v;
}

static double4 combine4(int op, double4 acc, double4 v)
{
    if (op == LOCUS_MIN)
        return select(v, acc, isnan(acc) || v >= acc);
    return select(v, acc, isnan(acc) || v <= acc);
}

/* The host makes every group's range start at a multiple of 4 RWG
 * values: whole aligned double4 loads, the at most 3 values past the last
 * whole one taken by the first work-items. With RWG 1 (the CPU variant)
 * each group is one work-item over a contiguous range. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
locus_reduce(__global const double *x, ulong n, ulong per_group, int op,
             __global double *partials)
{
    __local double tree_s[RWG], tree_c[RWG];
    const uint l = get_local_id(0);
    const ulong begin = get_group_id(0) * per_group;
    const ulong end = min(begin + per_group, n);
    const ulong whole_end = begin + (end - begin) / 4 * 4;
    __global const double4 *x4 = (__global const double4 *)x;
    double s, c = 0.0;
    if (op == LOCUS_SUM) {
        double4 s4 = (double4)(0.0), c4 = (double4)(0.0);
        for (ulong i = begin / 4 + l; i < whole_end / 4; i += RWG) {
            const double4 y = x4[i];
            const double4 t = s4 + y;
            const double4 v = t - s4;
            c4 = select((double4)(0.0), c4 + ((s4 - (t - v)) + (y - v)),
                        isfinite(t));
            s4 = t;
        }
        s = s4.x;
        c = c4.x;
        add_pair(&s, &c, s4.y, c4.y);
        add_pair(&s, &c, s4.z, c4.z);
        add_pair(&s, &c, s4.w, c4.w);
        for (ulong i = whole_end + l; i < end; i += RWG)
            add_pair(&s, &c, x[i], 0.0);
    } else {
        const double identity = op == LOCUS_MIN ? INFINITY : -INFINITY;
        double4 m4 = (double4)(identity);
        for (ulong i = begin / 4 + l; i < whole_end / 4; i += RWG)
            m4 = combine4(op, m4, x4[i]);
        s = combine(op, combine(op, m4.x, m4.y), combine(op, m4.z, m4.w));
        for (ulong i = whole_end + l; i < end; i += RWG)
            s = combine(op, s, x[i]);
    }
    tree_s[l] = s;
    tree_c[l] = c;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint width = RWG / 2; width > 0; width >>= 1) {
        if (l < width) {
            double ts = tree_s[l], tc = tree_c[l];
            if (op == LOCUS_SUM)
                add_pair(&ts, &tc, tree_s[l + width], tree_c[l + width]);
            else
                ts = combine(op, ts, tree_s[l + width]);
            tree_s[l] = ts;
            tree_c[l] = tc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) {
        partials[2 * get_group_id(0)] = tree_s[0];
        partials[2 * get_group_id(0) + 1] = tree_c[0];
    }
}

/* ---- gemm ----------------------------------------------------------- */

/* C = alpha op(A) op(B) + beta C, row-major, batched over dimension 2 of
 * the range (conv2d runs one GEMM per image), alpha and beta in double.
 * beta == 0 never reads C (NaN there must not propagate); alpha == 0 or
 * k == 0 never reaches this kernel (the host runs locus_gemm_scale_c).
 * Out-of-range elements of a tile load as zero; they meet only other
 * padding or outputs that are not stored. */
#define GEMM_PARAMS                                                            \
    uint m, uint n, uint k, __global const double *a, ulong a_off, uint lda,   \
        ulong a_batch, __global const double *b, ulong b_off, uint ldb,        \
        ulong b_batch, __global double *c, ulong c_off, uint ldc,              \
        ulong c_batch, double alpha, double beta, int trans_a, int trans_b

static void store_c(__global double *c, uint ldc, uint row, uint col,
                    double v, double alpha, double beta)
{
    __global double *p = c + (size_t)row * ldc + col;
    const double r = alpha * v;
    *p = beta != 0.0 ? fma(beta, *p, r) : r;
}

#ifndef LOCUS_CPU_KERNELS

/* GPU variant: a 16 x 16 work-group computes a 64 x 64 tile of C, each
 * work-item 4 x 4 results at rows ty + 16 i and columns tx + 16 j (so a
 * warp's local reads are broadcasts or consecutive doubles), over k steps
 * of 16 staged in local memory, k-major, rows padded by one against bank
 * conflicts. The loaders read along each operand's stored rows
 * (coalesced) whatever the transpose. */
#define TILE 64
#define DEPTH 16
#define SIDE 16

__kernel __attribute__((reqd_work_group_size(SIDE, SIDE, 1))) void
locus_gemm(GEMM_PARAMS)
{
    __local double as[DEPTH][TILE + 1];
    __local double bs[DEPTH][TILE + 1];
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint tid = ty * SIDE + tx;
    const uint m0 = get_group_id(1) * TILE, n0 = get_group_id(0) * TILE;
    const ulong z = get_global_id(2);
    a += a_off + z * a_batch;
    b += b_off + z * b_batch;
    c += c_off + z * c_batch;
    double acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0;
    for (uint k0 = 0; k0 < k; k0 += DEPTH) {
        for (uint v = 0; v < TILE * DEPTH / (SIDE * SIDE); v++) {
            const uint idx = tid + v * SIDE * SIDE;
            /* A element (mm, kk): a[i lda + p], or a[p lda + i]
             * transposed; B element (kk, nn): b[p ldb + j], or
             * b[j ldb + p] transposed. */
            const uint a_mm = trans_a ? idx % TILE : idx / DEPTH;
            const uint a_kk = trans_a ? idx / TILE : idx % DEPTH;
            const uint b_nn = trans_b ? idx / DEPTH : idx % TILE;
            const uint b_kk = trans_b ? idx % DEPTH : idx / TILE;
            const uint i = m0 + a_mm, pa = k0 + a_kk;
            const uint j = n0 + b_nn, pb = k0 + b_kk;
            double av = 0.0, bv = 0.0;
            if (i < m && pa < k)
                av = trans_a ? a[(size_t)pa * lda + i] : a[(size_t)i * lda + pa];
            if (j < n && pb < k)
                bv = trans_b ? b[(size_t)j * ldb + pb] : b[(size_t)pb * ldb + j];
            as[a_kk][a_mm] = av;
            bs[b_kk][b_nn] = bv;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint kk = 0; kk < DEPTH; kk++) {
            double ar[4], br[4];
            for (int i = 0; i < 4; i++)
                ar[i] = as[kk][ty + SIDE * i];
            for (int j = 0; j < 4; j++)
                br[j] = bs[kk][tx + SIDE * j];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fma(ar[i], br[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < 4; i++) {
        const uint row = m0 + ty + SIDE * i;
        if (row >= m)
            continue;
        for (int j = 0; j < 4; j++) {
            const uint col = n0 + tx + SIDE * j;
            if (col < n)
                store_c(c, ldc, row, col, acc[i][j], alpha, beta);
        }
    }
}

#else /* LOCUS_CPU_KERNELS */

/* CPU variant: no local memory and no barrier; each work-item computes 4
 * rows x 8 columns of C in four double8 accumulators, each step p
 * broadcasting A's four entries against B's row of 8 (one vector load
 * where op(B) is B and the 8 columns are inside it). The host launches
 * ceil(n / 8) x ceil(m / 4) x batch work-items in groups the
 * implementation picks (without barriers, PoCL runs a group as one loop). */
#define ROWS 4
#define COLS 8

__kernel void locus_gemm(GEMM_PARAMS)
{
    const uint j0 = get_global_id(0) * COLS, i0 = get_global_id(1) * ROWS;
    if (i0 >= m || j0 >= n)
        return;
    const ulong z = get_global_id(2);
    a += a_off + z * a_batch;
    b += b_off + z * b_batch;
    c += c_off + z * c_batch;
    double8 acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0;
    const int whole = !trans_b && j0 + COLS <= n;
    for (uint p = 0; p < k; p++) {
        double8 bv;
        if (whole) {
            bv = vload8(0, b + (size_t)p * ldb + j0);
        } else {
            double e[COLS];
            for (uint q = 0; q < COLS; q++)
                e[q] = j0 + q >= n  ? 0.0
                       : trans_b    ? b[(size_t)(j0 + q) * ldb + p]
                                    : b[(size_t)p * ldb + j0 + q];
            bv = vload8(0, e);
        }
        double ar[ROWS];
        for (uint r = 0; r < ROWS; r++)
            ar[r] = i0 + r >= m ? 0.0
                    : trans_a   ? a[(size_t)p * lda + i0 + r]
                                : a[(size_t)(i0 + r) * lda + p];
        acc0 = fma((double8)(ar[0]), bv, acc0);
        acc1 = fma((double8)(ar[1]), bv, acc1);
        acc2 = fma((double8)(ar[2]), bv, acc2);
        acc3 = fma((double8)(ar[3]), bv, acc3);
    }
    double rows[ROWS][COLS];
    vstore8(acc0, 0, rows[0]);
    vstore8(acc1, 0, rows[1]);
    vstore8(acc2, 0, rows[2]);
    vstore8(acc3, 0, rows[3]);
    for (uint r = 0; r < ROWS && i0 + r < m; r++)
        for (uint q = 0; q < COLS && j0 + q < n; q++)
            store_c(c, ldc, i0 + r, j0 + q, rows[r][q], alpha, beta);
}

#endif /* LOCUS_CPU_KERNELS */

/* C = beta C over m x n, one work-item an element: a GEMM whose alpha or
 * k is 0 (A and B are not read). beta == 0 stores zeros, so NaN or inf in
 * C do not survive; the host skips beta == 1. */
__kernel void locus_gemm_scale_c(uint m, uint n, __global double *c,
                                 ulong c_off, uint ldc, double beta)
{
    const size_t i = get_global_id(0);
    if (i >= (size_t)m * n)
        return;
    __global double *p = c + c_off + (i / n) * ldc + i % n;
    *p = beta == 0.0 ? 0.0 : beta * *p;
}

/* ---- conv2d's lowering ---------------------------------------------- */

/* cols[i][(c R + r) S + s][p Q + q] = X[first + i][c][p sh + r - ph]
 * [q sw + s - pw], zero outside the image: one work-item per element on
 * every device type (the f32 program's row copies for CPUs are an f32
 * tuning this program does without). */
__kernel void locus_im2col(__global const double *x, ulong x_off,
                           __global double *cols, ulong total, uint C, uint H,
                           uint W, uint R, uint S, uint P, uint Q, uint sh,
                           uint sw, uint ph, uint pw)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const ulong pq_count = (ulong)P * Q, crs = (ulong)C * R * S;
    const ulong rest = id / pq_count;
    const uint pq = (uint)(id - rest * pq_count);
    const ulong image = rest / crs;
    const uint row = (uint)(rest - image * crs);
    const uint rs_count = R * S;
    const uint ch = row / rs_count, rs = row - ch * rs_count;
    const uint r = rs / S, s = rs - r * S;
    const uint p = pq / Q, q = pq - p * Q;
    const int h = (int)(p * sh + r) - (int)ph;
    const int w = (int)(q * sw + s) - (int)pw;
    double v = 0.0;
    if (h >= 0 && h < (int)H && w >= 0 && w < (int)W)
        v = x[x_off + ((image * C + ch) * H + (uint)h) * W + (uint)w];
    cols[id] = v;
}
