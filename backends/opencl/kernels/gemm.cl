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
 * loops over its work-items on one thread). Local memory and barriers
 * there cost a save and restore of every work-item's private state per
 * barrier, which is what the GPU kernel above is built of; so here each
 * work-item is a register-blocked micro-kernel like the CPU backend's
 * (RM rows x 16 columns, two float8 accumulators per row, the B row loaded
 * as vectors and each A entry broadcast), with no local memory and no
 * barrier. Work-items of a group take neighbouring blocks, so the B panel
 * they share stays in cache. RN must be 16. Edge blocks and transposed B
 * take the scalar path. */
__kernel __attribute__((reqd_work_group_size(WN, WM, 1))) void
locus_gemm(uint m, uint n, uint k, __global const float *a, ulong a_off,
           uint lda, ulong a_batch, __global const float *b, ulong b_off,
           uint ldb, ulong b_batch, __global float *c, ulong c_off, uint ldc,
           ulong c_batch, float alpha, float beta, int trans_a, int trans_b)
{
    const uint row0 = get_group_id(1) * TM + get_local_id(1) * RM;
    const uint col0 = get_group_id(0) * TN + get_local_id(0) * RN;
    const ulong batch = get_global_id(2);
    a += a_off + batch * a_batch;
    b += b_off + batch * b_batch;
    c += c_off + batch * c_batch;
    if (row0 >= m || col0 >= n)
        return;
    const size_t a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
    if (!trans_b && row0 + RM <= m && col0 + RN <= n) {
        float8 lo[RM], hi[RM];
        for (int i = 0; i < RM; i++)
            lo[i] = hi[i] = (float8)(0.0f);
        for (uint p = 0; p < k; p++) {
            __global const float *bp = b + (size_t)p * ldb + col0;
            const float8 b0 = vload8(0, bp), b1 = vload8(1, bp);
            __global const float *ap = a + (size_t)row0 * a_row + p * a_col;
            for (int i = 0; i < RM; i++) {
                const float8 av = (float8)(ap[i * a_row]);
                lo[i] = mad(av, b0, lo[i]);
                hi[i] = mad(av, b1, hi[i]);
            }
        }
        for (int i = 0; i < RM; i++) {
            __global float *cp = c + (size_t)(row0 + i) * ldc + col0;
            float8 r0 = alpha * lo[i], r1 = alpha * hi[i];
            /* beta == 0 never reads C: NaN there must not propagate. */
            if (beta != 0.0f) {
                r0 = mad(beta, vload8(0, cp), r0);
                r1 = mad(beta, vload8(1, cp), r1);
            }
            vstore8(r0, 0, cp);
            vstore8(r1, 1, cp);
        }
        return;
    }
    const size_t b_row = trans_b ? 1 : ldb, b_col = trans_b ? ldb : 1;
    const uint rows = min((uint)RM, m - row0), cols = min((uint)RN, n - col0);
    for (uint i = 0; i < rows; i++)
        for (uint j = 0; j < cols; j++) {
            float sum = 0.0f;
            for (uint p = 0; p < k; p++)
                sum = mad(a[(row0 + i) * a_row + p * a_col],
                          b[p * b_row + (col0 + j) * b_col], sum);
            __global float *cp = c + (size_t)(row0 + i) * ldc + col0 + j;
            float v = alpha * sum;
            if (beta != 0.0f)
                v = mad(beta, *cp, v);
            *cp = v;
        }
}

#endif /* LOCUS_CPU_KERNELS */
