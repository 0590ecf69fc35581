/* What the CPU convolution algorithms share: one validated problem, and
 * for each algorithm the workspace it would allocate (so `auto` can
 * compare before choosing) and the driver that runs it. MEC's are in
 * mec.h. */
#ifndef LOCUS_CPU_CONV2D_H
#define LOCUS_CPU_CONV2D_H

#include <stddef.h>

#include "conv_epilogue.h"
#include "cpu_internal.h"
#include "im2col.h"

typedef struct locus__conv_problem {
    const locus__cpu_state *state;
    int node;    /* the device's worker set: -1 (all) or an OS node */
    int workers; /* its size */
    locus__conv_shape shape;
    size_t batch, out_channels; /* N, K */
    /* f32 (only im2col has an f64 path): */
    const float *input;  /* N x C x H x W */
    const float *filter; /* K x C x R x S */
    float *output;       /* N x K x P x Q */
    /* dtype f64: the same, in doubles, the three above NULL. */
    locus_dtype dtype;
    const double *input_f64, *filter_f64;
    double *output_f64;
    /* f32: the layer's bias and activation, which the implicit GEMM and
     * the direct kernel apply as they store the output (conv_epilogue.h);
     * zero: none. The other algorithms leave it to the caller
     * (locus__cpu_conv2d_fused). */
    locus__conv_epilogue epilogue;
    locus_op_context *op;
} locus__conv_problem;

/* locus__cpu_conv2d with a bias (f32, NULL: none) and desc's activation:
 * *fused says whether they were applied in the kernels' stores (the
 * implicit GEMM and the direct kernel); when 0 the output is the plain
 * convolution and the caller applies them. */
locus_status locus__cpu_conv2d_fused(void *state, size_t device,
                                     const locus_conv2d_desc *desc,
                                     const void *input, const void *filter,
                                     const void *bias, void *output,
                                     locus_op_context *op, int *fused);

/* Whether the whole conv is small enough to run on the calling thread
 * (LOCUS__CPU_INLINE_FLOPS). */
static inline int locus__conv_is_tiny(const locus__conv_problem *problem)
{
    const locus__conv_shape *s = &problem->shape;
    double flops = 2.0 * (double)problem->batch *
                   (double)problem->out_channels * (double)s->out_h *
                   (double)s->out_w * (double)s->channels *
                   (double)s->kernel_h * (double)s->kernel_w;
    return flops < LOCUS__CPU_INLINE_FLOPS;
}

/* A 1x1, stride-1, unpadded convolution of an H x W image is the same
 * convolution of a 1 x HW image: the input and output are the same
 * arrays. Where an output row is shorter than the direct kernel's tile
 * (7x7 outputs and its 14 positions: half its lanes idle), the problem is
 * made that single row, so that the direct kernel's tiles run along all
 * H W positions (49 in 4 tiles of 14, 88% of the lanes, against 77% of
 * the implicit GEMM's two micro-panels of 32). Other shapes keep their
 * rows (more units to split among the workers). */
static inline void locus__cpu_conv_flatten_1x1(locus__conv_problem *pr)
{
    locus__conv_shape *sh = &pr->shape;
    if (sh->kernel_h != 1 || sh->kernel_w != 1 || sh->stride_h != 1 ||
        sh->stride_w != 1 || sh->pad_h != 0 || sh->pad_w != 0 ||
        !pr->state->isa.conv_direct ||
        sh->out_w >= pr->state->isa.direct_positions || sh->height == 1)
        return;
    sh->width *= sh->height; /* a product of buffer sizes: no overflow */
    sh->out_w = sh->width;
    sh->height = sh->out_h = 1;
}

/* Bytes of workspace im2col allocates for the problem; 0 (false)
 * when the count overflows. */
int locus__cpu_im2col_workspace(const locus__conv_problem *problem,
                                size_t *bytes);

/* Runs im2col + GEMM over the device's workers, in the problem's dtype
 * (f32 or f64), and sets the record's workspace_bytes to what it
 * allocated. */
locus_status locus__cpu_conv2d_im2col(const locus__conv_problem *problem);

/* Reports the input rows that output positions [j0, j1) of one image read
 * (services->account_read_rows: one record for all channels), for the
 * op's local/remote split. */
void locus__cpu_conv_account_rows(const locus__conv_problem *problem,
                                  const float *image, size_t j0, size_t j1);
/* The same for an image of elements of elem_size bytes. */
void locus__cpu_conv_account_rows_of(const locus__conv_problem *problem,
                                     const void *image, size_t elem_size,
                                     size_t j0, size_t j1);

/* a * b into *out; 0 when it overflows. */
int locus__cpu_mul_size(size_t a, size_t b, size_t *out);

#endif
