/* Sum, min and max of f32 and f64 vectors.
 *
 * Each worker reduces one contiguous range, cut by services->split with a
 * page of elements as the unit: a buffer placed `local` was first-touched
 * with the same split of its bytes, so each worker reads pages of its own
 * node. The per-worker partials are combined in rank order, so a given
 * input and worker count always gives the same result.
 *
 * The kernels come from the ISA table (isa.h, kernels/reduce_*.c). The
 * f32 sum accumulates short f32 blocks (vector kernels) or single values
 * (generic) into double: the error relative to sum |x| stays below 1e-6
 * at any n, better than pairwise f32 summation, and the double result is
 * returned as is rather than rounded to f32. The f64 sum is compensated
 * (kernels/reduce_f64.h), and so is the combination of the workers'
 * partials: within about 2u |S| + 4 n u^2 sum |x| of the exact sum S
 * (u = 2^-53). Each kernel adds its lanes in a fixed order, so the bits
 * depend only on the input and the worker count.
 *
 * Min and max: a NaN anywhere in the input makes the result NaN, as NaN
 * means the data is broken and silently skipping it would hide that (and
 * it is what sum does anyway). Among equal values (-0 and +0) the first
 * in index order wins, whatever the worker count.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "kernels/reduce_f64.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86_KERNELS 1 /* as isa.c: the build holds the x86 kernels */
#endif

/* The f64 kernels of one kernel table, by its reduce_name (the f64 set
 * lives beside the f32 one in kernels/reduce_<isa>.c). */
typedef struct f64_kernels {
    const char *isa;
    const char *sum_name;
    locus__sum_f64_kernel sum;
    locus__minmax_f64_kernel min, max;
} f64_kernels;

static const f64_kernels f64_table[] = {
#ifdef HAVE_X86_KERNELS
    {"avx512", "avx512-twosum-f64", locus__sum_f64_avx512,
     locus__min_f64_avx512, locus__max_f64_avx512},
    {"avx2", "avx2-twosum-f64", locus__sum_f64_avx2, locus__min_f64_avx2,
     locus__max_f64_avx2},
#endif
    {"generic", "generic-twosum-f64", locus__sum_f64_generic,
     locus__min_f64_generic, locus__max_f64_generic},
};

/* The f64 set of the table in use; the portable one for a name the list
 * lacks (every table's reduce_name is in it). */
static const f64_kernels *f64_kernels_of(const locus__cpu_isa *isa)
{
    const size_t count = sizeof f64_table / sizeof f64_table[0];
    for (size_t i = 0; i + 1 < count; i++)
        if (strcmp(f64_table[i].isa, isa->reduce_name) == 0)
            return &f64_table[i];
    return &f64_table[count - 1];
}

typedef struct reduce_partial {
    double value;
    double low;    /* f64 sums: the compensation, value + low the sum */
    int has_value; /* zero when the worker's range was empty */
    int nan;
} reduce_partial;

typedef struct reduce_job {
    const locus_services *services;
    locus_op_context *op;
    const void *x;
    size_t count;
    size_t align; /* elements per page */
    locus_reduce_op kind;
    const locus__cpu_isa *isa;
    const f64_kernels *f64;   /* NULL: the input is f32 */
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

static double first_zero_f64(const double *x, size_t n, double found)
{
    if (found != 0.0)
        return found;
    for (size_t i = 0; i < n; i++)
        if (x[i] == 0.0)
            return x[i];
    return found;
}

static void reduce_range_f64(const reduce_job *job, const double *x, size_t n,
                             reduce_partial *out)
{
    switch (job->kind) {
    case LOCUS_REDUCE_SUM: {
        const locus__f64_sum sum = job->f64->sum(x, n);
        out->value = sum.hi;
        out->low = sum.lo;
        break;
    }
    case LOCUS_REDUCE_MIN:
        out->value = first_zero_f64(x, n, job->f64->min(x, n, &out->nan));
        break;
    case LOCUS_REDUCE_MAX:
        out->value = first_zero_f64(x, n, job->f64->max(x, n, &out->nan));
        break;
    }
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

    size_t n = end - begin;
    out->has_value = 1;
    if (job->f64 != NULL) {
        const double *x = (const double *)job->x + begin;
        job->services->account_read(job->op, x, n * sizeof(double));
        reduce_range_f64(job, x, n, out);
        return;
    }
    const float *x = (const float *)job->x + begin;
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
}

static double combine(const reduce_job *job, int ranks)
{
    double result = 0.0;
    int have = 0, nan = 0;
    /* f64 sums: the partials added compensated, as the lanes were. */
    locus__f64_sum sum = {0.0, 0.0};
    for (int r = 0; r < ranks; r++) {
        const reduce_partial *p = &job->partials[r];
        if (!p->has_value)
            continue;
        nan |= p->nan;
        if (job->kind == LOCUS_REDUCE_SUM && job->f64 != NULL)
            locus__f64_sum_add(&sum, (locus__f64_sum){p->value, p->low});
        else if (job->kind == LOCUS_REDUCE_SUM)
            result += p->value;
        else if (!have)
            result = p->value;
        else if (job->kind == LOCUS_REDUCE_MIN && p->value < result)
            result = p->value;
        else if (job->kind == LOCUS_REDUCE_MAX && p->value > result)
            result = p->value;
        have = 1;
    }
    if (job->kind == LOCUS_REDUCE_SUM && job->f64 != NULL)
        result = locus__f64_sum_value(sum);
    return nan ? (double)NAN : result;
}

locus_status locus__cpu_reduce(void *state, size_t device,
                               const locus_reduce_desc *desc, const void *x,
                               double *result, locus_op_context *op)
{
    const locus__cpu_state *s = state;
    const locus_services *services = s->services;

    const int f64 = desc->dtype == LOCUS_DTYPE_F64;
    locus_status status =
        f64 ? LOCUS_SUCCESS : locus__cpu_check_dtype(s, "reduce", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    const size_t element = f64 ? sizeof(double) : sizeof(float);
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
        .align = s->page_size / element,
        .kind = desc->op,
        .isa = &s->isa,
        .f64 = f64 ? f64_kernels_of(&s->isa) : NULL,
        .partials = calloc((size_t)workers, sizeof(reduce_partial)),
        .capacity = workers,
    };
    if (!job.partials)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %d reduce partials", workers);

    status =
        locus__cpu_run(s, node, desc->count * element < LOCUS__CPU_INLINE_BYTES,
                       reduce_worker, &job);
    if (status != LOCUS_SUCCESS)
        goto free_partials;

    *result = combine(&job, workers);
    /* The sum's name says how it accumulates: f32 blocks then f64, or
     * compensated f64. */
    locus__cpu_set_algorithm(op, desc->op != LOCUS_REDUCE_SUM
                                     ? s->isa.reduce_name
                                 : f64 ? job.f64->sum_name
                                       : s->isa.sum_name);

free_partials:
    free(job.partials);
    return status;
}
