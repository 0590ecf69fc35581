/* The CPU's f64 matrix product: the SGEMM's Goto/BLIS structure (the same
 * parallel driver, gemm.c, with its own packing, macro-kernel and register
 * kernels), for the op (dtype f64) and for the f64 convolution. */
#ifndef LOCUS_CPU_DGEMM_H
#define LOCUS_CPU_DGEMM_H

#include <stddef.h>

#include <locus/backend.h>

#include "gemm.h"
#include "isa.h"

struct locus__cpu_state;

/* C[0..mr)[0..nr) (rows ldc doubles apart) = alpha * sum_p a_p b_p^T
 * + beta * C over kc steps of packed micro-panels (a[p * mr + i],
 * b[p * nr + j]); beta == 0: C is only written, never read. */
typedef void (*locus__dgemm_kernel)(size_t kc, const double *a, const double *b,
                                    double *c, size_t ldc, double alpha,
                                    double beta);

/* The f64 kernels of one level of the CPU table (isa.h): chosen from the
 * table's level, so LOCUS_CPU_ISA forces them as it forces the SGEMM's. */
typedef struct locus__dgemm_isa {
    const char *name; /* e.g. "avx512-12x16", the record's algorithm */
    size_t mr, nr;
    locus__dgemm_kernel kernel;
} locus__dgemm_isa;

/* The largest f64 register tile of any kernel built in. */
#define LOCUS__DGEMM_MAX_MR 16
#define LOCUS__DGEMM_MAX_NR 32

/* The f64 kernels for the level of `isa` (NULL: the best of this CPU). */
const locus__dgemm_isa *locus__dgemm_isa_for(const locus__cpu_isa *isa);

/* C = alpha op(A) op(B) + beta C in f64, row-major, the BLAS meaning of
 * every field (locus_gemm_desc); leading dimensions explicit. beta == 0:
 * C is not read. alpha == 0 or k == 0: A and B are not read. */
typedef struct locus__dgemm {
    locus_transpose trans_a, trans_b;
    size_t m, n, k;
    double alpha, beta;
    const double *a;
    size_t lda;
    const double *b;
    size_t ldb;
    double *c;
    size_t ldc;
    const locus__dgemm_isa *isa;
} locus__dgemm;

/* The op's f64 entry (locus__cpu_gemm passes dtype f64 here). */
locus_status locus__cpu_dgemm(const struct locus__cpu_state *s, size_t device,
                              const locus_gemm_desc *desc, const void *a,
                              const void *b, void *c, locus_op_context *op);

/* Doubles of scratch that locus__cpu_dgemm_tile with `blocks` needs for a
 * tile of at most rows x cols of C with inner dimension k, whatever the
 * ISA. No particular alignment needed. */
size_t locus__cpu_dgemm_scratch_doubles(const locus__tile_blocks *blocks,
                                        size_t rows, size_t cols, size_t k);

/* The block rows [row_begin, row_end) x columns [col_begin, col_end) of C
 * on the calling thread, as locus__cpu_sgemm_tile (gemm.h). */
void locus__cpu_dgemm_tile(const locus__dgemm *g,
                           const locus__tile_blocks *blocks, size_t row_begin,
                           size_t row_end, size_t col_begin, size_t col_end,
                           double *scratch);

/* Packing and the macro-kernel, as their f32 versions in gemm_block.h. */
void locus__dgemm_pack_a(const locus__dgemm *g, size_t mr, size_t i0, size_t mc,
                         size_t p0, size_t kc, double *ap);
void locus__dgemm_pack_b(const locus__dgemm *g, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, double *bp);
void locus__dgemm_macro(const locus__dgemm_isa *isa, size_t mc, size_t nc,
                        size_t kc, const double *ap, const double *bp,
                        double *c, size_t ldc, double alpha, double beta,
                        size_t sweep_cols);
void locus__dgemm_scale(const locus__dgemm *g, size_t i0, size_t i1, size_t j0,
                        size_t j1);

#endif
