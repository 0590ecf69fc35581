/* Sum, min or max of x[0 .. n) into one partial per work-group, which the
 * host combines in group order: the result depends only on n and the
 * device's fixed group count, never on timing, so it is deterministic.
 *
 * Group g covers the contiguous range [g * per_group, ...); its RWG
 * work-items stride through it (coalesced on GPUs), then a tree in local
 * memory combines them. Sums are compensated (Kahan) per work-item, since
 * one work-item may add up millions of values; the op is bound by memory,
 * so the extra flops cost nothing. A compensation is kept only while the
 * running sum is finite: past an infinity, (t - acc) - y is inf - inf, a
 * NaN that would replace the inf the IEEE sum gives. Sums take each value
 * times `scale`: 1, or 2^-64 in the host's second pass after an f32
 * overflow (opencl_ops.c). min and max propagate NaN, as the CPU backend
 * does. */
#define LOCUS_SUM 0
#define LOCUS_MIN 1
#define LOCUS_MAX 2

static float combine(int op, float acc, float v)
{
    if (op == LOCUS_SUM)
        return acc + v;
    /* acc stays NaN once NaN; a NaN v replaces acc. */
    if (op == LOCUS_MIN)
        return (isnan(acc) || v >= acc) ? acc : v;
    return (isnan(acc) || v <= acc) ? acc : v;
}

#ifndef LOCUS_CPU_KERNELS

static float4 combine4(int op, float4 acc, float4 v)
{
    if (op == LOCUS_SUM)
        return acc + v;
    if (op == LOCUS_MIN)
        return select(v, acc, isnan(acc) || v >= acc);
    return select(v, acc, isnan(acc) || v <= acc);
}

/* GPU variant. The host makes every group's range start at a multiple of
 * RWG floats, so a group reads it as aligned float4s, each work-item
 * keeping four lanes (compensated for sums) and the compiler free to have
 * several loads in flight; the at most 3 floats past the last whole
 * float4 go one to a work-item. Scalar loads with one accumulator leave a
 * GPU well short of its bandwidth (docs/PERFORMANCE.md). The lanes
 * and the tail are combined in a fixed order: deterministic. */
