/* The CPU's conv2d as layers use it (backend.h, conv2d_layer): groups,
 * dilation, padding on each side, a bias, an activation, NCHW or NHWC.
 * One resolved problem, and per dtype the kernels that run it: a direct
 * sum that takes every layout (conv_layer_kernels.c), the depthwise
 * kernel, and the lowering and epilogue of the grouped im2col
 * (conv_grouped.c). */
#ifndef LOCUS_CPU_CONV_LAYER_H
#define LOCUS_CPU_CONV_LAYER_H

#include <stddef.h>

#include "cpu_internal.h"

typedef struct locus__conv_layer {
    const locus__cpu_state *state;
    int node, workers;
    int f64;
    size_t batch, channels, height, width;   /* N, C, H, W */
    size_t out_channels, kernel_h, kernel_w; /* K, R, S */
    size_t groups;                           /* G: C/G and K/G per group */
    size_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
    size_t out_h, out_w; /* P, Q */
    locus_activation activation;
    int input_nhwc, output_nhwc; /* the filter is KRSC with an NHWC input */
    const void *input, *filter, *bias; /* bias NULL: none */
    void *output;
    locus_op_context *op;
} locus__conv_layer;

/* One dtype's kernels. Rows are output rows (n, k, p) numbered
 * (n K + k) P + p; each kernel writes rows [row0, row1) whole, bias and
 * activation included. */
typedef struct locus__conv_layer_kernels {
    size_t elem_size;
    /* Any layout, any feature. */
    void (*direct_rows)(const locus__conv_layer *l, size_t row0, size_t row1);
    /* NCHW in and out, groups = C (one input channel per group). */
    void (*depthwise_rows)(const locus__conv_layer *l, size_t row0,
                           size_t row1);
    /* NCHW input: the (C/G R S) x (j1 - j0) columns [j0, j1) of group g
     * of image n, row (c, r, s), column p Q + q, leading dimension
     * width. */
    void (*lower)(const locus__conv_layer *l, size_t n, size_t g, size_t j0,
                  size_t j1, void *col, size_t width);
    /* NCHW output: bias and activation on the K/G rows of group g of
     * image n, columns [j0, j1). */
    void (*finish)(const locus__conv_layer *l, size_t n, size_t g, size_t j0,
                   size_t j1);
} locus__conv_layer_kernels;

extern const locus__conv_layer_kernels locus__conv_layer_f32;
extern const locus__conv_layer_kernels locus__conv_layer_f64;

static inline const locus__conv_layer_kernels *
locus__conv_layer_kernels_of(const locus__conv_layer *l)
{
    return l->f64 ? &locus__conv_layer_f64 : &locus__conv_layer_f32;
}

static inline int locus__conv_layer_is_tiny(const locus__conv_layer *l)
{
    double flops = 2.0 * (double)l->batch * (double)l->out_channels *
                   (double)l->out_h * (double)l->out_w *
                   (double)(l->channels / l->groups) * (double)l->kernel_h *
                   (double)l->kernel_w;
    return flops < LOCUS__CPU_INLINE_FLOPS;
}

/* The direct and depthwise kernels over the device's workers. */
locus_status locus__cpu_layer_direct(const locus__conv_layer *l);
locus_status locus__cpu_layer_depthwise(const locus__conv_layer *l);
/* im2col + one GEMM per group and image (NCHW in and out). */
locus_status locus__cpu_layer_im2col(const locus__conv_layer *l);

locus_status locus__cpu_conv2d_layer(void *state, size_t device,
                                     const locus_conv2d_desc *desc,
                                     const void *input, const void *filter,
                                     const void *bias, void *output,
                                     locus_op_context *op);

#endif
