/*
 * Conv2d on an OpenCL device, with the CPU backend's semantics (NCHW input,
 * KCRS filter, zero padding, cross-correlation). This file is the entry:
 * the checks, the choice of `auto`, the workspace the algorithms share and
 * the record. Each algorithm has a file of its own:
 *
 *   im2col    a lowering kernel of conv.cl, then gemm.cl's kernel batched
 *             over the images (opencl_conv_im2col.c);
 *   mec       MEC's smaller lowering, then gemm.cl's kernel batched over
 *             output rows (opencl_conv_mec.c);
 *   implicit  gemm.cl's implicit-GEMM convolution, GPU kernels only
 *             (opencl_conv_implicit.c);
 *   winograd  F(2x2, 3x3), the transforms of winograd.cl around a GEMM
 *             batched over the 16 positions (opencl_conv_winograd.c).
 *
 * auto: im2col for 1x1 stride-1 unpadded filters (no lowering at all: the
 * plain GEMM). With the GPU kernels, winograd for FP32 3x3 stride-1
 * layers of at least AUTO_WINOGRAD_MIN_CHANNELS input channels and
 * AUTO_WINOGRAD_MIN_FILTERS filters, the CUDA backend's rule: NVIDIA's
 * OpenCL shows the same crossover (docs/PERFORMANCE.md, "Where Winograd
 * pays": few input channels favour the implicit GEMM, many favour
 * winograd, and at the floor the two are close); where its workspace
 * cannot be had, the implicit GEMM, as on CUDA. Otherwise, with the GPU
 * kernels, the implicit GEMM where the shape fits its indexing, as the
 * CUDA backend chooses (cuda_conv.c): its GEMM is the same kernel as
 * im2col's minus the lowering pass, which on a GPU takes about as long as
 * the GEMM itself. Else (CPU kernels, or a shape the implicit GEMM
 * refuses): im2col on GPUs whenever one image's columns fit the
 * workspace; otherwise MEC when output rows share input rows
 * (kernel_h > stride_h), the rows are at least AUTO_MEC_MIN_WIDTH wide
 * (narrower per-row GEMMs waste the tile) and its workspace is smaller;
 * else im2col.
 *
 * record->workspace_bytes: the device bytes this call's workspace takes
 * (the lowered chunk plus F'; U plus the chunk's V and M), whether
 * allocated for it or kept from an earlier call
 * (locus__opencl_conv_workspace).
 */
#include <stdint.h>

#include "opencl_conv.h"

#define AUTO_MEC_MIN_WIDTH 28
/* auto's winograd (GPU kernels): input channels and filters at least
 * these, the CUDA backend's floors (cuda_conv.c, docs/PERFORMANCE.md). */
#define AUTO_WINOGRAD_MIN_CHANNELS 16
#define AUTO_WINOGRAD_MIN_FILTERS 8

/* Whether the lowering kernels' and the GEMM's 32-bit row and column
 * indices, and the padded positions as int, hold the shape (im2col and
 * MEC). */
static int lowering_fits(const opencl_conv_shape *s)
{
    const double largest =
        (double)(s->h + 2 * s->ph) * (double)s->c * (double)s->s * (double)s->q;
    const double columns = (double)s->c * (double)s->r * (double)s->s;
    return largest <= (double)INT32_MAX && columns <= (double)INT32_MAX &&
           (double)s->p * (double)s->q <= (double)INT32_MAX &&
           s->w + 2 * s->pw <= (size_t)INT32_MAX && s->k <= (size_t)INT32_MAX;
}

