/* Sum, min or max of x[0 .. n) into one partial per work-group, which the
 * host combines in group order: the result depends only on n and the
 * device's fixed group count, never on timing, so it is deterministic.
 *
 * Group g covers the contiguous range [g * per_group, ...); its RWG
 * work-items stride through it (coalesced on GPUs, vectorizable across
 * work-items on CPUs), then a tree in local memory combines them. Sums are
 * compensated (Kahan) per work-item, since one work-item may add up
 * millions of values; the op is bound by memory, so the extra flops cost
 * nothing. min and max propagate NaN, as the CPU backend does. */
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

__kernel __attribute__((reqd_work_group_size(RWG, 1, 1))) void
locus_reduce(__global const float *x, ulong n, ulong per_group, int op,
             __global float *partials)
{
    __local float scratch[RWG];
    const size_t l = get_local_id(0), g = get_group_id(0);
    const ulong begin = g * per_group;
    const ulong end = min(begin + per_group, n);
    float acc = op == LOCUS_SUM   ? 0.0f
                : op == LOCUS_MIN ? INFINITY
                                  : -INFINITY;
    if (op == LOCUS_SUM) {
        float compensation = 0.0f;
        for (ulong i = begin + l; i < end; i += RWG) {
            const float y = x[i] - compensation;
            const float t = acc + y;
            compensation = (t - acc) - y;
            acc = t;
        }
    } else {
        for (ulong i = begin + l; i < end; i += RWG)
            acc = combine(op, acc, x[i]);
    }
    scratch[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = RWG / 2; s > 0; s >>= 1) {
        if (l < s)
            scratch[l] = combine(op, scratch[l], scratch[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        partials[g] = scratch[0];
}

#else /* LOCUS_CPU_KERNELS */

/* CPU variant: one work-item per group (RWG is 1) over its contiguous
 * range, with float8 accumulators (compensated for sums) that the
 * compiler keeps in vector registers; no local memory, no barrier (see
 * gemm.cl on why barriers are dear on CPU implementations). */
static float8 combine8(int op, float8 acc, float8 v)
{
    if (op == LOCUS_MIN)
        return select(v, acc, isnan(acc) || v >= acc);
    return select(v, acc, isnan(acc) || v <= acc);
}

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void
locus_reduce(__global const float *x, ulong n, ulong per_group, int op,
             __global float *partials)
{
    const size_t g = get_group_id(0);
    const ulong begin = g * per_group;
    const ulong end = min(begin + per_group, n);
    const ulong vector_end = begin + (end - begin) / 8 * 8;
    const float identity = op == LOCUS_SUM   ? 0.0f
                           : op == LOCUS_MIN ? INFINITY
                                             : -INFINITY;
    float8 acc = (float8)(identity);
    if (op == LOCUS_SUM) {
        float8 compensation = (float8)(0.0f);
        for (ulong i = begin; i < vector_end; i += 8) {
            const float8 y = vload8(0, x + i) - compensation;
            const float8 t = acc + y;
            compensation = (t - acc) - y;
            acc = t;
        }
    } else {
        for (ulong i = begin; i < vector_end; i += 8)
            acc = combine8(op, acc, vload8(0, x + i));
    }
    float result = acc.s0;
    const float lanes[7] = {acc.s1, acc.s2, acc.s3, acc.s4,
                            acc.s5, acc.s6, acc.s7};
    for (int l = 0; l < 7; l++)
        result = combine(op, result, lanes[l]);
    for (ulong i = vector_end; i < end; i++)
        result = combine(op, result, x[i]);
    partials[g] = result;
}

#endif /* LOCUS_CPU_KERNELS */