__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
locus_reduce(__global const float *x, ulong n, ulong per_group, int op,
             float scale, __global float *partials)
{
    __local float scratch[RWG];
    const uint l = get_local_id(0);
    const ulong begin = get_group_id(0) * per_group;
    const ulong end = min(begin + per_group, n);
    const ulong whole_end = begin + (end - begin) / 4 * 4;
    const float identity = op == LOCUS_SUM   ? 0.0f
                           : op == LOCUS_MIN ? INFINITY
                                             : -INFINITY;
    __global const float4 *x4 = (__global const float4 *)x;
    float4 acc4 = (float4)(identity);
    if (op == LOCUS_SUM) {
        float4 compensation = (float4)(0.0f);
#pragma unroll 4
        for (ulong i = begin / 4 + l; i < whole_end / 4; i += RWG) {
            const float4 y = x4[i] * scale - compensation;
            const float4 t = acc4 + y;
            compensation = select((float4)(0.0f), (t - acc4) - y, isfinite(t));
            acc4 = t;
        }
    } else {
#pragma unroll 4
        for (ulong i = begin / 4 + l; i < whole_end / 4; i += RWG)
            acc4 = combine4(op, acc4, x4[i]);
    }
    float acc = combine(op, combine(op, acc4.x, acc4.y),
                        combine(op, acc4.z, acc4.w));
    if (whole_end + l < end)
        acc = combine(op, acc,
                      op == LOCUS_SUM ? x[whole_end + l] * scale
                                      : x[whole_end + l]);
    scratch[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = RWG / 2; s > 0; s >>= 1) {
        if (l < s)
            scratch[l] = combine(op, scratch[l], scratch[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        partials[get_group_id(0)] = scratch[0];
}

#else /* LOCUS_CPU_KERNELS */

/* CPU variant: one work-item per group over its contiguous range, no
 * local memory and no barrier (see gemm.cl on why barriers are dear on CPU
 * implementations). The range is read in blocks of BLOCK floats, each
 * combined by a tree of float8 operations that do not depend on each
 * other, and only the block's result goes into the running float8
 * accumulator (compensated for sums). The Kahan update on every vector
 * would be a chain of four dependent adds per 8 floats, which holds a core
 * far below what memory gives (docs/PERFORMANCE.md); per block the chain
 * is no longer the limit, and the block's tree sum of 8 floats per
 * lane adds about 3 roundings of a block's magnitude, far below the
 * tolerance. */
#define BLOCK 64

static float8 combine8(int op, float8 acc, float8 v)
{
    if (op == LOCUS_SUM)
        return acc + v;
    /* acc stays NaN once NaN; a NaN v replaces acc; on ties acc, the
     * earlier, stays. */
    if (op == LOCUS_MIN)
        return select(v, acc, isnan(acc) || v >= acc);
    return select(v, acc, isnan(acc) || v <= acc);
}

/* The BLOCK floats at x combined, lane by lane, in a fixed tree. x is
 * 32-byte aligned: whole float8 loads, where PoCL compiles vload8 into
 * pairs of 8-byte loads. */
static float8 block8(int op, __global const float8 *x)
{
    const float8 s0 = combine8(op, x[0], x[1]);
    const float8 s1 = combine8(op, x[2], x[3]);
    const float8 s2 = combine8(op, x[4], x[5]);
    const float8 s3 = combine8(op, x[6], x[7]);
    return combine8(op, combine8(op, s0, s1), combine8(op, s2, s3));
}

/* block8's sum of the values times scale (a power of two: 1 or 2^-64),
 * so that the host's second pass cannot overflow inside a block. */
static float8 block8_sum(__global const float8 *x, float scale)
{
    const float8 s0 = x[0] * scale + x[1] * scale;
    const float8 s1 = x[2] * scale + x[3] * scale;
    const float8 s2 = x[4] * scale + x[5] * scale;
    const float8 s3 = x[6] * scale + x[7] * scale;
    return (s0 + s1) + (s2 + s3);
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
locus_reduce(__global const float *x, ulong n, ulong per_group, int op,
             float scale, __global float *partials)
{
    const size_t g = get_group_id(0);
    const ulong begin = g * per_group;
    const ulong end = min(begin + per_group, n);
    const float identity = op == LOCUS_SUM   ? 0.0f
                           : op == LOCUS_MIN ? INFINITY
                                             : -INFINITY;
    /* x is a whole buffer, aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (at
     * least 128 bytes): the blocks start at a multiple of 8 floats; the
     * floats before the first and after the last are added one by one. */
    const ulong head = min(end, (begin + 7) / 8 * 8);
    const ulong block_end = head + (end - head) / BLOCK * BLOCK;
    float8 acc = (float8)(identity);
    if (op == LOCUS_SUM) {
        float8 compensation = (float8)(0.0f);
        for (ulong i = head; i < block_end; i += BLOCK) {
            const float8 y =
                block8_sum((__global const float8 *)(x + i), scale) -
                compensation;
            const float8 t = acc + y;
            compensation = select((float8)(0.0f), (t - acc) - y, isfinite(t));
            acc = t;
        }
    } else {
        for (ulong i = head; i < block_end; i += BLOCK)
            acc =
                combine8(op, acc, block8(op, (__global const float8 *)(x + i)));
    }
    /* Sums only: min and max take scale as 1. */
    const float factor = op == LOCUS_SUM ? scale : 1.0f;
    float result = identity;
    for (ulong i = begin; i < head; i++)
        result = combine(op, result, x[i] * factor);
    const float lanes[8] = {acc.s0, acc.s1, acc.s2, acc.s3,
                            acc.s4, acc.s5, acc.s6, acc.s7};
    for (int l = 0; l < 8; l++)
        result = combine(op, result, lanes[l]);
    for (ulong i = block_end; i < end; i++)
        result = combine(op, result, x[i] * factor);
    partials[g] = result;
}

#endif /* LOCUS_CPU_KERNELS */