static locus_conv_algorithm choose(const opencl_device *device,
                                   const opencl_conv_shape *s,
                                   locus_math_mode math)
{
    if (opencl_conv_is_pointwise(s))
        return LOCUS_CONV_IM2COL;
    /* FP32 only, as on CUDA (cuda_conv.c says why); this backend computes
     * every mode in FP32, but keeps auto's picks per mode the same. */
    if (!device->tuning.cpu_kernels && device->winograd_filter != NULL &&
        math == LOCUS_MATH_FP32 && s->c >= AUTO_WINOGRAD_MIN_CHANNELS &&
        s->k >= AUTO_WINOGRAD_MIN_FILTERS && locus__opencl_winograd_takes(s))
        return LOCUS_CONV_WINOGRAD;
    if (!device->tuning.cpu_kernels && device->conv_implicit != NULL &&
        locus__opencl_implicit_fits(s))
        return LOCUS_CONV_IMPLICIT_GEMM;
    /* A GPU runs one large batched GEMM far better than MEC's per-row
     * GEMMs of Q columns (docs/PERFORMANCE.md, "Moved from code
     * comments"): MEC only when one image's columns would not fit the
     * workspace. */
    if (!device->tuning.cpu_kernels &&
        locus__opencl_im2col_bytes(s) <= OPENCL_CONV_WORKSPACE_CAP)
        return LOCUS_CONV_IM2COL;
    if (s->r <= s->sh || s->q < AUTO_MEC_MIN_WIDTH)
        return LOCUS_CONV_IM2COL;
    return locus__opencl_mec_bytes(s) + locus__opencl_mec_filter_bytes(s) <
                   locus__opencl_im2col_bytes(s)
               ? LOCUS_CONV_MEC
               : LOCUS_CONV_IM2COL;
}

size_t locus__opencl_conv_chunk(const opencl_device *device, size_t batch,
                                size_t per_image)
{
    size_t cap = OPENCL_CONV_WORKSPACE_CAP;
    if (device->max_alloc_bytes < cap)
        cap = (size_t)device->max_alloc_bytes;
    size_t images = per_image > 0 ? cap / per_image : batch;
    if (images < 1)
        images = 1;
    return images < batch ? images : batch;
}

/* A workspace buffer, failing like an exhausted device when it exceeds the
 * largest allocation, so the runtime can place the work elsewhere. The
 * caller releases it.
 *
 * The buffer of each slot (0: the lowered images or Winograd's V, 1: the
 * permuted or transformed filter, 2: Winograd's M) is kept for the next call
 * and handed out again, retained, when it is large enough: PoCL backs every new
 * buffer with fresh pages, whose faults and zeroing cost a conv of one ResNet
 * image a tenth of its time, and a GPU driver allocates device memory at the
 * buffer's first use, in the op's time. At most OPENCL_CONV_WORKSPACE_CAP per
 * slot, held until the context ends (locus__opencl_program_release), as the
 * CUDA backend keeps its conv workspace. */
