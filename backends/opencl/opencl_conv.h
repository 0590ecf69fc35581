/* What the OpenCL module's conv2d files share: opencl_conv.c (the entry,
 * the checks, auto's rule, the workspace) and one file per algorithm
 * (opencl_conv_im2col.c, opencl_conv_mec.c, opencl_conv_implicit.c,
 * opencl_conv_winograd.c). Callers hold device->lock. */
#ifndef LOCUS_OPENCL_CONV_H
#define LOCUS_OPENCL_CONV_H

#include "opencl_launch.h"

/* The most workspace one call takes per slot; images are lowered (or
 * transformed) in chunks that stay under it. */
#define OPENCL_CONV_WORKSPACE_CAP ((size_t)256 << 20)

/* The lowering kernels' work-group on GPUs (conv.cl). */
#define OPENCL_LOWER_GROUP 64
/* Enough to even out rows of unequal cost (padding rows are cheap). */
#define OPENCL_LOWER_ITEMS_PER_UNIT 8

/* NCHW input, KCRS filter, stride (sh, sw), padding (ph, pw), P x Q
 * outputs per image. */
typedef struct opencl_conv_shape {
    size_t n, c, h, w, k, r, s, sh, sw, ph, pw, p, q;
} opencl_conv_shape;

/* One conv2d call on one device. workspace_bytes: the device bytes the
 * algorithm's workspace takes, for the record. */
typedef struct opencl_conv_run {
    opencl_state *state;
    size_t index;
    opencl_device *device;
    opencl_conv_shape sh;
    locus_math_mode math;
    int f64; /* doubles, the f64 program's kernels (im2col only) */
    cl_mem input, filter, output;
    size_t workspace_bytes;
} opencl_conv_run;

/* A 1x1 filter with stride 1 and no padding: the image is its own column
 * matrix. */
static inline int opencl_conv_is_pointwise(const opencl_conv_shape *s)
{
    return s->r == 1 && s->s == 1 && s->sh == 1 && s->sw == 1 && s->ph == 0 &&
           s->pw == 0;
}

/* The lowering kernels' `total` (conv.cl): the elements written on GPUs,
 * one work-item each; the rows of `row_length` elements in the CPU
 * variant. */
static inline cl_ulong opencl_lower_total(const opencl_conv_run *run,
                                          size_t rows, size_t row_length)
{
    return run->device->tuning.cpu_kernels ? (cl_ulong)rows
                                           : (cl_ulong)rows * row_length;
}

/* The work-items of a lowering kernel: one per element on GPUs; in the
 * CPU variant OPENCL_LOWER_ITEMS_PER_UNIT per compute unit (fewer when
 * there are fewer rows), each copying a share of the rows. */
static inline size_t opencl_lower_items(const opencl_conv_run *run,
                                        cl_ulong total)
{
    if (!run->device->tuning.cpu_kernels)
        return (size_t)total;
    const size_t units =
        run->device->compute_units > 0 ? (size_t)run->device->compute_units : 1;
    const size_t items = units * OPENCL_LOWER_ITEMS_PER_UNIT;
    return total < items ? (size_t)total : items;
}

static inline size_t opencl_lower_group(const opencl_conv_run *run)
{
    return run->device->tuning.cpu_kernels ? 1 : OPENCL_LOWER_GROUP;
}

/* opencl_conv.c. Images per chunk of a lowering: per_image bytes each,
 * under OPENCL_CONV_WORKSPACE_CAP and the largest allocation, at least
 * one, at most batch. */
size_t locus__opencl_conv_chunk(const opencl_device *device, size_t batch,
                                size_t per_image);
/* A workspace buffer of slot 0, 1 or 2 (opencl_device's workspace), kept
 * for the next call; the caller releases its reference. Out of device
 * memory when bytes exceed the largest allocation. */
locus_status locus__opencl_conv_workspace(const opencl_conv_run *run,
                                          size_t bytes, int slot, cl_mem *out);

/* opencl_conv_im2col.c: one image's column matrix in bytes (f32), and
 * the run (f32 or f64). */
size_t locus__opencl_im2col_bytes(const opencl_conv_shape *s);
locus_status locus__opencl_conv_im2col(opencl_conv_run *run);

/* opencl_conv_mec.c: one image's lowered matrix and the permuted filter
 * (0 when the filter needs no permutation) in bytes, and the run. */
size_t locus__opencl_mec_bytes(const opencl_conv_shape *s);
size_t locus__opencl_mec_filter_bytes(const opencl_conv_shape *s);
locus_status locus__opencl_conv_mec(opencl_conv_run *run);

/* opencl_conv_implicit.c: whether its 32-bit indices hold the shape, and
 * the run (GPU kernels only). */
int locus__opencl_implicit_fits(const opencl_conv_shape *s);
locus_status locus__opencl_conv_implicit(opencl_conv_run *run);

/* opencl_conv_winograd.c: whether F(2x2, 3x3) takes the shape (3x3,
 * stride 1, 32-bit indices); the same as a status with the reason; the
 * run. */
int locus__opencl_winograd_takes(const opencl_conv_shape *s);
locus_status locus__opencl_winograd_check(const opencl_state *state,
                                          size_t index,
                                          const opencl_conv_shape *s);
locus_status locus__opencl_conv_winograd(opencl_conv_run *run);

#endif
