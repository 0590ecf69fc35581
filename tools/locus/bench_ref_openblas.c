/* Debian's OpenBLAS, linked by the tool (LOCUS_HAVE_OPENBLAS): the
 * product for conv's im2col reference, and its entry in the gemm
 * references' libraries (bench_ref_blas.h). */
#include "bench_ref_openblas.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ref_blas.h"

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

/* CBLAS with ints for enums, as bench_ref_blas.h's entry points. */
static void debian_sgemm(int layout, int trans_a, int trans_b, int m, int n,
                         int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm((enum CBLAS_ORDER)layout, (enum CBLAS_TRANSPOSE)trans_a,
                (enum CBLAS_TRANSPOSE)trans_b, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
}

static void debian_dgemm(int layout, int trans_a, int trans_b, int m, int n,
                         int k, double alpha, const double *a, int lda,
                         const double *b, int ldb, double beta, double *c,
                         int ldc)
{
    cblas_dgemm((enum CBLAS_ORDER)layout, (enum CBLAS_TRANSPOSE)trans_a,
                (enum CBLAS_TRANSPOSE)trans_b, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
}

void bench_openblas_describe(bench_blas_library *library)
{
    library->found = true;
    snprintf(library->path, sizeof(library->path), "linked");
    snprintf(library->detail, sizeof(library->detail), "%s",
             openblas_get_config());
    const char *version = strstr(library->detail, "OpenBLAS ");
    size_t length = version ? strspn(version + 9, "0123456789.") : 0;
    snprintf(library->version, sizeof(library->version), "%.*s", (int)length,
             version ? version + 9 : "");
    library->sgemm = debian_sgemm;
    library->dgemm = debian_dgemm;
    /* Only builds with BUILD_BFLOAT16 have it; looked up, not declared. */
    library->bf16gemm =
        (bench_hgemm_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    library->set_threads = bench_openblas_set_threads;
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

void bench_openblas_describe(bench_blas_library *library)
{
    snprintf(library->reason, sizeof(library->reason),
             "the tool was built without it (no openblas and cblas.h)");
}
#endif
