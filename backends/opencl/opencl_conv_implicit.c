/*
 * conv2d by the implicit GEMM on an OpenCL device (GPU kernels only): per
 * image output_i = F * cols_i, one launch batched over the images, whose B
 * tile loader gathers cols_i from the image itself (gemm.cl): no
 * workspace, no lowering pass. Its indices inside an image are 32-bit;
 * shapes that do not fit are refused (locus__opencl_implicit_fits). The
 * CPU kernels do not have it: a CPU device gathers no faster than it
 * copies, and the lowerings there copy whole rows
 * (LOCUS_ERROR_NOT_SUPPORTED when asked for by name).
 */
#include <stdint.h>

#include "opencl_conv.h"

/* Images per launch (dimension 2 of its range): the CUDA grid's z limit,
 * which NVIDIA's OpenCL runs on. */
#define IMPLICIT_MAX_IMAGES ((size_t)65535)

/* Whether the implicit GEMM's 32-bit indices (gemm.cl) hold the shape:
 * an image (C H W), its depth (C R S), its positions (P Q), the filter
 * (K C R S), and the padded rows and columns plus the kernel (the
 * gathers' h and w as int); the CUDA backend's shape_of. */
int locus__opencl_implicit_fits(const opencl_conv_shape *s)
{
    const double limit = (double)INT32_MAX;
    const double crs = (double)s->c * (double)s->r * (double)s->s;
    return (double)s->c * (double)s->h * (double)s->w <= limit &&
           crs <= limit && (double)s->p * (double)s->q <= limit &&
           (double)s->k * crs <= limit &&
           (double)s->h + 2.0 * (double)s->ph + (double)s->r <= limit &&
           (double)s->w + 2.0 * (double)s->pw + (double)s->s <= limit;
}

/* One launch per IMPLICIT_MAX_IMAGES images: output_i = F * cols_i, the
 * short kernel (64-row tiles) for at most 64 filters. */
locus_status locus__opencl_conv_implicit(opencl_conv_run *run)
{
    const opencl_conv_shape *s = &run->sh;
    opencl_device *device = run->device;
    run->workspace_bytes = 0;
    const int short_tile = s->k <= OPENCL_SHORT_TILE_M;
    cl_kernel kernel =
        short_tile ? device->conv_implicit_short : device->conv_implicit;
    const size_t tile_m = short_tile ? OPENCL_SHORT_TILE_M : device->tuning.tm;
    const size_t items =
        short_tile ? OPENCL_SHORT_TILE_ITEMS : (size_t)device->tuning.wn;
    if (kernel == NULL)
        return run->state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu (%s) conv2d: the program has no implicit-GEMM kernel",
            run->index, device->name);
    /* A stride only multiplies positions past the first, and where there
     * are any, (P - 1) sh fits the padded height (locus__opencl_implicit_fits);
     * with one position the stride is unused, and may not fit 32 bits. */
    const cl_uint K = (cl_uint)s->k, C = (cl_uint)s->c, H = (cl_uint)s->h,
                  W = (cl_uint)s->w, R = (cl_uint)s->r, S = (cl_uint)s->s,
                  P = (cl_uint)s->p, Q = (cl_uint)s->q,
                  SH = s->p > 1 ? (cl_uint)s->sh : 1,
                  SW = s->q > 1 ? (cl_uint)s->sw : 1, PH = (cl_uint)s->ph,
                  PW = (cl_uint)s->pw;
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    for (size_t first = 0; first < s->n && err == CL_SUCCESS;
         first += IMPLICIT_MAX_IMAGES) {
        const size_t images = s->n - first < IMPLICIT_MAX_IMAGES
                                  ? s->n - first
                                  : IMPLICIT_MAX_IMAGES;
        const cl_ulong first_image = first;
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->input},
            {sizeof first_image, &first_image},
            {sizeof(cl_mem), &run->filter},
            {sizeof(cl_mem), &run->output},
            {sizeof K, &K},
            {sizeof C, &C},
            {sizeof H, &H},
            {sizeof W, &W},
            {sizeof R, &R},
            {sizeof S, &S},
            {sizeof P, &P},
            {sizeof Q, &Q},
            {sizeof SH, &SH},
            {sizeof SW, &SW},
            {sizeof PH, &PH},
            {sizeof PW, &PW},
        };
        /* As the GEMM's range: dimension 0 over the tiles of P Q, 1 over
         * those of K, 2 over the images. */
        const size_t tn = device->tuning.tn;
        const size_t global[3] = {(s->p * s->q + tn - 1) / tn * items,
                                  (s->k + tile_m - 1) / tile_m, images};
        const size_t local[3] = {items, 1, 1};
        err = locus__opencl_enqueue_3d(device, kernel, args,
                                       sizeof args / sizeof args[0], global,
                                       local, &failed);
    }
    return err == CL_SUCCESS
               ? LOCUS_SUCCESS
               : locus__opencl_op_fail(run->state, run->index, device, err,
                                       failed, "conv2d implicit gemm");
}
