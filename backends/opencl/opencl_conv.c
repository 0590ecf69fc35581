/*
 * Conv2d on an OpenCL device, with the CPU backend's semantics (NCHW input,
 * KCRS filter, zero padding, cross-correlation): a lowering kernel of
 * conv.cl, then gemm.cl's kernel batched over images or output rows; or,
 * with the GPU kernels, gemm.cl's implicit-GEMM convolution.
 *
 * im2col: per image the (C R S) x (P Q) column matrix, then
 * output_i (K x PQ) = F (K x CRS) * cols_i, one launch batched over the
 * images of a chunk. A 1x1 filter with stride 1 and no padding needs no
 * lowering: the image is the column matrix (workspace 0).
 *
 * MEC (backends/cpu/mec.c has the derivation): per image the lowered
 * matrix L, (Hp C S) x Q, and output row p is F' (K x RCS) times the window
 * of L starting at row p sh C S; one launch per image batched over the P
 * rows (the windows overlap, which is MEC's point). F' is the filter in
 * (k, r, c, s) order, permuted once per call unless R == 1 or C == 1.
 *
 * Images are lowered in chunks so the lowered part stays under
 * CONV_WORKSPACE_CAP and the device's largest allocation (at least one
 * image, which fails as out of device memory when even that is too big).
 *
 * implicit (GPU kernels only): per image output_i = F * cols_i, one launch
 * batched over the images, whose B tile loader gathers cols_i from the
 * image itself (gemm.cl): no workspace, no lowering pass. Its indices
 * inside an image are 32-bit; shapes that do not fit are refused
 * (implicit_fits). The CPU kernels do not have it: a CPU device gathers
 * no faster than it copies, and the lowerings there copy whole rows
 * (LOCUS_ERROR_NOT_SUPPORTED when asked for by name).
 *
 * winograd, F(2x2, 3x3), 3x3 stride 1 only, both kernel variants: the
 * CUDA backend's algorithm (cuda_conv.c, conv_winograd.cu) with the same
 * transforms (winograd.cl). U = G g G^T once per call, then per chunk of
 * images V = B^T d B over the 4x4 input tiles, the 16 products
 * M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T) as one launch of gemm.cl's
 * kernel batched over xi (the device's tuning, as every GEMM here), and
 * Y = A^T m A back into NKPQ. U, V and M are workspace slots 1, 0 and 2;
 * the chunk's images are chosen so that the three stay under
 * CONV_WORKSPACE_CAP and each under the largest allocation (at least one
 * image). Its 32-bit indices are the CUDA kernels' (winograd_fits).
 *
 * auto: im2col for 1x1 stride-1 unpadded filters (no lowering at all: the
 * plain GEMM). With the GPU kernels, winograd for FP32 3x3 stride-1
 * layers of at least AUTO_WINOGRAD_MIN_CHANNELS input channels and
 * AUTO_WINOGRAD_MIN_FILTERS filters, the CUDA backend's rule (on the H200
 * NVIDIA's OpenCL behaves alike: 4 or 8 input channels favour the
 * implicit GEMM 1.1-1.9x, 32 and more winograd 1.2-2x, 64->8 winograd
 * 1.7x; 16 channels is the crossover, winograd 1.15x faster at 56x56
 * batch 32, 1.1-1.35x slower at batch 1 and at 14x14); where its
 * workspace cannot be had, the implicit GEMM, as on CUDA. Otherwise,
 * with the GPU kernels, the implicit GEMM where
 * the shape fits its indexing, as the CUDA backend chooses (cuda_conv.c):
 * its GEMM is the same kernel as im2col's minus the lowering pass, which
 * on the H200 at batch 32 was as long as the GEMM itself (im2col 1.03 ms
 * against CUDA's implicit 0.39 at 3x3 64->64 56x56, 1.03 against 0.35 at
 * 7x7/2 3->64 224x224). Else (CPU kernels, or a shape the implicit GEMM
 * refuses): im2col on GPUs whenever one image's columns fit the
 * workspace; otherwise MEC when output rows share input rows
 * (kernel_h > stride_h), the rows are at least AUTO_MEC_MIN_WIDTH wide
 * (narrower per-row GEMMs waste the tile) and its workspace is smaller;
 * else im2col.
 *
 * record->workspace_bytes: the device bytes this call's workspace takes
 * (the lowered chunk plus F'; U plus the chunk's V and M), whether
 * allocated for it or kept from an earlier call (workspace()).
 */
