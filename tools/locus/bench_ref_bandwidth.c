/* reduce's references: the machine's read bandwidth, measured on the op's
 * own input by the one routine `locus numa` also uses
 * (bench_read_bandwidth.h: the device's cores, one pinned thread each,
 * read-only), the ceiling a reduction can reach since it must read every
 * byte once; and a plain OpenMP loop (what an application would write
 * without Locus), which needs OpenMP (LOCUS_HAVE_OPENMP). */
#include <stdlib.h>

#include "bench.h"
#include "bench_read_bandwidth.h"

#ifdef LOCUS_HAVE_OPENMP
#include <omp.h>

typedef struct loop_work {
    const void *x;
    size_t count;
    bool f64;
    int threads;
    volatile double sink;
} loop_work;

/* What an application writes: a double accumulator, OpenMP's reduction
 * and simd clauses, nothing more. */
static void openmp_sum(void *arg)
{
    loop_work *work = arg;
    double sum = 0.0;
    long count = (long)work->count;
    if (work->f64) {
        const double *x = work->x;
#pragma omp parallel for simd num_threads(work->threads) proc_bind(spread)    \
    schedule(static) reduction(+ : sum)
        for (long i = 0; i < count; i++)
            sum += x[i];
    } else {
        const float *x = work->x;
#pragma omp parallel for simd num_threads(work->threads) proc_bind(spread)    \
    schedule(static) reduction(+ : sum)
        for (long i = 0; i < count; i++)
            sum += (double)x[i];
    }
    work->sink = sum;
}
#endif

static void add_read_bandwidth(const bench_reference_input *input,
                               bench_result *result)
{
    if (input->context == NULL) {
        return;
    }
    int *cpus = malloc(BENCH_READ_MAX_CPUS * sizeof *cpus);
    double *seconds = malloc((size_t)input->settings->repeat * sizeof *seconds);
    size_t count =
        cpus ? bench_read_cpus(input->context, input->node_mask, input->threads,
                               cpus, BENCH_READ_MAX_CPUS)
             : 0;
    if (seconds != NULL && count > 0 &&
        bench_read_measure(input->first, (size_t)result->bytes, cpus, count,
                           input->settings->repeat, seconds)) {
        double best = seconds[0];
        for (int run = 1; run < input->settings->repeat; ++run) {
            best = seconds[run] < best ? seconds[run] : best;
        }
        /* An input the last-level cache holds much of is read from it:
         * the ceiling there is the cache's, and is named so. */
        bench_add_reference(result,
                            bench_read_is_memory((size_t)result->bytes)
                                ? "memory read bandwidth"
                                : "read bandwidth (input in cache)",
                            best);
    }
    free(seconds);
    free(cpus);
}

void bench_reference_reduce(const bench_reference_input *input,
                            bench_result *result)
{
    add_read_bandwidth(input, result);
#ifdef LOCUS_HAVE_OPENMP
    loop_work loop = {
        .x = input->first,
        .count = input->shape->u.reduce.count,
        .f64 = input->settings->dtype == LOCUS_DTYPE_F64,
        .threads = input->threads,
    };
    bench_add_reference(result, "openmp loop (f64 sum)",
                        bench_time_best(openmp_sum, &loop, input->settings));
    bench_quiesce();
#endif
}
