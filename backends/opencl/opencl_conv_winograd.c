/*
 * conv2d by Winograd F(2x2, 3x3) on an OpenCL device, 3x3 stride 1 only,
 * both kernel variants: the CUDA backend's algorithm (cuda_conv.c,
 * conv_winograd.cu) with the same transforms (winograd.cl). U = G g G^T
 * once per call, then per chunk of images V = B^T d B over the 4x4 input
 * tiles, the 16 products M[xi] (K x T) = U[xi] (K x C) V[xi] (C x T) as
 * one launch of gemm.cl's kernel batched over xi (the device's tuning, as
 * every GEMM here), and Y = A^T m A back into NKPQ. U, V and M are
 * workspace slots 1, 0 and 2; the chunk's images are chosen so that the
 * three stay under OPENCL_CONV_WORKSPACE_CAP and each under the largest
 * allocation (at least one image). Its 32-bit indices are the CUDA
 * kernels' (winograd_fits).
 */
#include <stdint.h>

#include "opencl_conv.h"

/* 4x4 positions of a transformed Winograd tile: one GEMM each. */
#define WINOGRAD_POSITIONS 16
/* The transforms' work-groups and the most of them per launch (their
 * grid-stride loops cover the rest): the CUDA kernels' block and grid
 * cap. */
#define WINOGRAD_GROUP 256
#define WINOGRAD_MAX_GROUPS ((size_t)1 << 20)

static int is_winograd_shape(const opencl_conv_shape *s)
{
    return s->r == 3 && s->s == 3 && s->sh == 1 && s->sw == 1;
}

/* Winograd's 2x2 output tiles of one image. */
static size_t winograd_tiles(const opencl_conv_shape *s)
{
    return ((s->p + 1) / 2) * ((s->q + 1) / 2);
}

/* Whether the Winograd transforms' 32-bit indices (winograd.cl) hold the
 * shape: one image, one output image, the padded rows and columns plus a
 * tile, and U, V and M of a single image; the CUDA backend's shape_of
 * (conv_winograd.cu). A chunk of several images stays far below 2^31
 * elements: its V and M fit OPENCL_CONV_WORKSPACE_CAP bytes. */
static int winograd_fits(const opencl_conv_shape *s)
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

int locus__opencl_winograd_takes(const opencl_conv_shape *s)
{
    return is_winograd_shape(s) && winograd_fits(s);
}

/* Images per Winograd chunk: U (u_bytes) plus the chunk's V and M under
 * OPENCL_CONV_WORKSPACE_CAP, and each of V and M under the largest allocation;
 * at least one image (locus__opencl_conv_workspace then fails as out of device
 * memory when even that is too big). */
static size_t winograd_chunk(const opencl_device *device, size_t batch,
                             size_t u_bytes, size_t v_per_image,
                             size_t m_per_image)
{
    const size_t cap = u_bytes < OPENCL_CONV_WORKSPACE_CAP
                           ? OPENCL_CONV_WORKSPACE_CAP - u_bytes
                           : 0;
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
static cl_int winograd_filter(opencl_conv_run *run, cl_mem u,
                              const char **failed)
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
static cl_int winograd_input(opencl_conv_run *run, size_t first, size_t images,
                             cl_mem v, const char **failed)
{
    const opencl_conv_shape *s = &run->sh;
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
static cl_int winograd_output(opencl_conv_run *run, size_t first, size_t images,
                              cl_mem m, const char **failed)
{
    const opencl_conv_shape *s = &run->sh;
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
locus_status locus__opencl_conv_winograd(opencl_conv_run *run)
{
    const opencl_conv_shape *s = &run->sh;
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
    locus_status status = locus__opencl_conv_workspace(run, u_bytes, 1, &u);
    if (status == LOCUS_SUCCESS)
        status = locus__opencl_conv_workspace(run, chunk * v_per_image, 0, &v);
    if (status == LOCUS_SUCCESS)
        status = locus__opencl_conv_workspace(run, chunk * m_per_image, 2, &m);
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
         * the im2col run does. */
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

/* Winograd: NOT_SUPPORTED unless the shape is one the transforms cover
 * (the CUDA backend's check_winograd). */
locus_status locus__opencl_winograd_check(const opencl_state *state,
                                          size_t index,
                                          const opencl_conv_shape *s)
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
