/* The CPU kernels in use, chosen at run time BLIS-style: a table filled
 * with the portable kernels, then overwritten by the best ones this CPU
 * supports (or the ones LOCUS_CPU_ISA forces). A context keeps its own
 * table, so contexts forced to different ISAs coexist in one process. */
#ifndef LOCUS_CPU_ISA_H
#define LOCUS_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>

/* C[0..mr)[0..nr) (rows ldc floats apart) = alpha * sum_p a_p b_p^T
 * + beta * C, over kc steps of the packed micro-panels: a holds kc
 * columns of mr floats (a[p * mr + i]), b holds kc rows of nr floats
 * (b[p * nr + j]). beta == 0: C is only written, never read, so NaN there
 * does not propagate. */
typedef void (*locus__sgemm_kernel)(size_t kc, const float *a, const float *b,
                                    float *c, size_t ldc, float alpha,
                                    float beta);
/* The same with B's rows ldb floats apart (b[p * ldb + j]): a B read in
 * place, the 1x1 convolution's image (conv_implicit.c). */
typedef void (*locus__sgemm_strided_kernel)(size_t kc, const float *a,
                                            const float *b, size_t ldb,
                                            float *c, size_t ldc, float alpha,
                                            float beta);
/* The same for the first `rows` (1 <= rows < mr) rows of C only, from
 * the same packed a (mr floats a step): a filter count's last, partial
 * row panel, written in place without computing the rows past it. */
typedef void (*locus__sgemm_strided_rows_kernel)(size_t kc, const float *a,
                                                 const float *b, size_t ldb,
                                                 float *c, size_t ldc,
                                                 float alpha, float beta,
                                                 size_t rows);
/* The strided kernel for the tile's first `cols` columns only (isa.h,
 * sgemm_thin, says which counts). */
typedef void (*locus__sgemm_thin_kernel)(size_t kc, const float *a,
                                         const float *b, size_t ldb, float *c,
                                         size_t ldc, float alpha, float beta,
                                         size_t cols);
/* The strided kernel with alpha 1 for the first `rows` (1 <= rows <= mr)
 * rows of C, then a conv layer's bias and activation applied to the tile
 * in registers before it is stored: c = act(acc + beta * c + bias[i]),
 * bit for bit what the kernel and then conv_epilogue.h's separate pass
 * give. bias: the tile's first row's value (rows of them), or NULL;
 * activation: a locus_activation. */
typedef void (*locus__sgemm_strided_epilogue_kernel)(
    size_t kc, const float *a, const float *b, size_t ldb, float *c, size_t ldc,
    float beta, const float *bias, int activation, size_t rows);

/* Sum of x[0..n) accumulated in double; n >= 1. */
typedef double (*locus__sum_kernel)(const float *x, size_t n);
/* Min or max of x[0..n), n >= 1; *nan set nonzero when any x is NaN. The
 * value is then unspecified. Between -0 and +0 any may be returned: the
 * caller settles ties (reduce.c). */
typedef float (*locus__minmax_kernel)(const float *x, size_t n, int *nan);
/* a[p * mr + row] = src[row][p] for p < kc, rows past `rows` zero: one
 * micro-panel of A packed (gemm_pack.c), the implicit convolution's
 * filter among them (conv_implicit.c). */
typedef void (*locus__pack_a_kernel)(float *a, const float *const *src,
                                     size_t kc, size_t rows, size_t mr);
/* One tile of the direct convolution (conv_direct.c): for the first
 * `positions` (<= direct_positions) positions i and `filters`
 * (<= direct_filters) filters j,
 *   out[j * ldo + i] (+)= sum_p filter[p * direct_filters + j]
 *                              * input[offsets[p] + i * step],
 * over depth steps p < depth; `accumulate` adds to out, else out is only
 * written. It reads the inputs of all direct_positions positions (only the
 * stores are cut to `positions`), so the caller's rows must hold them. */
typedef void (*locus__conv_direct_kernel)(size_t depth, const float *filter,
                                          const float *input,
                                          const ptrdiff_t *offsets, size_t step,
                                          float *out, size_t ldo,
                                          size_t positions, size_t filters,
                                          int accumulate);

