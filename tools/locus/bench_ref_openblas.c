/* gemm's reference: OpenBLAS cblas_sgemm on the same inputs, with as many
 * threads as the device has workers. */
#include "bench_ref_openblas.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "table.h"

#ifdef LOCUS_HAVE_OPENBLAS
#include <cblas.h>

bool bench_openblas_available(void)
{
    return true;
}

void bench_openblas_set_threads(int threads)
{
    openblas_set_num_threads(threads > 0 ? threads : 1);
}

void bench_openblas_sgemm(size_t m, size_t n, size_t k, const float *a,
                          size_t lda, const float *b, size_t ldb, float *c,
                          size_t ldc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, 1.0f, a, (blasint)lda, b, (blasint)ldb,
                0.0f, c, (blasint)ldc);
}
#else
bool bench_openblas_available(void)
{
    return false;
}

void bench_openblas_set_threads(int threads)
{
    (void)threads;
}

void bench_openblas_sgemm(size_t m, size_t n, size_t k, const float *a,
                          size_t lda, const float *b, size_t ldb, float *c,
                          size_t ldc)
{
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb;
    (void)c, (void)ldc;
}
#endif

typedef struct sgemm_work {
    size_t m, n, k;
    const float *a, *b;
    float *c;
} sgemm_work;

static void sgemm_once(void *arg)
{
    sgemm_work *work = arg;
    bench_openblas_sgemm(work->m, work->n, work->k, work->a, work->k, work->b,
                         work->n, work->c, work->n);
}

void bench_reference_gemm(const bench_reference_input *input,
                          bench_result *result)
{
    if (!bench_openblas_available()) {
        return;
    }
    size_t m = input->shape->u.gemm.m, n = input->shape->u.gemm.n,
           k = input->shape->u.gemm.k;
    /* blasint is 32 bits in the Debian build: larger shapes get none. */
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) {
        return;
    }
    sgemm_work work = {
        .m = m,
        .n = n,
        .k = k,
        .a = input->first,
        .b = input->second,
        /* C with beta = 0, as Locus's run: written, never read. */
        .c = xmalloc(m * n * sizeof(float)),
    };
    bench_openblas_set_threads(input->threads);
    double seconds = bench_time_best(sgemm_once, &work, input->settings);
    bench_add_reference(result, "openblas cblas_sgemm", seconds);
    free(work.c);
    bench_quiesce();
}
