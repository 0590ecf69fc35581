/* Lowering one NCHW image to the column matrix of im2col convolution. */
#ifndef LOCUS_CPU_IM2COL_H
#define LOCUS_CPU_IM2COL_H

#include <stddef.h>

typedef struct locus__conv_shape {
    size_t channels, height, width; /* C, H, W of one input image */
    size_t kernel_h, kernel_w;      /* R, S */
    size_t stride_h, stride_w;
    size_t pad_h, pad_w;
    size_t out_h, out_w; /* P, Q */
} locus__conv_shape;

/* Fills col, a (C*R*S) x (col_end - col_begin) row-major matrix with
 * leading dimension ldcol, with columns [col_begin, col_end) of the full
 * (C*R*S) x (P*Q) matrix: row (c, r, s), column (p, q) holds
 * image[c][p*stride_h + r - pad_h][q*stride_w + s - pad_w], or 0 where that
 * falls in the padding. Then filter (K x CRS) times col is the output. */
void locus__cpu_im2col(const locus__conv_shape *shape, const float *image,
                       size_t col_begin, size_t col_end, float *col,
                       size_t ldcol);
/* The same in f64. */
void locus__cpu_im2col_f64(const locus__conv_shape *shape, const double *image,
                           size_t col_begin, size_t col_end, double *col,
                           size_t ldcol);

#endif
