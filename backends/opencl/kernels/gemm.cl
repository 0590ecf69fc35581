/* C = alpha op(A) op(B) + beta C, row-major, f32, batched over dimension 2
 * of the range (conv2d runs one GEMM per image or per output row).
 *
 * A work-group of WN x WM work-items computes a TM x TN tile of C; each
 * work-item holds an (TM/WM) x (TN/WN) block of accumulators in registers.
 * Per step of TK, the tiles of op(A) and op(B) are staged in local memory,
 * loaded with the fastest-varying index along the stored row so that the
 * loads are contiguous whatever the transposes. A work-item's rows and
 * columns are strided by WM and WN (not contiguous) so that neighbouring
 * work-items read neighbouring local words (no bank conflicts on GPUs) and
 * write neighbouring C entries (vector stores on CPU implementations that
 * vectorize across dimension 0).
 *
 * Tile sizes are build options chosen per device type (opencl_program.c):
 * TM, TN, TK, WM, WN, with TM % WM == 0, TN % WN == 0, and TM * TK and
 * TK * TN multiples of WM * WN. */
#define RM (TM / WM)
#define RN (TN / WN)
#define WG (WM * WN)

#ifndef LOCUS_CPU_KERNELS

__kernel __attribute__((reqd_work_group_size(WN, WM, 1))) void
locus_gemm(uint m, uint n, uint k, __global const float *a, ulong a_off,
           uint lda, ulong a_batch, __global const float *b, ulong b_off,
           uint ldb, ulong b_batch, __global float *c, ulong c_off, uint ldc,
           ulong c_batch, float alpha, float beta, int trans_a, int trans_b)
{
    __local float as[TK][TM + 1];
    __local float bs[TK][TN + 1];
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint tid = ty * WN + tx;
    const uint row0 = get_group_id(1) * TM, col0 = get_group_id(0) * TN;
    const ulong batch = get_global_id(2);
    a += a_off + batch * a_batch;
    b += b_off + batch * b_batch;
    c += c_off + batch * c_batch;

    float acc[RM][RN];
    for (int i = 0; i < RM; i++)
        for (int j = 0; j < RN; j++)
            acc[i][j] = 0.0f;

    for (uint p0 = 0; p0 < k; p0 += TK) {
        for (uint e = tid; e < TM * TK; e += WG) {
            /* Stored A is m x k (or k x m transposed): its row index is the
             * slow one. */
            uint i, p;
            if (trans_a) {
                i = e % TM;
                p = e / TM;
            } else {
                p = e % TK;
                i = e / TK;
            }
            const uint gi = row0 + i, gp = p0 + p;
            float v = 0.0f;
            if (gi < m && gp < k)
                v = trans_a ? a[(size_t)gp * lda + gi]
                            : a[(size_t)gi * lda + gp];
            as[p][i] = v;
        }
        for (uint e = tid; e < TK * TN; e += WG) {
            uint p, j;
            if (trans_b) {
                p = e % TK;
                j = e / TK;
            } else {
                j = e % TN;
                p = e / TN;
            }
            const uint gp = p0 + p, gj = col0 + j;
            float v = 0.0f;
            if (gp < k && gj < n)
                v = trans_b ? b[(size_t)gj * ldb + gp]
                            : b[(size_t)gp * ldb + gj];
            bs[p][j] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = 0; p < TK; p++) {
            float ar[RM], br[RN];
            for (int i = 0; i < RM; i++)
                ar[i] = as[p][ty + i * WM];
            for (int j = 0; j < RN; j++)
                br[j] = bs[p][tx + j * WN];
            for (int i = 0; i < RM; i++)
                for (int j = 0; j < RN; j++)
                    acc[i][j] = mad(ar[i], br[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int i = 0; i < RM; i++) {
        const uint gi = row0 + ty + i * WM;
        if (gi >= m)
            continue;
        for (int j = 0; j < RN; j++) {
            const uint gj = col0 + tx + j * WN;
            if (gj >= n)
                continue;
            float v = alpha * acc[i][j];
            /* beta == 0 never reads C: NaN there must not propagate. */
            if (beta != 0.0f)
                v = mad(beta, c[(size_t)gi * ldc + gj], v);
            c[(size_t)gi * ldc + gj] = v;
        }
    }
}

#else /* LOCUS_CPU_KERNELS */

/* The CPU variant (PoCL and other implementations that run a work-group as
 * loops over its work-items on one thread), the Goto/BLIS loop nest of the
 * CPU backend (backends/cpu/gemm_block.h) inside one work-item: local
 * memory and barriers cost a save and restore of every work-item's private
 * state per barrier there, which is what the GPU kernel above is built of,
 * so a work-group here is a single work-item that owns a block of C of up
 * to TM x TN and does its own cache blocking:
 *
 *   for each slice of k (at most TK deep, all of even depth):
 *       pack its op(B) block, TK x TN, into NR-column panels (local memory,
 *           which is plain per-thread memory on a CPU device)
 *       pack its op(A) block, TM x TK, as rows
 *       for each NR-column panel of B (TK x NR, held in L1):
 *           for each MR rows of A (the A block stays in L2):
 *               MR x NR micro-kernel over the slice, into C
 *
 * The micro-kernel is the CPU backend's AVX2 shape, MR = 6 rows by
 * NR = 16 columns: twelve float8 accumulators, the B row loaded as two
 * vectors and each A entry broadcast, 15 of the 16 vector registers. The
 * packing reads op(A) and op(B) through their transposes and leading
 * dimensions and pads the edges with zeros, so the micro-kernel has no
 * edge case and no transpose: only the stores of C check their bounds.
 *
 * The block a group owns is the even share of m and n over the groups of
 * the range (opencl_launch.c chooses how many, at least ceil(m / TM) by
 * ceil(n / TN)), rounded up to whole micro-tiles; dimension 2 is the
 * batch. TM % MR == 0, TN % NR == 0 and TK % 8 == 0; the micro-kernel is
 * written out for MR = 6. */
#define MR 6
#define NR 16

/* The packed blocks are 64-byte aligned and their rows and panels start
 * at multiples of 8 floats, so they are read and written as whole float8.
 * The sources are in general not aligned (offsets, leading dimensions),
 * where vload8 is the only legal load; PoCL compiles it into 16-byte
 * halves, which made packing a fifth of the conv GEMMs' time, so aligned
 * sources (the usual buffer at a multiple of 8 floats) take float8 loads.
 */
#define ALIGNED8(p) ((((uintptr_t)(p)) & 31) == 0)

/* count floats from src to dst (dst aligned). */
static void copy_row(__global const float *src, __local float *dst, uint count)
{
    uint p = 0;
    if (ALIGNED8(src))
        for (; p + 8 <= count; p += 8)
            *(__local float8 *)(dst + p) = *(__global const float8 *)(src + p);
    else
        for (; p + 8 <= count; p += 8)
            *(__local float8 *)(dst + p) = vload8(0, src + p);
    for (; p < count; p++)
        dst[p] = src[p];
}

/* The op(A) block, rows [i0, i0 + rows) x [p0, p0 + kc), as rows of
 * `stride` floats (kc rounded up to 8; rows past m zero): the micro-kernel
 * reads MR of them side by side, so the common untransposed A is a plain
 * copy of contiguous rows, where the BLIS layout (MR entries per k step)
 * would be a transpose. */
static void pack_a(__global const float *a, uint lda, int trans_a, uint m,
                   uint i0, uint rows, uint p0, uint kc, uint stride,
                   __local float *ap)
{
    for (uint r = 0; r < rows; r++) {
        __local float *dst = ap + (size_t)r * stride;
        const uint i = i0 + r;
        if (i >= m) {
            for (uint p = 0; p < kc; p++)
                dst[p] = 0.0f;
        } else if (trans_a) {
            __global const float *src = a + (size_t)p0 * lda + i;
            for (uint p = 0; p < kc; p++)
                dst[p] = src[(size_t)p * lda];
        } else {
            copy_row(a + (size_t)i * lda + p0, dst, kc);
        }
    }
}

/* Zero-padded NR-column panels of op(B) rows [p0, p0 + kc) x columns
 * [j0, j0 + cols): panel q holds, for each p, its NR columns. */
static void pack_b(__global const float *b, uint ldb, int trans_b, uint n,
                   uint j0, uint cols, uint p0, uint kc, __local float *bp)
{
    for (uint q = 0; q < cols; q += NR) {
        __local float *panel = bp + (size_t)q * kc;
        const uint j = j0 + q;
        if (!trans_b && j + NR <= n) {
            /* The common case: rows of B hold the panel's columns
             * contiguously. */
            __global const float *src = b + (size_t)p0 * ldb + j;
            if (ALIGNED8(src) && ldb % 8 == 0) {
                for (uint p = 0; p < kc; p++, src += ldb) {
                    __local float8 *dst = (__local float8 *)(panel + p * NR);
                    dst[0] = ((__global const float8 *)src)[0];
                    dst[1] = ((__global const float8 *)src)[1];
                }
            } else {
                for (uint p = 0; p < kc; p++, src += ldb) {
                    __local float8 *dst = (__local float8 *)(panel + p * NR);
                    dst[0] = vload8(0, src);
                    dst[1] = vload8(1, src);
                }
            }
            continue;
        }
        if (!trans_b) {
            /* The last panel, n - j < NR columns: row by row, as above,
             * then zeros (conv's per-row GEMMs, n = Q, end in one of
             * these, so it is no rare case). */
            const uint valid = n - j;
            __global const float *src = b + (size_t)p0 * ldb + j;
            for (uint p = 0; p < kc; p++, src += ldb) {
                __local float *dst = panel + p * NR;
                uint c = 0;
                if (valid >= 8) {
                    vstore8(vload8(0, src), 0, dst);
                    c = 8;
                }
                for (; c < valid; c++)
                    dst[c] = src[c];
                for (; c < NR; c++)
                    dst[c] = 0.0f;
            }
            continue;
        }
        /* Transposed B: its rows are the panel's columns. */
        for (uint c = 0; c < NR; c++) {
            if (j + c >= n) {
                for (uint p = 0; p < kc; p++)
                    panel[p * NR + c] = 0.0f;
                continue;
            }
            __global const float *src = b + (size_t)(j + c) * ldb + p0;
            for (uint p = 0; p < kc; p++)
                panel[p * NR + c] = src[p];
        }
    }
}

/* C tile (rows x cols at c, at most MR x NR) = alpha acc + beta C on the
 * first slice of k, C + alpha acc on the later ones. */
static void store_tile(__global float *c, uint ldc, uint rows, uint cols,
                       const float8 *lo, const float8 *hi, float alpha,
                       float beta, int first)
{
    if (rows == MR && cols == NR) {
        for (int i = 0; i < MR; i++) {
            __global float *cp = c + (size_t)i * ldc;
            float8 r0 = alpha * lo[i], r1 = alpha * hi[i];
            if (!first) {
                r0 += vload8(0, cp);
                r1 += vload8(1, cp);
            } else if (beta != 0.0f) {
                /* beta == 0 never reads C: NaN there must not
                 * propagate. */
                r0 = fma((float8)(beta), vload8(0, cp), r0);
                r1 = fma((float8)(beta), vload8(1, cp), r1);
            }
            vstore8(r0, 0, cp);
            vstore8(r1, 1, cp);
        }
        return;
    }
    for (uint i = 0; i < rows; i++) {
        float row[NR];
        vstore8(lo[i], 0, row);
        vstore8(hi[i], 1, row);
        __global float *cp = c + (size_t)i * ldc;
        for (uint j = 0; j < cols; j++) {
            float v = alpha * row[j];
            if (!first)
                v += cp[j];
            else if (beta != 0.0f)
                v = fma(beta, cp[j], v);
            cp[j] = v;
        }
    }
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
locus_gemm(uint m, uint n, uint k, __global const float *a, ulong a_off,
           uint lda, ulong a_batch, __global const float *b, ulong b_off,
           uint ldb, ulong b_batch, __global float *c, ulong c_off, uint ldc,
           ulong c_batch, float alpha, float beta, int trans_a, int trans_b)
{
    __local float ap[TM * TK] __attribute__((aligned(64)));
    __local float bp[TK * TN] __attribute__((aligned(64)));
    /* This group's share of m and n, in whole micro-tiles. */
    const uint gm = get_num_groups(1), gn = get_num_groups(0);
    const uint tiles_m = (m + MR - 1) / MR, tiles_n = (n + NR - 1) / NR;
    const uint mb = (tiles_m + gm - 1) / gm * MR;
    const uint nb = (tiles_n + gn - 1) / gn * NR;
    const uint i0 = get_group_id(1) * mb, j0 = get_group_id(0) * nb;
    if (i0 >= m || j0 >= n)
        return;
    const uint rows = min(mb, (m - i0 + MR - 1) / MR * MR);
    const uint cols = min(nb, (n - j0 + NR - 1) / NR * NR);
    const ulong batch = get_global_id(2);
    a += a_off + batch * a_batch;
    b += b_off + batch * b_batch;
    c += c_off + batch * c_batch;

    /* Slices of even depth, at most TK (k >= 1: the runtime refuses empty
     * products): conv's k = 576 as 3 x 192 rather than 256, 256 and 64,
     * whose short last slice pays a C tile's load and store per 64 steps. */
    const uint slices = (k + TK - 1) / TK;
    const uint depth = (k + slices - 1) / slices;
    for (uint p0 = 0; p0 < k; p0 += depth) {
        const uint kc = min(depth, k - p0);
        pack_b(b, ldb, trans_b, n, j0, cols, p0, kc, bp);
        const uint stride = (kc + 7) / 8 * 8;
        pack_a(a, lda, trans_a, m, i0, rows, p0, kc, stride, ap);
        for (uint jq = 0; jq < cols; jq += NR) {
            __local const float *bq = bp + (size_t)jq * kc;
            for (uint iq = 0; iq < rows; iq += MR) {
                __local const float *aq = ap + (size_t)iq * stride;
                /* Written out rather than as arrays in a loop: PoCL's
                 * compiler left such arrays on the stack, a load and a
                 * store per multiply-add. */
                float8 l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f, l4 = 0.0f,
                       l5 = 0.0f, h0 = 0.0f, h1 = 0.0f, h2 = 0.0f, h3 = 0.0f,
                       h4 = 0.0f, h5 = 0.0f;
                __local const float *a0 = aq, *a1 = aq + stride,
                                    *a2 = aq + 2 * stride,
                                    *a3 = aq + 3 * stride,
                                    *a4 = aq + 4 * stride,
                                    *a5 = aq + 5 * stride, *bk = bq;
                for (uint p = 0; p < kc; p++, bk += NR) {
                    const float8 b0 = ((__local const float8 *)bk)[0];
                    const float8 b1 = ((__local const float8 *)bk)[1];
                    float8 av = (float8)(a0[p]);
                    l0 = fma(av, b0, l0);
                    h0 = fma(av, b1, h0);
                    av = (float8)(a1[p]);
                    l1 = fma(av, b0, l1);
                    h1 = fma(av, b1, h1);
                    av = (float8)(a2[p]);
                    l2 = fma(av, b0, l2);
                    h2 = fma(av, b1, h2);
                    av = (float8)(a3[p]);
                    l3 = fma(av, b0, l3);
                    h3 = fma(av, b1, h3);
                    av = (float8)(a4[p]);
                    l4 = fma(av, b0, l4);
                    h4 = fma(av, b1, h4);
                    av = (float8)(a5[p]);
                    l5 = fma(av, b0, l5);
                    h5 = fma(av, b1, h5);
                }
                const float8 lo[MR] = {l0, l1, l2, l3, l4, l5};
                const float8 hi[MR] = {h0, h1, h2, h3, h4, h5};
                /* rows and cols end in the panel that holds m - 1 and
                 * n - 1: every tile has a row and a column in C. */
                const uint i = i0 + iq, j = j0 + jq;
                store_tile(c + (size_t)i * ldc + j, ldc, min((uint)MR, m - i),
                           min((uint)NR, n - j), lo, hi, alpha, beta, p0 == 0);
            }
        }
    }
}

#endif /* LOCUS_CPU_KERNELS */