locus_status locus__opencl_conv_workspace(const opencl_conv_run *run,
                                          size_t bytes, int slot, cl_mem *out)
{
    opencl_device *device = run->device;
    *out = NULL;
    if ((uint64_t)bytes > device->max_alloc_bytes)
        return run->state->services->fail(
            LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
            "opencl:%zu (%s) conv2d: a workspace of %zu bytes exceeds "
            "CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu bytes)",
            run->index, device->name, bytes,
            (unsigned long long)device->max_alloc_bytes);
    cl_int err = CL_SUCCESS;
    if (device->workspace[slot] != NULL &&
        device->workspace_bytes[slot] >= bytes) {
        err = clRetainMemObject(device->workspace[slot]);
        if (err != CL_SUCCESS)
            return locus__opencl_op_fail(run->state, run->index, device, err,
                                         "clRetainMemObject",
                                         "conv2d workspace");
        *out = device->workspace[slot];
        return LOCUS_SUCCESS;
    }
    *out =
        clCreateBuffer(device->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (*out == NULL || err != CL_SUCCESS) {
        *out = NULL;
        return locus__opencl_op_fail(run->state, run->index, device, err,
                                     "clCreateBuffer", "conv2d workspace");
    }
    if (clRetainMemObject(*out) == CL_SUCCESS) {
        /* The smaller one it replaces goes once its last user is done. */
        if (device->workspace[slot] != NULL)
            clReleaseMemObject(device->workspace[slot]);
        device->workspace[slot] = *out;
        device->workspace_bytes[slot] = bytes;
    }
    return LOCUS_SUCCESS;
}

static locus_status shape_of(const opencl_state *state, size_t index,
                             const locus_conv2d_desc *d, opencl_conv_shape *s)
{
    if (d->dtype != LOCUS_DTYPE_F32 && d->dtype != LOCUS_DTYPE_F64)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "conv2d dtype %d is not implemented on "
                                     "opencl:%zu",
                                     (int)d->dtype, index);
    /* f64: im2col only (its lowering and the f64 GEMM); the other
     * algorithms' kernels are f32 (opencl_offers says so). */
    if (d->dtype == LOCUS_DTYPE_F64 &&
        (d->algorithm == LOCUS_CONV_MEC ||
         d->algorithm == LOCUS_CONV_IMPLICIT_GEMM ||
         d->algorithm == LOCUS_CONV_WINOGRAD))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "conv2d algorithm %s is not offered in f64 on opencl:%zu (im2col "
            "and auto are)",
            locus_conv_algorithm_ran(d->algorithm), index);
    if (d->dtype == LOCUS_DTYPE_F64 &&
        (d->math == LOCUS_MATH_TF32 || d->math == LOCUS_MATH_3XTF32))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu conv2d: math mode %s is f32-only; f64 takes fp32 "
            "(the default)",
            index, d->math == LOCUS_MATH_TF32 ? "tf32" : "3xtf32");
    if (d->batch == 0 || d->in_channels == 0 || d->out_channels == 0 ||
        d->kernel_height == 0 || d->kernel_width == 0 || d->stride_h == 0 ||
        d->stride_w == 0 || d->in_height + 2 * d->pad_h < d->kernel_height ||
        d->in_width + 2 * d->pad_w < d->kernel_width)
        return state->services->fail(
            LOCUS_ERROR_INVALID_ARGUMENT,
            "opencl:%zu conv2d: bad shape (batch %zu, channels %zu -> %zu, "
            "kernel %zux%zu, stride %zux%zu)",
            index, d->batch, d->in_channels, d->out_channels, d->kernel_height,
            d->kernel_width, d->stride_h, d->stride_w);
    *s = (opencl_conv_shape){
        .n = d->batch,
        .c = d->in_channels,
        .h = d->in_height,
        .w = d->in_width,
        .k = d->out_channels,
        .r = d->kernel_height,
        .s = d->kernel_width,
        .sh = d->stride_h,
        .sw = d->stride_w,
        .ph = d->pad_h,
        .pw = d->pad_w,
        .p = (d->in_height + 2 * d->pad_h - d->kernel_height) / d->stride_h + 1,
        .q = (d->in_width + 2 * d->pad_w - d->kernel_width) / d->stride_w + 1,
    };
    return LOCUS_SUCCESS;
}

/* NOT_SUPPORTED unless the algorithm's kernels index the shape. */
static locus_status check_fits(const opencl_state *state, size_t index,
                               locus_conv_algorithm algorithm,
                               const opencl_conv_shape *s)
{
    if (algorithm == LOCUS_CONV_WINOGRAD)
        return locus__opencl_winograd_check(state, index, s);
    if (algorithm == LOCUS_CONV_IMPLICIT_GEMM &&
        !locus__opencl_implicit_fits(s))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu conv2d: shape too large for the implicit GEMM's "
            "32-bit indexing (an image C*H*W, its depth C*R*S, its "
            "positions P*Q and the filter K*C*R*S must each stay under "
            "2^31 elements, and so must the padded height and width plus "
            "the kernel's)",
            index);
    if (algorithm != LOCUS_CONV_IMPLICIT_GEMM && !lowering_fits(s))
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "opencl:%zu conv2d: shape too large for "
                                     "the kernels' 32-bit indexing",
                                     index);
    return LOCUS_SUCCESS;
}

/* Runs *algorithm; asked is the caller's choice. auto's winograd needs
 * workspace the implicit GEMM does not: when the device has none to give,
 * that one runs instead where it can (it writes every output, whatever
 * the transforms already wrote), and *algorithm says so. */