#include <stdint.h>
#include <stdio.h>

#include "opencl_launch.h"

#define CONV_WORKSPACE_CAP ((size_t)256 << 20)
#define AUTO_MEC_MIN_WIDTH 28
#define LOWER_GROUP 64
/* Enough to even out rows of unequal cost (padding rows are cheap). */
#define LOWER_ITEMS_PER_UNIT 8
/* Images per launch of the implicit GEMM (dimension 2 of its range): the
 * CUDA grid's z limit, which NVIDIA's OpenCL runs on. */
#define IMPLICIT_MAX_IMAGES ((size_t)65535)
/* 4x4 positions of a transformed Winograd tile: one GEMM each. */
#define WINOGRAD_POSITIONS 16
/* auto's winograd (GPU kernels): input channels and filters at least
 * these, the CUDA backend's floors (measured: cuda_conv.c, above). */
#define AUTO_WINOGRAD_MIN_CHANNELS 16
#define AUTO_WINOGRAD_MIN_FILTERS 8
/* The transforms' work-groups and the most of them per launch (their
 * grid-stride loops cover the rest): the CUDA kernels' block and grid
 * cap. */
#define WINOGRAD_GROUP 256
#define WINOGRAD_MAX_GROUPS ((size_t)1 << 20)

typedef struct conv_shape {
    size_t n, c, h, w, k, r, s, sh, sw, ph, pw, p, q;
} conv_shape;

typedef struct conv_run {
    opencl_state *state;
    size_t index;
    opencl_device *device;
    conv_shape sh;
    locus_math_mode math;
    cl_mem input, filter, output;
    size_t workspace_bytes;
} conv_run;

static int is_pointwise(const conv_shape *s)
{
    return s->r == 1 && s->s == 1 && s->sh == 1 && s->sw == 1 && s->ph == 0 &&
           s->pw == 0;
}

static size_t im2col_per_image(const conv_shape *s)
{
    return s->c * s->r * s->s * s->p * s->q * sizeof(float);
}

static size_t mec_per_image(const conv_shape *s)
{
    return (s->h + 2 * s->ph) * s->c * s->s * s->q * sizeof(float);
}

static size_t mec_filter_bytes(const conv_shape *s)
{
    return (s->r > 1 && s->c > 1) ? s->k * s->c * s->r * s->s * sizeof(float)
                                  : 0;
}

/* Whether the implicit GEMM's 32-bit indices (gemm.cl) hold the shape:
 * an image (C H W), its depth (C R S), its positions (P Q), the filter
 * (K C R S), and the padded rows and columns plus the kernel (the
 * gathers' h and w as int); the CUDA backend's shape_of. */
static int implicit_fits(const conv_shape *s)
{
    const double limit = (double)INT32_MAX;
    const double crs = (double)s->c * (double)s->r * (double)s->s;
    return (double)s->c * (double)s->h * (double)s->w <= limit &&
           crs <= limit && (double)s->p * (double)s->q <= limit &&
           (double)s->k * crs <= limit &&
           (double)s->h + 2.0 * (double)s->ph + (double)s->r <= limit &&
           (double)s->w + 2.0 * (double)s->pw + (double)s->s <= limit;
}

/* Whether the lowering kernels' and the GEMM's 32-bit row and column
 * indices, and the padded positions as int, hold the shape (im2col and
 * MEC). */
