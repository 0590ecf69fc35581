/* C = alpha op(A) op(B) + beta C, row-major, f32, batched over dimension 2
 * of the range (conv2d runs one GEMM per image or per output row), and on
 * GPUs the implicit-GEMM convolution built from the same body.
 *
 * Tile sizes are build options chosen per device type (opencl_program.c):
 * TM, TN, TK, WM, WN. The GPU variant takes TM = TN = 128, TK a multiple of
 * 8 and a work-group of WN x WM = 256 x 1 (its short kernels 64 x 128 tiles
 * and 128 work-items); the CPU variant is described below. */

#ifndef LOCUS_CPU_KERNELS

/* The GPU variant, after the CUDA backend's FP32 kernel (simt_kernel in
 * backends/cuda/gemm_kernels.cuh, loaders in gemm_tile.cuh):
 *
 * - a work-group of 256 work-items (a 1-D group, so that its warps are the
 *   runs of 32 consecutive local ids) computes a 128 x 128 tile of C, in
 *   2 x 4 warp tiles of 64 x 32; a work-item holds 8 x 8 results as 2 x 2
 *   blocks of 4 x 4, rows ly * 4 + {0, 32} and columns lx * 4 + {0, 16} of
 *   its warp tile (ly = lane / 4, lx = lane % 4). Each local read is then a
 *   float4, and a warp reads 8 (A) and 4 (B) distinct float4s, broadcast to
 *   the lanes that share them: no bank conflicts.
 * - The short kernels (locus_gemm_short, locus_conv_implicit_short) are
 *   the same body with 64-row tiles and 128 work-items (1 x 4 warp tiles,
 *   the same 8 x 8 a work-item), for m <= 64: a 128-row tile would
 *   compute, load and store a half past the end of C, and 64-filter layers
 *   (ResNet's first stage) are exactly that case. The CUDA backend takes
 *   the same tile for m <= 64 (choose_simt in gemm_kernels.cuh). Per SM it
 *   keeps as many warps resident (4 groups of 4 warps under the 128
 *   register cap, against 2 of 8), with half the work of a 128-row group
 *   and none of it wasted. Same program, so no second build.
 * - Both operand tiles are stored k-major in local memory, s[kk][mn], rows
 *   padded to the tile's extent + 4 floats (132, 68), whatever the
 *   operand's storage: the inner loop is the same for all transposes and
 *   only the loaders differ. The loaders read along the stored row
 *   (coalesced), a float4 per access where the operand allows it (base
 *   16-byte aligned, leading dimension a multiple of 4: every 4-aligned
 *   vector is then aligned) and the vector lies inside the matrix, else
 *   element by element with bounds checks; out-of-range elements load as
 *   zero, so the inner loop has no edges. The padding makes the
 *   transposing stores of a k-contiguous operand (132 and 68 = 4 mod 32)
 *   conflict-free at TK = 8.
 * - Local memory is double-buffered: the next tile's global loads go into
 *   registers before the math on the current tile and to the other buffer
 *   after it, one barrier per k step.
 * - The transposes only change the loaders, each of which is compiled
 *   for both layouts (the layout a constant after inlining); a uniform
 *   branch per k step picks one, the inner loop has none. Four bodies in
 *   uniform branches of one kernel, each with its own barrier loop, are
 *   miscompiled by PoCL 3.1 (the forced GPU tuning's test device: it
 *   stores the last unrolled row of the epilogue past m) and take it a
 *   minute to build. So each kernel below inlines the body once, its tile shape
 *   and B loader (matrix or convolution) compile-time constants.
 * - Epilogue: alpha and beta, beta == 0 never reading C (NaN there must
 *   not propagate), bounds checks at the edges, float4 stores where C
 *   allows them (aligned, ldc a multiple of 4: columns are multiples of 4).
 *
 * The alignment is checked here, on the batch entry's own pointers, rather
 * than by the host: the check then covers offsets and batch strides
 * exactly.
 *
 * The implicit-GEMM convolution (locus_conv_implicit and its short
 * variant): per image z, output_z (K x PQ) = filter (K x CRS) * cols_z,
 * where cols_z is image z's im2col matrix, never stored: the B loader
 * gathers element (kk, j), kk = (c, r, s) and j = (p, q), from the NCHW
 * image, X[z][c][p sh + r - ph][q sw + s - pw], zero outside (the CUDA
 * backend's ConvLoader, backends/cuda/conv.cu). Indices inside an image
 * are 32-bit (opencl_conv.c refuses shapes that do not fit): a 64-bit
 * division costs several 32-bit ones on GPUs. A work-item's columns j are
 * the same at every k step, so their (p, q) are split once, before the
 * k loop; its depth rows kk advance by TK a step, which is added to their
 * (c, r, s) digit by digit with carries: no division in the loop. */
