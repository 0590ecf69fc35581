/* OpenBLAS as a reference for `locus bench`, when the tool was built with
 * it (LOCUS_HAVE_OPENBLAS); only the tool links it, never liblocus. Other
 * references (im2col + OpenBLAS for conv) call the product through here
 * rather than including cblas.h themselves. */
#ifndef LOCUS_TOOL_BENCH_REF_OPENBLAS_H
#define LOCUS_TOOL_BENCH_REF_OPENBLAS_H

#include <stdbool.h>
#include <stddef.h>

/* True when OpenBLAS is built in. */
bool bench_openblas_available(void);

/* OpenBLAS's thread count, set before each measured call: the device's
 * worker count, for a thread-for-thread comparison. */
void bench_openblas_set_threads(int threads);

/* C = A B, row-major, no transposes, leading dimensions given, with
 * cblas_sgemm; does nothing without OpenBLAS. */
void bench_openblas_sgemm(size_t m, size_t n, size_t k, const float *a,
                          size_t lda, const float *b, size_t ldb, float *c,
                          size_t ldc);

/* Fills the gemm references' entry for it (bench_ref_blas.h): found with
 * its entry points and config string, or not, with the reason. */
struct bench_blas_library;
void bench_openblas_describe(struct bench_blas_library *library);

#endif