static int lowering_fits(const conv_shape *s)
{
    const double largest =
        (double)(s->h + 2 * s->ph) * (double)s->c * (double)s->s * (double)s->q;
    const double columns = (double)s->c * (double)s->r * (double)s->s;
    return largest <= (double)INT32_MAX && columns <= (double)INT32_MAX &&
           (double)s->p * (double)s->q <= (double)INT32_MAX &&
           s->w + 2 * s->pw <= (size_t)INT32_MAX && s->k <= (size_t)INT32_MAX;
}

static int is_winograd_shape(const conv_shape *s)
{
    return s->r == 3 && s->s == 3 && s->sh == 1 && s->sw == 1;
}

/* Winograd's 2x2 output tiles of one image. */
static size_t winograd_tiles(const conv_shape *s)
{
    return ((s->p + 1) / 2) * ((s->q + 1) / 2);
}

/* Whether the Winograd transforms' 32-bit indices (winograd.cl) hold the
 * shape: one image, one output image, the padded rows and columns plus a
 * tile, and U, V and M of a single image; the CUDA backend's shape_of
 * (conv_winograd.cu). A chunk of several images stays far below 2^31
 * elements: its V and M fit CONV_WORKSPACE_CAP bytes. */
static int winograd_fits(const conv_shape *s)
{
    const double tiles = (double)winograd_tiles(s);
    const double positions = WINOGRAD_POSITIONS;
    const double extents[] = {
        (double)s->c * (double)s->h * (double)s->w,
        (double)s->k * (double)s->p * (double)s->q,
        (double)s->h + 2.0 * (double)s->ph + 4.0,
        (double)s->w + 2.0 * (double)s->pw + 4.0,
        positions * (double)s->k * (double)s->c,
        positions * (double)s->c * tiles,
        positions * (double)s->k * tiles,
    };
    for (size_t i = 0; i < sizeof extents / sizeof extents[0]; i++)
        if (extents[i] > (double)INT32_MAX)
            return 0;
    return 1;
}

static locus_conv_algorithm choose(const opencl_device *device,
                                   const conv_shape *s, locus_math_mode math)
{
    if (is_pointwise(s))
        return LOCUS_CONV_IM2COL;
    /* FP32 only, as on CUDA (cuda_conv.c says why); this backend computes
     * every mode in FP32, but keeps auto's picks per mode the same. */
    if (!device->tuning.cpu_kernels && device->winograd_filter != NULL &&
        math == LOCUS_MATH_FP32 && is_winograd_shape(s) &&
        s->c >= AUTO_WINOGRAD_MIN_CHANNELS &&
        s->k >= AUTO_WINOGRAD_MIN_FILTERS && winograd_fits(s))
        return LOCUS_CONV_WINOGRAD;
    if (!device->tuning.cpu_kernels && device->conv_implicit != NULL &&
        implicit_fits(s))
        return LOCUS_CONV_IMPLICIT_GEMM;
    /* A GPU runs one large batched GEMM far better than MEC's per-row
     * GEMMs of Q columns (H200, 3x3 64->64 at 56x56, batch 32: MEC
     * 2.61 ms, 3.2 times the CUDA backend's im2col): MEC only when one
     * image's columns would not fit the workspace. */
    if (!device->tuning.cpu_kernels &&
        im2col_per_image(s) <= CONV_WORKSPACE_CAP)
        return LOCUS_CONV_IM2COL;
    if (s->r <= s->sh || s->q < AUTO_MEC_MIN_WIDTH)
        return LOCUS_CONV_IM2COL;
    return mec_per_image(s) + mec_filter_bytes(s) < im2col_per_image(s)
               ? LOCUS_CONV_MEC
               : LOCUS_CONV_IM2COL;
}

static size_t images_per_chunk(const opencl_device *device, size_t batch,
                               size_t per_image)
{
    size_t cap = CONV_WORKSPACE_CAP;
    if (device->max_alloc_bytes < cap)
        cap = (size_t)device->max_alloc_bytes;
    size_t images = per_image > 0 ? cap / per_image : batch;
    if (images < 1)
        images = 1;
    return images < batch ? images : batch;
}

/* The lowering kernels' `total` (conv.cl): the elements written on GPUs,
 * one work-item each; the rows of `row_length` elements in the CPU
 * variant. */