#if TM != 128 || TN != 128 || WN != 256 || WM != 1
#error "the GPU gemm is written for 128 x 128 tiles and 256 x 1 work-items"
#endif
#if TK % 8 != 0
#error "the GPU gemm needs TK a multiple of 8"
#endif

#define GT 256       /* work-items of the 128-row kernels */
#define SHORT_TM 64  /* the short kernels' tile height */
#define SHORT_GT 128 /* and work-items */
#define LDS_B (TN + 4) /* local row length of B, a multiple of 4 */
/* The most float4 a work-item loads per operand tile (B in the short
 * kernels); the loops run over the tile's own count. */
#define VMAX (TN * TK / 4 / SHORT_GT)
#if GT % (TN / 4) != 0 || SHORT_GT % (TN / 4) != 0
#error "the conv loader needs every group's size a multiple of TN / 4"
#endif
#define ALIGNED4(p) ((((uintptr_t)(p)) & 15) == 0)
#define GEMM_INLINE inline __attribute__((always_inline))

/* This work-item's share (nt work-items) of the TK x tile_mn tile at
 * (mn0, k0) of an operand of extent ext_mn x ext_k, into r: element
 * (mn, kk) is at p[mn * ld + kk] when kc (k-contiguous: A not transposed,
 * B transposed), else at p[kk * ld + mn]. tile_mn, nt and kc are
 * constants after inlining. */
static GEMM_INLINE void load_tile(__global const float *p, uint ld,
                                  uint ext_mn, uint ext_k, uint mn0, uint k0,
                                  uint tid, const uint tile_mn, const uint nt,
                                  const int kc, const int vec, float4 *r)
{
    const uint count = tile_mn * TK / 4 / nt;
#pragma unroll
    for (uint v = 0; v < count; v++) {
        const uint idx = tid + v * nt;
        if (kc) {
            const uint mn = mn0 + idx / (TK / 4);
            const uint kk = k0 + idx % (TK / 4) * 4;
            __global const float *q = p + (size_t)mn * ld + kk;
            if (vec && mn < ext_mn && kk + 3 < ext_k)
                r[v] = *(__global const float4 *)q;
            else if (mn < ext_mn)
                r[v] = (float4)(kk < ext_k ? q[0] : 0.0f,
                                kk + 1 < ext_k ? q[1] : 0.0f,
                                kk + 2 < ext_k ? q[2] : 0.0f,
                                kk + 3 < ext_k ? q[3] : 0.0f);
            else
                r[v] = (float4)(0.0f);
        } else {
            const uint kk = k0 + idx / (tile_mn / 4);
            const uint mn = mn0 + idx % (tile_mn / 4) * 4;
            __global const float *q = p + (size_t)kk * ld + mn;
            if (vec && kk < ext_k && mn + 3 < ext_mn)
                r[v] = *(__global const float4 *)q;
            else if (kk < ext_k)
                r[v] = (float4)(mn < ext_mn ? q[0] : 0.0f,
                                mn + 1 < ext_mn ? q[1] : 0.0f,
                                mn + 2 < ext_mn ? q[2] : 0.0f,
                                mn + 3 < ext_mn ? q[3] : 0.0f);
            else
                r[v] = (float4)(0.0f);
        }
    }
}

/* r into the k-major local tile s (TK rows of lds floats). */
static GEMM_INLINE void store_tile(__local float *s, const uint lds, uint tid,
                                   const uint tile_mn, const uint nt,
                                   const int kc, const float4 *r)
{
    const uint count = tile_mn * TK / 4 / nt;
#pragma unroll
    for (uint v = 0; v < count; v++) {
        const uint idx = tid + v * nt;
        if (kc) {
            const uint row = idx / (TK / 4), kq = idx % (TK / 4) * 4;
            s[(kq + 0) * lds + row] = r[v].s0;
            s[(kq + 1) * lds + row] = r[v].s1;
            s[(kq + 2) * lds + row] = r[v].s2;
            s[(kq + 3) * lds + row] = r[v].s3;
        } else {
            const uint krow = idx / (tile_mn / 4), mq = idx % (tile_mn / 4) * 4;
            *(__local float4 *)(s + krow * lds + mq) = r[v];
        }
    }
}

/* The loaders for a layout known only at run time: a uniform branch per
 * k step, each side a loader specialized for its layout. */