static locus_status run_algorithm(opencl_conv_run *run,
                                  locus_conv_algorithm *algorithm,
                                  locus_conv_algorithm asked)
{
    switch (*algorithm) {
    case LOCUS_CONV_MEC:
        return locus__opencl_conv_mec(run);
    case LOCUS_CONV_IMPLICIT_GEMM:
        return locus__opencl_conv_implicit(run);
    case LOCUS_CONV_WINOGRAD: {
        locus_status status = locus__opencl_conv_winograd(run);
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY &&
            asked == LOCUS_CONV_AUTO && run->device->conv_implicit != NULL &&
            locus__opencl_implicit_fits(&run->sh)) {
            *algorithm = LOCUS_CONV_IMPLICIT_GEMM;
            status = locus__opencl_conv_implicit(run);
        }
        return status;
    }
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    }
    return locus__opencl_conv_im2col(run);
}

locus_status locus__opencl_conv2d(void *opaque, size_t index,
                                  const locus_conv2d_desc *desc,
                                  const void *input, const void *filter,
                                  void *output, locus_op_context *op)
{
    opencl_state *state = opaque;
    if (state == NULL || desc == NULL || input == NULL || filter == NULL ||
        output == NULL)
        return state == NULL
                   ? LOCUS_ERROR_NULL_ARGUMENT
                   : state->services->fail(
                         LOCUS_ERROR_NULL_ARGUMENT,
                         "opencl:%zu conv2d: NULL desc or buffer", index);
    opencl_conv_run run = {
        .state = state,
        .index = index,
        .input = (cl_mem)(uintptr_t)input,
        .filter = (cl_mem)(uintptr_t)filter,
        .output = (cl_mem)output,
        .math = desc->math,
        .f64 = desc->dtype == LOCUS_DTYPE_F64,
    };
    locus_status status = shape_of(state, index, desc, &run.sh);
    if (status != LOCUS_SUCCESS)
        return status;
    locus_conv_algorithm algorithm = desc->algorithm;
    if (algorithm != LOCUS_CONV_AUTO && algorithm != LOCUS_CONV_IM2COL &&
        algorithm != LOCUS_CONV_MEC && algorithm != LOCUS_CONV_IMPLICIT_GEMM &&
        algorithm != LOCUS_CONV_WINOGRAD)
        return state->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                     "conv2d algorithm %d is unknown",
                                     (int)desc->algorithm);
    /* A named algorithm's shape limits are known without the program. */
    if (algorithm != LOCUS_CONV_AUTO) {
        status = check_fits(state, index, algorithm, &run.sh);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    status = run.f64 ? locus__opencl_f64_begin(state, index, &run.device)
                     : locus__opencl_op_begin(state, index, &run.device);
    if (status != LOCUS_SUCCESS)
        return status;
    /* After op_begin: the device's tuning is known once its program is. */
    if (algorithm == LOCUS_CONV_AUTO && run.f64) {
        algorithm = LOCUS_CONV_IM2COL;
        status = check_fits(state, index, algorithm, &run.sh);
    } else if (algorithm == LOCUS_CONV_AUTO) {
        algorithm = choose(run.device, &run.sh, run.math);
        status = check_fits(state, index, algorithm, &run.sh);
    } else if (algorithm == LOCUS_CONV_IMPLICIT_GEMM &&
               run.device->tuning.cpu_kernels) {
        status = state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "conv2d algorithm implicit is not offered on opencl:%zu with the "
            "cpu kernels (im2col, mec, winograd, auto are)",
            index);
    }
    if (status != LOCUS_SUCCESS) {
        pthread_mutex_unlock(&run.device->lock);
        return status;
    }
    status = run_algorithm(&run, &algorithm, desc->algorithm);
    const char *failed = "";
    cl_int err = locus__opencl_finish(run.device, &failed);
    if (status == LOCUS_SUCCESS && err != CL_SUCCESS)
        status = locus__opencl_op_fail(state, index, run.device, err, failed,
                                       "conv2d");
    if (status == LOCUS_SUCCESS) {
        locus__opencl_set_algorithm(op, locus_conv_algorithm_ran(algorithm));
        if (op != NULL && op->record != NULL)
            op->record->workspace_bytes = run.workspace_bytes;
    }
    pthread_mutex_unlock(&run.device->lock);
    return status;
}