static cl_ulong lower_total(const conv_run *run, size_t rows, size_t row_length)
{
    return run->device->tuning.cpu_kernels ? (cl_ulong)rows
                                           : (cl_ulong)rows * row_length;
}

/* The work-items of a lowering kernel: one per element on GPUs; in the
 * CPU variant LOWER_ITEMS_PER_UNIT per compute unit (fewer when there are
 * fewer rows), each copying a share of the rows. */
static size_t lower_items(const conv_run *run, cl_ulong total)
{
    if (!run->device->tuning.cpu_kernels)
        return (size_t)total;
    const size_t units =
        run->device->compute_units > 0 ? (size_t)run->device->compute_units : 1;
    const size_t items = units * LOWER_ITEMS_PER_UNIT;
    return total < items ? (size_t)total : items;
}

static size_t lower_group(const conv_run *run)
{
    return run->device->tuning.cpu_kernels ? 1 : LOWER_GROUP;
}

/* A workspace buffer, failing like an exhausted device when it exceeds the
 * largest allocation, so the runtime can place the work elsewhere. The
 * caller releases it.
 *
 * The buffer of each slot (0: the lowered images, 1: the permuted
 * filter) is kept for the next call and handed out again, retained, when
 * it is large enough: PoCL backs every new buffer with fresh pages, whose
 * faults and zeroing cost a conv of one ResNet image a tenth of its time,
 * and a GPU driver allocates device memory at the buffer's first use, in
 * the op's time. At most CONV_WORKSPACE_CAP per slot, held until the
 * context ends (locus__opencl_program_release), as the CUDA backend keeps
 * its conv workspace. */
static locus_status workspace(const conv_run *run, size_t bytes, int slot,
                              cl_mem *out)
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

static locus_status run_im2col(conv_run *run)
{
    const conv_shape *s = &run->sh;
    const size_t pq = s->p * s->q, crs = s->c * s->r * s->s;
    opencl_gemm g = {
        .m = s->k,
        .n = pq,
        .k = crs,
        .lda = crs,
        .ldb = pq,
        .ldc = pq,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = run->filter,
        .c = run->output,
        .b_batch = crs * pq,
        .c_batch = s->k * pq,
    };
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    if (is_pointwise(s)) {
        g.b = run->input;
        g.batch = s->n;
        run->workspace_bytes = 0;
        err = locus__opencl_enqueue_gemm(run->device, &g, &failed);
        return err == CL_SUCCESS
                   ? LOCUS_SUCCESS
                   : locus__opencl_op_fail(run->state, run->index, run->device,
                                           err, failed, "conv2d 1x1 gemm");
    }
    const size_t per_image = im2col_per_image(s);
    const size_t chunk = images_per_chunk(run->device, s->n, per_image);
    cl_mem cols = NULL;
    locus_status status = workspace(run, chunk * per_image, 0, &cols);
    if (status != LOCUS_SUCCESS)
        return status;
    run->workspace_bytes = chunk * per_image;
    g.b = cols;
    const cl_uint C = (cl_uint)s->c, H = (cl_uint)s->h, W = (cl_uint)s->w,
                  R = (cl_uint)s->r, S = (cl_uint)s->s, P = (cl_uint)s->p,
                  Q = (cl_uint)s->q, SH = (cl_uint)s->sh, SW = (cl_uint)s->sw,
                  PH = (cl_uint)s->ph, PW = (cl_uint)s->pw;
    for (size_t first = 0; first < s->n && status == LOCUS_SUCCESS;
         first += chunk) {
        const size_t images = s->n - first < chunk ? s->n - first : chunk;
        const cl_ulong x_off = first * s->c * s->h * s->w;
        const cl_ulong total = lower_total(run, images * crs, pq);
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->input},
            {sizeof x_off, &x_off},
            {sizeof(cl_mem), &cols},
            {sizeof total, &total},
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
        err = locus__opencl_enqueue_1d(run->device, run->device->im2col, args,
                                       sizeof args / sizeof args[0],
                                       lower_items(run, total),
                                       lower_group(run), &failed);
        if (err == CL_SUCCESS) {
            g.c_off = first * s->k * pq;
            g.batch = images;
            err = locus__opencl_enqueue_gemm(run->device, &g, &failed);
        }
        /* The next chunk overwrites cols: wait for this one's GEMM. */
        if (err == CL_SUCCESS && first + chunk < s->n)
            err = locus__opencl_finish(run->device, &failed);
        if (err != CL_SUCCESS)
            status = locus__opencl_op_fail(run->state, run->index, run->device,
                                           err, failed, "conv2d im2col");
    }
    /* Released after the op's commands completed: conv2d waits with
     * clFinish before anything else, and the queue keeps the buffer alive
     * until its commands end anyway. */
    clReleaseMemObject(cols);
    return status;
}