static GEMM_INLINE void load_either(__global const float *p, uint ld,
                                    uint ext_mn, uint ext_k, uint mn0,
                                    uint k0, uint tid, const uint tile_mn,
                                    const uint nt, int kc, int vec, float4 *r)
{
    if (kc)
        load_tile(p, ld, ext_mn, ext_k, mn0, k0, tid, tile_mn, nt, 1, vec, r);
    else
        load_tile(p, ld, ext_mn, ext_k, mn0, k0, tid, tile_mn, nt, 0, vec, r);
}

static GEMM_INLINE void store_either(__local float *s, const uint lds,
                                     uint tid, const uint tile_mn,
                                     const uint nt, int kc, const float4 *r)
{
    if (kc)
        store_tile(s, lds, tid, tile_mn, nt, 1, r);
    else
        store_tile(s, lds, tid, tile_mn, nt, 0, r);
}

/* The convolution's shape, as the B loader reads it. */
typedef struct conv_geom {
    uint C, H, W, R, S, Q, sh, sw, ph, pw;
} conv_geom;

/* A work-item's place in the im2col matrix. Its 4 columns j .. j + 3 are
 * the same at every k step (nt is a multiple of TN / 4): hb and wb are
 * their p sh - ph and q sw - pw, a column past P Q having wb = W (so that
 * every w = wb + s is outside the image). Its depth rows kk[v], one per
 * vector, advance by TK a step, their digits c, r, s with them; TK is
 * dc, dr, ds in those digits. */
typedef struct conv_cursor {
    int hb[4], wb[4];
    uint kk[VMAX], c[VMAX], r[VMAX], s[VMAX];
    uint dc, dr, ds;
} conv_cursor;

static GEMM_INLINE void conv_start(conv_cursor *cc, const conv_geom *g,
                                   uint ext_n, uint n0, uint tid,
                                   const uint nt)
{
    const uint j = n0 + tid % (TN / 4) * 4;
    uint p = j / g->Q, q = j - p * g->Q;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int inside = j + e < ext_n;
        cc->hb[e] = inside ? (int)(p * g->sh) - (int)g->ph : 0;
        cc->wb[e] = inside ? (int)(q * g->sw) - (int)g->pw : (int)g->W;
        if (++q == g->Q) {
            q = 0;
            p++;
        }
    }
    const uint rs_count = g->R * g->S;
    const uint count = TN * TK / 4 / nt;
#pragma unroll
    for (uint v = 0; v < count; v++) {
        const uint kk = (tid + v * nt) / (TN / 4);
        const uint c = kk / rs_count, rs = kk - c * rs_count;
        cc->kk[v] = kk;
        cc->c[v] = c;
        cc->r[v] = rs / g->S;
        cc->s[v] = rs - cc->r[v] * g->S;
    }
    cc->ds = TK % g->S;
    cc->dr = TK / g->S % g->R;
    cc->dc = TK / rs_count;
}

/* The tile at the cursor's rows into r (the layout of load_tile's
 * mn-contiguous side: vector v is row kk[v], columns j .. j + 3). */
static GEMM_INLINE void conv_load(const conv_cursor *cc,
                                  __global const float *x, const conv_geom *g,
                                  uint ext_k, const uint nt, float4 *r)
{
    const uint count = TN * TK / 4 / nt;
#pragma unroll
    for (uint v = 0; v < count; v++) {
        float e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (cc->kk[v] < ext_k) {
            __global const float *plane = x + cc->c[v] * (g->H * g->W);
            const int rr = (int)cc->r[v], ss = (int)cc->s[v];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int h = cc->hb[i] + rr, w = cc->wb[i] + ss;
                if ((uint)h < g->H && (uint)w < g->W)
                    e[i] = plane[(uint)h * g->W + (uint)w];
            }
        }
        r[v] = (float4)(e[0], e[1], e[2], e[3]);
    }
}

/* The cursor's rows kk += TK, carried through (s, r, c): each digit sum is
 * below twice its radix, so one subtraction carries it. */
static GEMM_INLINE void conv_step(conv_cursor *cc, const conv_geom *g,
                                  const uint nt)
{
    const uint count = TN * TK / 4 / nt;
#pragma unroll
    for (uint v = 0; v < count; v++) {
        uint s = cc->s[v] + cc->ds, r = cc->r[v] + cc->dr,
             c = cc->c[v] + cc->dc;
        if (s >= g->S) {
            s -= g->S;
            r++;
        }
        if (r >= g->R) {
            r -= g->R;
            c++;
        }
        cc->kk[v] += TK;
        cc->s[v] = s;
        cc->r[v] = r;
        cc->c[v] = c;
    }
}

