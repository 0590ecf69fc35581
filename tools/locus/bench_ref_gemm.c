/* gemm's CPU references: each BLAS library found (bench_ref_blas.h) on the
 * same inputs, in the bench's dtype, with as many threads as the device
 * has workers. A library that lacks the dtype's entry point (scipy's
 * OpenBLAS has no bf16 product, none has f16 but MKL) is skipped. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "bench_ref_blas.h"
#include "table.h"

typedef struct gemm_work {
    const bench_blas_library *library;
    locus_dtype dtype;
    int m, n, k;
    const void *a, *b;
    void *c;
} gemm_work;

static void gemm_once(void *arg)
{
    gemm_work *w = arg;
    const int row = BENCH_CBLAS_ROW_MAJOR, no = BENCH_CBLAS_NO_TRANS;
    /* C with beta = 0, as Locus's run: written, never read. */
    switch (w->dtype) {
    case LOCUS_DTYPE_F64:
        w->library->dgemm(row, no, no, w->m, w->n, w->k, 1.0, w->a, w->k, w->b,
                          w->n, 0.0, w->c, w->n);
        break;
    case LOCUS_DTYPE_BF16:
        w->library->bf16gemm(row, no, no, w->m, w->n, w->k, 1.0f, w->a, w->k,
                             w->b, w->n, 0.0f, w->c, w->n);
        break;
    case LOCUS_DTYPE_F16:
        w->library->f16gemm(row, no, no, w->m, w->n, w->k, 1.0f, w->a, w->k,
                            w->b, w->n, 0.0f, w->c, w->n);
        break;
    case LOCUS_DTYPE_F32:
        w->library->sgemm(row, no, no, w->m, w->n, w->k, 1.0f, w->a, w->k, w->b,
                          w->n, 0.0f, w->c, w->n);
        break;
    }
}

/* The library's product for the dtype and its BLAS name; false when the
 * library has none. */
static bool product_of(const bench_blas_library *library, locus_dtype dtype,
                       const char **name)
{
    switch (dtype) {
    case LOCUS_DTYPE_F64:
        *name = "dgemm";
        return library->dgemm != NULL;
    case LOCUS_DTYPE_BF16:
        *name = "bf16 gemm";
        return library->bf16gemm != NULL;
    case LOCUS_DTYPE_F16:
        *name = "f16 gemm";
        return library->f16gemm != NULL;
    case LOCUS_DTYPE_F32:
        break;
    }
    *name = "sgemm";
    return library->sgemm != NULL;
}

void bench_reference_gemm(const bench_reference_input *input,
                          bench_result *result)
{
    size_t m = input->shape->u.gemm.m, n = input->shape->u.gemm.n,
           k = input->shape->u.gemm.k;
    /* The libraries' ints are 32 bits: larger shapes get none. */
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) {
        return;
    }
    locus_dtype dtype = input->settings->dtype;
    size_t out_size = dtype == LOCUS_DTYPE_F64 ? sizeof(double) : sizeof(float);
    size_t count = 0;
    const bench_blas_library *libraries = bench_blas_libraries(&count);
    for (size_t i = 0; i < count; ++i) {
        const bench_blas_library *library = &libraries[i];
        const char *product = NULL;
        if (!library->found || !product_of(library, dtype, &product)) {
            continue;
        }
        gemm_work work = {
            .library = library,
            .dtype = dtype,
            .m = (int)m,
            .n = (int)n,
            .k = (int)k,
            .a = input->first,
            .b = input->second,
            .c = xmalloc(m * n * out_size),
        };
        library->set_threads(input->threads);
        double seconds = bench_time_best(gemm_once, &work, input->settings);
        char name[64];
        snprintf(name, sizeof(name), "%s %s %s", library->label,
                 library->version, product);
        bench_add_reference(result, name, seconds);
        free(work.c);
        bench_quiesce();
    }
}