static locus_status run_mec(conv_run *run)
{
    const conv_shape *s = &run->sh;
    const size_t rcs = s->r * s->c * s->s;
    const size_t permuted_bytes = mec_filter_bytes(s);
    const size_t per_image = mec_per_image(s);
    const size_t chunk = images_per_chunk(run->device, s->n, per_image);
    const size_t l_size = per_image / sizeof(float);
    cl_mem lowered = NULL, permuted = NULL;
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    locus_status status = workspace(run, chunk * per_image, 0, &lowered);
    if (status == LOCUS_SUCCESS && permuted_bytes > 0)
        status = workspace(run, permuted_bytes, 1, &permuted);
    if (status != LOCUS_SUCCESS)
        goto release;
    run->workspace_bytes = chunk * per_image + permuted_bytes;
    const cl_uint C = (cl_uint)s->c, H = (cl_uint)s->h, W = (cl_uint)s->w,
                  R = (cl_uint)s->r, S = (cl_uint)s->s, Q = (cl_uint)s->q,
                  SW = (cl_uint)s->sw, PH = (cl_uint)s->ph, PW = (cl_uint)s->pw;
    if (permuted != NULL) {
        const cl_ulong total = lower_total(run, s->k * s->r, s->c * s->s);
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->filter},
            {sizeof(cl_mem), &permuted},
            {sizeof total, &total},
            {sizeof C, &C},
            {sizeof R, &R},
            {sizeof S, &S},
        };
        err = locus__opencl_enqueue_1d(run->device, run->device->filter_krcs,
                                       args, sizeof args / sizeof args[0],
                                       lower_items(run, total),
                                       lower_group(run), &failed);
    }
    opencl_gemm g = {
        .m = s->k,
        .n = s->q,
        .k = rcs,
        .lda = rcs,
        .ldb = s->q,
        .ldc = s->p * s->q,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = permuted != NULL ? permuted : run->filter,
        .b = lowered,
        .c = run->output,
        .b_batch = s->sh * s->c * s->s * s->q,
        .c_batch = s->q,
        .batch = s->p,
    };
    for (size_t first = 0; first < s->n && err == CL_SUCCESS; first += chunk) {
        const size_t images = s->n - first < chunk ? s->n - first : chunk;
        const cl_ulong x_off = first * s->c * s->h * s->w;
        const cl_ulong total = lower_total(run, images * l_size / s->q, s->q);
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->input},
            {sizeof x_off, &x_off},
            {sizeof(cl_mem), &lowered},
            {sizeof total, &total},
            {sizeof C, &C},
            {sizeof H, &H},
            {sizeof W, &W},
            {sizeof S, &S},
            {sizeof Q, &Q},
            {sizeof SW, &SW},
            {sizeof PH, &PH},
            {sizeof PW, &PW},
        };
        err = locus__opencl_enqueue_1d(run->device, run->device->mec_lower,
                                       args, sizeof args / sizeof args[0],
                                       lower_items(run, total),
                                       lower_group(run), &failed);
        for (size_t i = 0; i < images && err == CL_SUCCESS; i++) {
            g.b_off = i * l_size;
            g.c_off = (first + i) * s->k * s->p * s->q;
            err = locus__opencl_enqueue_gemm(run->device, &g, &failed);
        }
        if (err == CL_SUCCESS && first + chunk < s->n)
            err = locus__opencl_finish(run->device, &failed);
    }
    if (err != CL_SUCCESS)
        status = locus__opencl_op_fail(run->state, run->index, run->device, err,
                                       failed, "conv2d mec");
