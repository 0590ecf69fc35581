/* The CPU BLAS libraries `locus bench` compares gemm with: MKL (the PyPI
 * `mkl` wheel's libmkl_rt) and a current OpenBLAS (the PyPI
 * `scipy-openblas32` wheel's libscipy_openblas, whose symbols carry a
 * scipy_ prefix), both loaded with dlopen by the tool only, and Debian's
 * OpenBLAS when the tool was linked with it (bench_ref_openblas.c).
 *
 * Each is looked up once per process: the path in its variable
 * (LOCUS_BENCH_MKL, LOCUS_BENCH_OPENBLAS: the library file or the folder
 * holding it), else the usual places pip puts it. One that is absent is
 * "not found" with the reason, never a failure. */
#ifndef LOCUS_TOOL_BENCH_REF_BLAS_H
#define LOCUS_TOOL_BENCH_REF_BLAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CBLAS's enum values, the same in every implementation. */
#define BENCH_CBLAS_ROW_MAJOR 101
#define BENCH_CBLAS_NO_TRANS 111

/* The CBLAS entry points, with 32-bit integers (MKL's LP64 interface,
 * scipy-openblas32, Debian's blasint). NULL where the library lacks one. */
typedef void (*bench_sgemm_fn)(int, int, int, int, int, int, float,
                               const float *, int, const float *, int, float,
                               float *, int);
typedef void (*bench_dgemm_fn)(int, int, int, int, int, int, double,
                               const double *, int, const double *, int, double,
                               double *, int);
/* bf16 or f16 A and B (raw 16-bit patterns), f32 C: MKL's
 * cblas_gemm_bf16bf16f32 and cblas_gemm_f16f16f32, OpenBLAS's
 * cblas_sbgemm. */
typedef void (*bench_hgemm_fn)(int, int, int, int, int, int, float,
                               const uint16_t *, int, const uint16_t *, int,
                               float, float *, int);

typedef struct bench_blas_library {
    const char *label;    /* "mkl", "openblas", "debian openblas" */
    const char *variable; /* its path variable; NULL: linked, no path */
    bool found;
    char version[48]; /* e.g. "2026.2", "0.3.34" */
    char detail[256]; /* the library's own version or config string */
    char path[512];   /* the file loaded, or the last one tried */
    char reason[768]; /* why not found */
    bench_sgemm_fn sgemm;
    bench_dgemm_fn dgemm;
    bench_hgemm_fn bf16gemm;
    bench_hgemm_fn f16gemm;
    void (*set_threads)(int);
} bench_blas_library;

/* The libraries, looked up on the first call; count is set to their
 * number (found or not), in the order they are measured. */
const bench_blas_library *bench_blas_libraries(size_t *count);
/* The same once a reference has looked them up; count 0 before (a run
 * with no CPU gemm loads none of them). */
const bench_blas_library *bench_blas_libraries_used(size_t *count);

#endif