/* Rows i < rows of a zero-padded copy: dst[i * dst_stride + x], for
 * x < dst_width, is src[i * src_stride + x - pad] where pad <= x <
 * pad + width, else 0; nothing of src outside those is read (the bands of
 * conv_direct.c and conv_implicit_pack.c). */
typedef void (*locus__pad_rows_kernel)(float *dst, size_t dst_stride,
                                       const float *src, size_t src_stride,
                                       size_t rows, size_t pad, size_t width,
                                       size_t dst_width);

typedef struct locus__cpu_isa {
    const char *name; /* of the best level in the table: "generic", ... */
    /* gemm: the register tile and its kernel come together. */
    const char *sgemm_name; /* e.g. "avx2-6x16" */
    size_t mr, nr;
    locus__sgemm_kernel sgemm;
    locus__sgemm_strided_kernel sgemm_strided;
    /* NULL where partial row panels go through a whole tile. */
    locus__sgemm_strided_rows_kernel sgemm_strided_rows;
    /* The strided kernel for the tile's first narrow_nr (< nr) columns
     * only, the same bits per element: a last micro-panel of that few
     * columns (a 7x7 image is 3 of 16 and 1). NULL: none. */
    locus__sgemm_strided_kernel sgemm_narrow;
    size_t narrow_nr;
    /* The strided kernel for the tile's first `cols` columns only, where
     * cols <= thin_nr or narrow_nr < cols <= narrow_nr + thin_nr (a 7x7
     * image's last panel, 17 of 32): the columns past the narrow ones each
     * as a vector down the tile's rows, so that a column costs one
     * multiply-add a step, not a share of a row's vectors; the same bits
     * per element; columns past `cols` are left alone. NULL: none. */
    locus__sgemm_thin_kernel sgemm_thin;
    size_t thin_nr;
    /* NULL where the epilogue is a pass of its own over the tile. */
    locus__sgemm_strided_epilogue_kernel sgemm_strided_epilogue;
    /* reduce */
    const char *reduce_name; /* min and max, e.g. "avx2" */
    const char *sum_name;    /* e.g. "avx2-block512-f64" */
    locus__sum_kernel sum;
    locus__minmax_kernel min, max;
    /* conv */
    locus__pad_rows_kernel pad_rows;
    /* NULL where only the portable loop exists. */
    locus__pack_a_kernel pack_a_panel;
    locus__conv_direct_kernel conv_direct;
    size_t direct_positions, direct_filters; /* its tile */
} locus__cpu_isa;

/* Whether isa's thin kernel computes a last panel of `cols` columns. */
static inline int locus__cpu_isa_thin_takes(const locus__cpu_isa *isa,
                                            size_t cols)
{
    return isa->sgemm_thin &&
           (cols <= isa->thin_nr ||
            (cols > isa->narrow_nr && cols <= isa->narrow_nr + isa->thin_nr));
}

/* The largest register tile of any kernel built in, for callers that size
 * buffers before knowing the table. */
#define LOCUS__MAX_MR 16
#define LOCUS__MAX_NR 32
#define LOCUS__MAX_DIRECT_FILTERS 32

/* Whether this cpu runs the level `forced` names ("generic", "avx2",
 * "avx512"; NULL: not forced, always true): forcing kernels the cpu
 * lacks would end in SIGILL, so the backend refuses to start instead. */
bool locus__cpu_isa_supported(const char *forced);

/* Fills isa with the best kernels this CPU supports, capped at `forced`
 * ("generic", "avx2", "avx512"; NULL: not forced). A forced level the CPU
 * lacks is never installed (cpu_init refuses it earlier); the table
 * then holds the best level below it. */
void locus__cpu_isa_init(locus__cpu_isa *isa, const char *forced);

/* The table for this CPU, not forced: for kernels called without a
 * context's table. Filled once, thread-safe. */
const locus__cpu_isa *locus__cpu_isa_best(void);
/* The tables this build holds, lowest first: "generic avx2 avx512" where
 * the x86 kernels were compiled, else "generic" (locus --version). */
const char *locus__cpu_isa_tables(void);

#endif
