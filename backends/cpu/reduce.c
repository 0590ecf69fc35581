/* Sum, min and max of f32 vectors.
 *
 * Each worker reduces one contiguous range, cut by services->split with a
 * page of floats as the unit: a buffer placed `local` was first-touched
 * with the same split of its bytes, so each worker reads pages of its own
 * node. The per-worker partials are combined in rank order, so a given
 * input and worker count always gives the same result.
 *
 * The kernels come from the ISA table (isa.h, kernels/reduce_*.c). Sum
 * accumulates short f32 blocks (vector kernels) or single values (generic)
 * into double: the error relative to sum |x| stays below 1e-6 at any n,
 * better than pairwise f32 summation, and the double result is returned
 * as is rather than rounded to f32. Each kernel adds its lanes in a fixed
 * order, so the bits depend only on the input and the worker count.
 *
 * Min and max: a NaN anywhere in the input makes the result NaN, as NaN
 * means the data is broken and silently skipping it would hide that (and
 * it is what sum does anyway). Among equal values (-0 and +0) the first
 * in index order wins, whatever the worker count.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct reduce_partial {
    double value;
    int has_value; /* zero when the worker's range was empty */
    int nan;
} reduce_partial;

typedef struct reduce_job {
    const locus_services *services;
    locus_op_context *op;
    const float *x;
    size_t count;
    size_t align; /* elements per page */
    locus_reduce_op kind;
    const locus__cpu_isa *isa;
    reduce_partial *partials; /* one per rank */
    int capacity;
} reduce_job;

/* Among values equal to the extreme, the first in index order wins: the
 * kernels may return -0 for +0 or the reverse (vector min/max do not keep
 * order), so when the extreme is a zero, the first zero of the range
 * gives its sign. Such ranges usually hold a zero early; the scan stops
 * there. */
static float first_zero(const float *x, size_t n, float found)
{
    if (found != 0.0f)
        return found;
    for (size_t i = 0; i < n; i++)
        if (x[i] == 0.0f)
            return x[i];
    return found;
}

static void reduce_worker(void *arg, int rank, int ranks)
{
    reduce_job *job = arg;
    assert(rank >= 0 && rank < job->capacity);
    reduce_partial *out = &job->partials[rank];
    size_t begin, end;
    job->services->split(job->count, job->align, rank, ranks, &begin, &end);
    if (begin >= end)
        return;

    const float *x = job->x + begin;
    size_t n = end - begin;
    job->services->account_read(job->op, x, n * sizeof(float));
    switch (job->kind) {
    case LOCUS_REDUCE_SUM:
        out->value = job->isa->sum(x, n);
        break;
    case LOCUS_REDUCE_MIN:
        out->value = first_zero(x, n, job->isa->min(x, n, &out->nan));
        break;
    case LOCUS_REDUCE_MAX:
        out->value = first_zero(x, n, job->isa->max(x, n, &out->nan));
        break;
    }
    out->has_value = 1;
}

static double combine(const reduce_job *job, int ranks)
{
    double result = 0.0;
    int have = 0, nan = 0;
    for (int r = 0; r < ranks; r++) {
        const reduce_partial *p = &job->partials[r];
        if (!p->has_value)
            continue;
        nan |= p->nan;
        if (job->kind == LOCUS_REDUCE_SUM)
            result += p->value;
        else if (!have)
            result = p->value;
        else if (job->kind == LOCUS_REDUCE_MIN && p->value < result)
            result = p->value;
        else if (job->kind == LOCUS_REDUCE_MAX && p->value > result)
            result = p->value;
        have = 1;
    }
    return nan ? (double)NAN : result;
}

locus_status locus__cpu_reduce(void *state, size_t device,
                               const locus_reduce_desc *desc, const void *x,
                               double *result, locus_op_context *op)
{
    const locus__cpu_state *s = state;
    const locus_services *services = s->services;

    locus_status status = locus__cpu_check_dtype(s, "reduce", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->op != LOCUS_REDUCE_SUM && desc->op != LOCUS_REDUCE_MIN &&
        desc->op != LOCUS_REDUCE_MAX)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "reduce op %d is unknown", (int)desc->op);
    if (desc->count == 0)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "reduce count 0 is empty: give at least 1");

    int node, workers;
    status = locus__cpu_device_workers(s, device, &node, &workers);
    if (status != LOCUS_SUCCESS)
        return status;

    reduce_job job = {
        .services = services,
        .op = op,
        .x = x,
        .count = desc->count,
        .align = s->page_size / sizeof(float),
        .kind = desc->op,
        .isa = &s->isa,
        .partials = calloc((size_t)workers, sizeof(reduce_partial)),
        .capacity = workers,
    };
    if (!job.partials)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %d reduce partials", workers);

    status = locus__cpu_run(
        s, node, desc->count * sizeof(float) < LOCUS__CPU_INLINE_BYTES,
        reduce_worker, &job);
    if (status != LOCUS_SUCCESS)
        goto free_partials;

    *result = combine(&job, workers);
    /* The sum's name says how it accumulates: f32 blocks, then f64. */
    locus__cpu_set_algorithm(op, desc->op == LOCUS_REDUCE_SUM
                                     ? s->isa.sum_name
                                     : s->isa.reduce_name);

free_partials:
    free(job.partials);
    return status;
}