release:
    if (lowered != NULL)
        clReleaseMemObject(lowered);
    if (permuted != NULL)
        clReleaseMemObject(permuted);
    return status;
}

/* One launch per IMPLICIT_MAX_IMAGES images: output_i = F * cols_i, the
 * short kernel (64-row tiles) for at most 64 filters. */
static locus_status run_implicit(conv_run *run)
{
    const conv_shape *s = &run->sh;
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
     * are any, (P - 1) sh fits the padded height (implicit_fits); with one
     * position the stride is unused, and may not fit 32 bits. */
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

/* Images per Winograd chunk: U (u_bytes) plus the chunk's V and M under
 * CONV_WORKSPACE_CAP, and each of V and M under the largest allocation;
 * at least one image (workspace() then fails as out of device memory
 * when even that is too big). */
static size_t winograd_chunk(const opencl_device *device, size_t batch,
                             size_t u_bytes, size_t v_per_image,
                             size_t m_per_image)
{
    const size_t cap =
        u_bytes < CONV_WORKSPACE_CAP ? CONV_WORKSPACE_CAP - u_bytes : 0;
    size_t images = cap / (v_per_image + m_per_image);
    const size_t largest =
        v_per_image > m_per_image ? v_per_image : m_per_image;
    if ((uint64_t)images * largest > device->max_alloc_bytes)
        images = (size_t)(device->max_alloc_bytes / largest);
    if (images < 1)
        images = 1;
    return images < batch ? images : batch;
}

/* The work-items of a Winograd transform over `total` elements: one each,
 * up to WINOGRAD_MAX_GROUPS groups. */
static size_t winograd_items(cl_uint total)
{
    const size_t most = WINOGRAD_MAX_GROUPS * WINOGRAD_GROUP;
    return (size_t)total < most ? (size_t)total : most;
}

/* U = G g G^T of the whole filter into u. */
static cl_int winograd_filter(conv_run *run, cl_mem u, const char **failed)
{
    const cl_uint total = (cl_uint)(run->sh.k * run->sh.c);
    const opencl_arg args[] = {
        {sizeof(cl_mem), &run->filter},
        {sizeof total, &total},
        {sizeof(cl_mem), &u},
    };
    return locus__opencl_enqueue_1d(run->device, run->device->winograd_filter,
                                    args, sizeof args / sizeof args[0],
                                    winograd_items(total), WINOGRAD_GROUP,
                                    failed);
}

/* V = B^T d B of the tiles of `images` images from image `first`. */
static cl_int winograd_input(conv_run *run, size_t first, size_t images,
                             cl_mem v, const char **failed)
{
    const conv_shape *s = &run->sh;
    const cl_ulong x_off = first * s->c * s->h * s->w;
    const cl_int C = (cl_int)s->c, H = (cl_int)s->h, W = (cl_int)s->w,
                 PH = (cl_int)s->ph, PW = (cl_int)s->pw,
                 tiles_w = (cl_int)((s->q + 1) / 2),
                 tiles = (cl_int)winograd_tiles(s),
                 tile_count = (cl_int)(images * winograd_tiles(s));
    const opencl_arg args[] = {
        {sizeof(cl_mem), &run->input},
        {sizeof x_off, &x_off},
        {sizeof(cl_mem), &v},
        {sizeof C, &C},
        {sizeof H, &H},
        {sizeof W, &W},
        {sizeof PH, &PH},
        {sizeof PW, &PW},
        {sizeof tiles_w, &tiles_w},
        {sizeof tiles, &tiles},
        {sizeof tile_count, &tile_count},
    };
    return locus__opencl_enqueue_1d(
        run->device, run->device->winograd_input, args,
        sizeof args / sizeof args[0],
        winograd_items((cl_uint)C * (cl_uint)tile_count), WINOGRAD_GROUP,
        failed);
}

/* Y = A^T m A of the chunk's tiles into the output from image `first`. */
static cl_int winograd_output(conv_run *run, size_t first, size_t images,
                              cl_mem m, const char **failed)
{
    const conv_shape *s = &run->sh;
    const cl_ulong m_off = 0, y_off = first * s->k * s->p * s->q;
    const cl_int K = (cl_int)s->k, P = (cl_int)s->p, Q = (cl_int)s->q,
                 tiles_w = (cl_int)((s->q + 1) / 2),
                 tiles = (cl_int)winograd_tiles(s),
                 tile_count = (cl_int)(images * winograd_tiles(s));
    /* Q even: every tile's row pair starts at an even float of the
     * buffer, whose base is aligned (CL_DEVICE_MEM_BASE_ADDR_ALIGN). */
    const cl_int pair = s->q % 2 == 0;
    const opencl_arg args[] = {
        {sizeof(cl_mem), &m},
        {sizeof m_off, &m_off},
        {sizeof(cl_mem), &run->output},
        {sizeof y_off, &y_off},
        {sizeof K, &K},
        {sizeof P, &P},
        {sizeof Q, &Q},
        {sizeof tiles_w, &tiles_w},
        {sizeof tiles, &tiles},
        {sizeof tile_count, &tile_count},
        {sizeof pair, &pair},
    };
    return locus__opencl_enqueue_1d(
        run->device, run->device->winograd_output, args,
        sizeof args / sizeof args[0],
        winograd_items((cl_uint)K * (cl_uint)tile_count), WINOGRAD_GROUP,
        failed);
}

/* U once, then per chunk V (input tiles), the batched GEMM into M, and
 * the output transform. */
static locus_status run_winograd(conv_run *run)
{
    const conv_shape *s = &run->sh;
    opencl_device *device = run->device;
    if (device->winograd_filter == NULL || device->winograd_input == NULL ||
        device->winograd_output == NULL)
        return run->state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu (%s) conv2d: the program has no winograd kernels",
            run->index, device->name);
    const size_t tiles = winograd_tiles(s);
    const size_t u_bytes = WINOGRAD_POSITIONS * s->k * s->c * sizeof(float);
    const size_t v_per_image =
        WINOGRAD_POSITIONS * s->c * tiles * sizeof(float);
    const size_t m_per_image =
        WINOGRAD_POSITIONS * s->k * tiles * sizeof(float);
    const size_t chunk =
        winograd_chunk(device, s->n, u_bytes, v_per_image, m_per_image);
    cl_mem u = NULL, v = NULL, m = NULL;
    locus_status status = workspace(run, u_bytes, 1, &u);
    if (status == LOCUS_SUCCESS)
        status = workspace(run, chunk * v_per_image, 0, &v);
    if (status == LOCUS_SUCCESS)
        status = workspace(run, chunk * m_per_image, 2, &m);
    if (status != LOCUS_SUCCESS)
        goto release;
    run->workspace_bytes = u_bytes + chunk * (v_per_image + m_per_image);
    const char *failed = "", *what = "conv2d winograd filter transform";
    cl_int err = winograd_filter(run, u, &failed);
    /* M[xi] (K x T) = U[xi] (K x C) * V[xi] (C x T), xi the batch. */
    opencl_gemm g = {
        .m = s->k,
        .k = s->c,
        .lda = s->c,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = u,
        .b = v,
        .c = m,
        .a_batch = s->k * s->c,
        .batch = WINOGRAD_POSITIONS,
    };
    for (size_t first = 0; first < s->n && err == CL_SUCCESS; first += chunk) {
        const size_t images = s->n - first < chunk ? s->n - first : chunk;
        const size_t t = images * tiles;
        what = "conv2d winograd input transform";
        err = winograd_input(run, first, images, v, &failed);
        if (err == CL_SUCCESS) {
            what = "conv2d winograd gemm";
            g.n = g.ldb = g.ldc = t;
            g.b_batch = s->c * t;
            g.c_batch = s->k * t;
            err = locus__opencl_enqueue_gemm(device, &g, &failed);
        }
        if (err == CL_SUCCESS) {
            what = "conv2d winograd output transform";
            err = winograd_output(run, first, images, m, &failed);
        }
        /* The next chunk overwrites V and M: wait for this one's, as
         * run_im2col does. */
        if (err == CL_SUCCESS && first + chunk < s->n) {
            what = "conv2d winograd";
            err = locus__opencl_finish(device, &failed);
        }
    }
    if (err != CL_SUCCESS)
        status = locus__opencl_op_fail(run->state, run->index, device, err,
                                       failed, what);
release:
    if (u != NULL)
        clReleaseMemObject(u);
    if (v != NULL)
        clReleaseMemObject(v);
    if (m != NULL)
        clReleaseMemObject(m);
    return status;
}