/* C[row][col .. col + 3] (row < m, col a multiple of 4) from v. */
static GEMM_INLINE void store_c4(__global float *cr, uint col, uint n,
                                 float4 v, float alpha, float beta,
                                 const int vec)
{
    if (vec && col + 3 < n) {
        __global float4 *p = (__global float4 *)(cr + col);
        float4 r = alpha * v;
        /* beta == 0 never reads C: NaN there must not propagate. */
        if (beta != 0.0f)
            r = fma((float4)(beta), *p, r);
        *p = r;
        return;
    }
    const float e[4] = {v.s0, v.s1, v.s2, v.s3};
#pragma unroll
    for (int q = 0; q < 4; q++) {
        if (col + q < n) {
            float r = alpha * e[q];
            if (beta != 0.0f)
                r = fma(beta, cr[col + q], r);
            cr[col + q] = r;
        }
    }
}

/* One bm x TN tile of C with nt work-items (bm, nt: 128, 256 or 64, 128),
 * for the transposes ta, tb; as holds two TK x (bm + 4) buffers, bs two
 * TK x LDS_B. conv (a constant): B is the im2col matrix of the image at b
 * (geometry g; ta = tb = 0, ldb unused), gathered by the conv_ loaders. */
static GEMM_INLINE void gemm_body(const uint bm, const uint nt, const int conv,
                                  uint m, uint n, uint k,
                                  __global const float *a, uint lda, int ta,
                                  __global const float *b, uint ldb, int tb,
                                  const conv_geom *g, __global float *c,
                                  uint ldc, float alpha, float beta,
                                  __local float *as, __local float *bs)
{
    const uint lds_a = bm + 4;
    const uint tid = get_local_id(0);
    const uint m0 = get_group_id(1) * bm, n0 = get_group_id(0) * TN;
    const uint warp = tid / 32, lane = tid % 32;
    const uint row_base = warp / 4 * 64 + lane / 4 * 4;
    const uint col_base = warp % 4 * 32 + lane % 4 * 4;
    /* Stored A is k-contiguous unless transposed, stored B only when
     * transposed. */
    const int kc_a = !ta, kc_b = tb;
    const int vec_a = ALIGNED4(a) && lda % 4 == 0;
    const int vec_b = ALIGNED4(b) && ldb % 4 == 0;

    float4 acc[8][2];
#pragma unroll
    for (int i = 0; i < 8; i++)
        acc[i][0] = acc[i][1] = (float4)(0.0f);

    float4 ra[VMAX], rb[VMAX];
    conv_cursor cc;
    if (conv)
        conv_start(&cc, g, n, n0, tid, nt);
    load_either(a, lda, m, k, m0, 0, tid, bm, nt, kc_a, vec_a, ra);
    if (conv) {
        conv_load(&cc, b, g, k, nt, rb);
        conv_step(&cc, g, nt);
    } else {
        load_either(b, ldb, n, k, n0, 0, tid, TN, nt, kc_b, vec_b, rb);
    }
    store_either(as, lds_a, tid, bm, nt, kc_a, ra);
    store_either(bs, LDS_B, tid, TN, nt, kc_b, rb);
    barrier(CLK_LOCAL_MEM_FENCE);

    const uint tiles = (k + TK - 1) / TK;
    uint cur = 0; /* 0 or 1: the buffer being read */
    for (uint t = 0; t < tiles; t++) {
        const int more = t + 1 < tiles;
        if (more) {
            load_either(a, lda, m, k, m0, (t + 1) * TK, tid, bm, nt, kc_a,
                        vec_a, ra);
            if (conv) {
                conv_load(&cc, b, g, k, nt, rb);
                conv_step(&cc, g, nt);
            } else {
                load_either(b, ldb, n, k, n0, (t + 1) * TK, tid, TN, nt,
                            kc_b, vec_b, rb);
            }
        }
        __local const float *ak = as + cur * TK * lds_a + row_base;
        __local const float *bk = bs + cur * TK * LDS_B + col_base;
#pragma unroll
        for (int kk = 0; kk < TK; kk++, ak += lds_a, bk += LDS_B) {
            const float4 a0 = *(__local const float4 *)ak;
            const float4 a1 = *(__local const float4 *)(ak + 32);
            const float4 b0 = *(__local const float4 *)bk;
            const float4 b1 = *(__local const float4 *)(bk + 16);
            const float ar[8] = {a0.s0, a0.s1, a0.s2, a0.s3,
                                 a1.s0, a1.s1, a1.s2, a1.s3};
#pragma unroll
            for (int i = 0; i < 8; i++) {
                acc[i][0] = mad((float4)(ar[i]), b0, acc[i][0]);
                acc[i][1] = mad((float4)(ar[i]), b1, acc[i][1]);
            }
        }
        cur ^= 1;
        if (more) {
            store_either(as + cur * TK * lds_a, lds_a, tid, bm, nt, kc_a, ra);
            store_either(bs + cur * TK * LDS_B, LDS_B, tid, TN, nt, kc_b, rb);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    const int vec_c = ALIGNED4(c) && ldc % 4 == 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const uint row = m0 + row_base + i / 4 * 32 + i % 4;
        if (row < m) {
            __global float *cr = c + (size_t)row * ldc;
            store_c4(cr, n0 + col_base, n, acc[i][0], alpha, beta, vec_c);
            store_c4(cr, n0 + col_base + 16, n, acc[i][1], alpha, beta,
                     vec_c);
        }
    }
}

/* The gemm kernels: batch entry get_global_id(2). */
#define GEMM_PARAMS                                                          \
    uint m, uint n, uint k, __global const float *a, ulong a_off, uint lda,  \
        ulong a_batch, __global const float *b, ulong b_off, uint ldb,       \
        ulong b_batch, __global float *c, ulong c_off, uint ldc,             \
        ulong c_batch, float alpha, float beta, int trans_a, int trans_b
#define GEMM_BODY(bm, nt)                                                    \
    __local float as[2 * TK * ((bm) + 4)] __attribute__((aligned(16)));     \
    __local float bs[2 * TK * LDS_B] __attribute__((aligned(16)));          \
    const ulong batch = get_global_id(2);                                    \
    gemm_body((bm), (nt), 0, m, n, k, a + a_off + batch * a_batch, lda,      \
              trans_a != 0, b + b_off + batch * b_batch, ldb, trans_b != 0,  \
              (const conv_geom *)0, c + c_off + batch * c_batch, ldc, alpha, \
              beta, as, bs)

__kernel __attribute__((reqd_work_group_size(GT, 1, 1))) void
locus_gemm(GEMM_PARAMS)
{
    GEMM_BODY(TM, GT);
}

__kernel __attribute__((reqd_work_group_size(SHORT_GT, 1, 1))) void
locus_gemm_short(GEMM_PARAMS)
{
    GEMM_BODY(SHORT_TM, SHORT_GT);
}

/* The implicit-GEMM convolution: image first + get_global_id(2) of x
 * (N x C x H x W) into y (N x K x P x Q), filter f (K x C x R x S). The
 * host launches at most 65535 images at once (CUDA's grid limit, which
 * NVIDIA's OpenCL shares). */
#define CONV_PARAMS                                                          \
    __global const float *x, ulong first, __global const float *f,          \
        __global float *y, uint K, uint C, uint H, uint W, uint R, uint S,   \
        uint P, uint Q, uint sh, uint sw, uint ph, uint pw
#define CONV_BODY(bm, nt)                                                    \
    __local float as[2 * TK * ((bm) + 4)] __attribute__((aligned(16)));     \
    __local float bs[2 * TK * LDS_B] __attribute__((aligned(16)));          \
    const ulong z = first + get_global_id(2);                                \
    const uint pq = P * Q, crs = C * R * S;                                  \
    const conv_geom g = {C, H, W, R, S, Q, sh, sw, ph, pw};                  \
    gemm_body((bm), (nt), 1, K, pq, crs, f, crs, 0,                          \
              x + z * (ulong)(C * H * W), 0, 0, &g, y + z * K * (ulong)pq,  \
              pq, 1.0f, 0.0f, as, bs)

__kernel __attribute__((reqd_work_group_size(GT, 1, 1))) void
locus_conv_implicit(CONV_PARAMS)
{
    CONV_BODY(TM, GT);
}

__kernel __attribute__((reqd_work_group_size(SHORT_GT, 1, 1))) void
locus_conv_implicit_short(CONV_PARAMS)
{
    CONV_BODY(SHORT_TM, SHORT_GT);
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

/* C = beta C over m x n, one work-item an element: the whole of a GEMM
 * whose alpha or k is 0 (A and B are not read). beta == 0 stores zeros,
 * so NaN or inf in C do not survive; the host skips beta == 1. */
__kernel void locus_gemm_scale_c(uint m, uint n, __global float *c,
                                 ulong c_off, uint ldc, float beta)
{
    const size_t i = get_global_id(0);
    if (i >= (size_t)m * n)
        return;
    __global float *p = c + c_off + (i / n) * ldc + i % n;
    *p = beta == 0.0f ? 0.0f : beta * *p;
}