static locus_status shape_of(const opencl_state *state, size_t index,
                             const locus_conv2d_desc *d, conv_shape *s)
{
    if (d->dtype != LOCUS_DTYPE_F32)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "conv2d dtype %d is not implemented on "
                                     "opencl:%zu",
                                     (int)d->dtype, index);
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
    *s = (conv_shape){
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

/* Winograd: NOT_SUPPORTED unless the shape is one the transforms cover
 * (the CUDA backend's check_winograd). */
static locus_status check_winograd(const opencl_state *state, size_t index,
                                   const conv_shape *s)
{
    if (!is_winograd_shape(s))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu conv2d: winograd F(2x2, 3x3) takes 3x3 filters with "
            "stride 1 only, not a %zux%zu filter with stride %zux%zu (im2col, "
            "mec, auto take any, and implicit with the gpu kernels)",
            index, s->r, s->s, s->sh, s->sw);
    if (!winograd_fits(s))
        return state->services->fail(
            LOCUS_ERROR_NOT_SUPPORTED,
            "opencl:%zu conv2d: shape too large for winograd's 32-bit "
            "indexing (an image, an output image, and one image's "
            "transformed filter, input tiles and products, 16 K*C, 16 "
            "C*tiles and 16 K*tiles, must each stay under 2^31 elements)",
            index);
    return LOCUS_SUCCESS;
}

/* NOT_SUPPORTED unless the algorithm's kernels index the shape. */
static locus_status check_fits(const opencl_state *state, size_t index,
                               locus_conv_algorithm algorithm,
                               const conv_shape *s)
{
    if (algorithm == LOCUS_CONV_WINOGRAD)
        return check_winograd(state, index, s);
    if (algorithm == LOCUS_CONV_IMPLICIT_GEMM && !implicit_fits(s))
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
static locus_status run_algorithm(conv_run *run,
                                  locus_conv_algorithm *algorithm,
                                  locus_conv_algorithm asked)
{
    switch (*algorithm) {
    case LOCUS_CONV_MEC:
        return run_mec(run);
    case LOCUS_CONV_IMPLICIT_GEMM:
        return run_implicit(run);
    case LOCUS_CONV_WINOGRAD: {
        locus_status status = run_winograd(run);
        if (status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY &&
            asked == LOCUS_CONV_AUTO && run->device->conv_implicit != NULL &&
            implicit_fits(&run->sh)) {
            *algorithm = LOCUS_CONV_IMPLICIT_GEMM;
            status = run_implicit(run);
        }
        return status;
    }
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    }
    return run_im2col(run);
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
    conv_run run = {
        .state = state,
        .index = index,
        .input = (cl_mem)(uintptr_t)input,
        .filter = (cl_mem)(uintptr_t)filter,
        .output = (cl_mem)output,
        .math = desc->math,
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
    status = locus__opencl_op_begin(state, index, &run.device);
    if (status != LOCUS_SUCCESS)
        return status;
    /* After op_begin: the device's tuning is known once its program is. */
    if (algorithm == LOCUS_CONV_AUTO) {
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
