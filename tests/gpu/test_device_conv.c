/* Conv2d on the device under test (device_test.h) against a float64 direct
 * loop: every algorithm the backend offers (im2col, MEC, implicit GEMM on
 * CUDA and with OpenCL's GPU kernels, Winograd F(2x2, 3x3) on the 3x3
 * stride-1 cases with either backend and either OpenCL kernel variant,
 * auto) over strides 1 and 2, padding 0, 1 and 3 (and 2 in a larger case),
 * filters 1, 3, 5 and 7 (non-square images, batch 1 and 3), the math modes
 * on the 3x3 filters and on larger layers; outputs poisoned with NaN
 * before each run; the record names the algorithm and its workspace.
 * Where the implicit GEMM is offered, a shape past its 32-bit indexing is
 * refused; where it is not, asking for it is. Winograd asked for a shape
 * other than 3x3 stride 1 is refused. */
#include <string.h>

#include "device_test.h"

typedef struct conv_case {
    size_t batch, channels, height, width, filters, kernel, stride, pad;
    /* On CUDA in FP32, im2col and auto run this one image's GEMM with its
     * k split (few tiles, a deep k): auto records im2col, and the
     * workspace holds the partial products past the lowered columns. */
    int cuda_splits;
} conv_case;

static const char *const algorithm_names[] = {"auto", "im2col", "mec",
                                              "implicit", "winograd"};
static double worst[3], worst_winograd[3];
/* Whether the device under test offers the implicit GEMM (main). */
static int has_implicit;

/* Winograd F(2x2, 3x3) computes each 2x2 output tile together: its
 * transforms add and subtract the tile's inputs and products, so an
 * output's rounding error scales with the terms of its whole tile, not
 * with its own (an output that is mostly padding can have far smaller
 * terms than its neighbours). Its error is therefore measured against the
 * largest sum of |terms| among the outputs of its tile (tile_magnitude).
 * scripts/winograd-error.py emulates the algorithm in float32 on these
 * cases (40 random draws each): the worst error in that metric was 3.9
 * units of 2^-24 in fp32, 2.4 units of 2^-11 in tf32 (2.8 if the operands
 * are truncated rather than rounded), 0.8 units of 2^-21 in 3xtf32, and
 * it shrinks as C grows. The tolerance is cuda_test_tolerance's with 16
 * units of the input roundoff instead of 4, that is 4x the worst seen, and
 * the same sqrt(terms) allowance for the GEMM's accumulation order. In
 * the direct sum's metric (each output's own terms) the same emulation
 * saw up to 38 units of 2^-24 at outputs of the pad-3 cases. */
static double winograd_tolerance(size_t terms, double input_roundoff)
{
    return 16.0 * input_roundoff + 4.0 * sqrt((double)terms) * 0x1p-24;
}

/* tile[i]: the largest magnitude[] among the outputs of output i's 2x2
 * Winograd tile (rows p & ~1 .. +1, columns q & ~1 .. +1, inside P x Q). */
static void tile_magnitude(size_t planes, size_t p_count, size_t q_count,
                           const double *magnitude, double *tile)
{
    for (size_t plane = 0; plane < planes; plane++) {
        const double *m = magnitude + plane * p_count * q_count;
        double *out = tile + plane * p_count * q_count;
        for (size_t p = 0; p < p_count; p++)
            for (size_t q = 0; q < q_count; q++) {
                double largest = 0.0;
                for (size_t y = p & ~(size_t)1; y <= (p | 1); y++)
                    for (size_t x = q & ~(size_t)1; x <= (q | 1); x++)
                        if (y < p_count && x < q_count &&
                            m[y * q_count + x] > largest)
                            largest = m[y * q_count + x];
                out[p * q_count + q] = largest;
            }
    }
}

/* Whether the loop below runs `algorithm` on case t. */
static int offered(const conv_case *t, int algorithm)
{
    if (algorithm == LOCUS_CONV_IMPLICIT_GEMM)
        return has_implicit;
    if (algorithm == LOCUS_CONV_WINOGRAD)
        return t->kernel == 3 && t->stride == 1;
    return 1;
}

static size_t extent(size_t in, size_t kernel, size_t stride, size_t pad)
{
    return (in + 2 * pad - kernel) / stride + 1;
}

static void reference(const conv_case *t, const float *input,
                      const float *filter, double *expected, double *magnitude)
{
    const size_t p_count = extent(t->height, t->kernel, t->stride, t->pad);
    const size_t q_count = extent(t->width, t->kernel, t->stride, t->pad);
    size_t o = 0;
    for (size_t n = 0; n < t->batch; n++)
        for (size_t k = 0; k < t->filters; k++)
            for (size_t p = 0; p < p_count; p++)
                for (size_t q = 0; q < q_count; q++, o++) {
                    double sum = 0.0, mag = 0.0;
                    for (size_t c = 0; c < t->channels; c++)
                        for (size_t r = 0; r < t->kernel; r++)
                            for (size_t s = 0; s < t->kernel; s++) {
                                long h =
                                    (long)(p * t->stride + r) - (long)t->pad;
                                long w =
                                    (long)(q * t->stride + s) - (long)t->pad;
                                if (h < 0 || w < 0 || h >= (long)t->height ||
                                    w >= (long)t->width)
                                    continue;
                                double term =
                                    (double)input[((n * t->channels + c) *
                                                       t->height +
                                                   (size_t)h) *
                                                      t->width +
                                                  (size_t)w] *
                                    (double)filter[((k * t->channels + c) *
                                                        t->kernel +
                                                    r) *
                                                       t->kernel +
                                                   s];
                                sum += term;
                                mag += fabs(term);
                            }
                    expected[o] = sum;
                    magnitude[o] = mag;
                }
}

static void check_case(locus_context *context, locus_device *gpu,
                       const conv_case *t, int all_modes)
{
    if (t->height + 2 * t->pad < t->kernel || t->width + 2 * t->pad < t->kernel)
        return;
    const size_t p_count = extent(t->height, t->kernel, t->stride, t->pad);
    const size_t q_count = extent(t->width, t->kernel, t->stride, t->pad);
    const size_t in_count = t->batch * t->channels * t->height * t->width;
    const size_t f_count = t->filters * t->channels * t->kernel * t->kernel;
    const size_t out_count = t->batch * t->filters * p_count * q_count;
    float *input = malloc(in_count * sizeof(float));
    float *filter = malloc(f_count * sizeof(float));
    float *output = malloc(out_count * sizeof(float));
    double *expected = malloc(out_count * sizeof(double));
    double *magnitude = malloc(out_count * sizeof(double));
    double *tile = malloc(out_count * sizeof(double));
    CHECK(input && filter && output && expected && magnitude && tile, "malloc");
    if (!(input && filter && output && expected && magnitude && tile))
        goto free_host;
    cuda_test_fill(input, in_count);
    cuda_test_fill(filter, f_count);
    reference(t, input, filter, expected, magnitude);
    tile_magnitude(t->batch * t->filters, p_count, q_count, magnitude, tile);
    locus_buffer *bi = cuda_test_buffer(context, input, in_count);
    locus_buffer *bf = cuda_test_buffer(context, filter, f_count);
    const size_t terms = t->channels * t->kernel * t->kernel;
    for (int math = 0; math < (all_modes ? 3 : 1); math++)
        for (int algorithm = 0; algorithm <= LOCUS_CONV_WINOGRAD && bi && bf;
             algorithm++) {
            if (!offered(t, algorithm))
                continue;
            locus_buffer *bo = cuda_test_buffer(context, NULL, out_count);
            if (bo == NULL)
                break;
            locus_conv2d_desc desc;
            locus_conv2d_desc_init(&desc);
            desc.batch = t->batch;
            desc.in_channels = t->channels;
            desc.in_height = t->height;
            desc.in_width = t->width;
            desc.out_channels = t->filters;
            desc.kernel_height = desc.kernel_width = t->kernel;
            desc.stride_h = desc.stride_w = t->stride;
            desc.pad_h = desc.pad_w = t->pad;
            desc.algorithm = (locus_conv_algorithm)algorithm;
            desc.math = (locus_math_mode)math;
            locus_record record;
            locus_record_init(&record);
            locus_status status =
                locus_conv2d(context, gpu, &desc, bi, bf, bo, &record);
            char label[160];
            snprintf(label, sizeof label,
                     "conv N%zu C%zu %zux%zu K%zu %zux%zu stride %zu pad %zu "
                     "%s %s",
                     t->batch, t->channels, t->height, t->width, t->filters,
                     t->kernel, t->kernel, t->stride, t->pad,
                     algorithm_names[algorithm], cuda_test_math_names[math]);
            CHECK(status == LOCUS_SUCCESS, "%s: %s", label, locus_last_error());
            if (status == LOCUS_SUCCESS &&
                cuda_test_read(bo, output, out_count)) {
                /* auto may pick winograd too: the record says what ran. */
                const int winograd = strcmp(record.algorithm, "winograd") == 0;
                const double *scale = winograd ? tile : magnitude;
                double error = 0.0;
                size_t where = 0;
                for (size_t i = 0; i < out_count; i++) {
                    double e =
                        cuda_test_error(output[i], expected[i], scale[i]);
                    if (!(e <= error)) {
                        error = e;
                        where = i;
                    }
                }
                double tolerance =
                    winograd ? winograd_tolerance(terms,
                                                  cuda_test_math_roundoff[math])
                             : cuda_test_tolerance(
                                   terms, cuda_test_math_roundoff[math]);
                CHECK(error <= tolerance,
                      "%s (record: %s, workspace %llu): relative error %.3g "
                      "at output %zu (got %.9g, expected %.9g), tolerance "
                      "%.3g",
                      label, record.algorithm,
                      (unsigned long long)record.workspace_bytes, error, where,
                      (double)output[where], expected[where], tolerance);
                if (algorithm != 0)
                    CHECK(strcmp(record.algorithm,
                                 algorithm_names[algorithm]) == 0,
                          "%s: the record says algorithm \"%s\"", label,
                          record.algorithm);
                if (algorithm == 3)
                    CHECK(record.workspace_bytes == 0,
                          "%s: implicit GEMM reports %llu workspace bytes",
                          label, (unsigned long long)record.workspace_bytes);
                if (winograd)
                    CHECK(record.workspace_bytes > 0,
                          "%s: winograd reports no workspace", label);
                if (algorithm == 1 && t->kernel > 1)
                    CHECK(record.workspace_bytes >=
                              terms * p_count * q_count * sizeof(float),
                          "%s: im2col reports %llu workspace bytes, less "
                          "than one image's columns",
                          label, (unsigned long long)record.workspace_bytes);
                const size_t columns_bytes =
                    t->kernel > 1 || t->stride > 1 || t->pad > 0
                        ? terms * p_count * q_count * sizeof(float)
                        : 0;
                if (t->cuda_splits &&
                    strcmp(DEVICE_TEST_BACKEND, "cuda") == 0 &&
                    math == LOCUS_MATH_FP32 && algorithm <= 1) {
                    CHECK(strcmp(record.algorithm, "im2col") == 0,
                          "%s: auto ran %s, not im2col with k split", label,
                          record.algorithm);
                    CHECK(record.workspace_bytes > columns_bytes,
                          "%s: %llu workspace bytes, none past the %zu of "
                          "the columns for the split's partial products",
                          label, (unsigned long long)record.workspace_bytes,
                          columns_bytes);
                }
                double *worst_here = winograd ? worst_winograd : worst;
                if (!(error <= worst_here[math]))
                    worst_here[math] = error;
            }
            locus_buffer_destroy(bo);
        }
    locus_buffer_destroy(bi);
    locus_buffer_destroy(bf);
free_host:
    free(input);
    free(filter);
    free(output);
    free(expected);
    free(magnitude);
    free(tile);
}

/* Whether the implicit GEMM is offered: always on CUDA; on OpenCL with
 * the GPU kernels, which LOCUS_OPENCL_TUNING forces (the
 * opencl_*_gpu_kernels tests) and GPU devices otherwise get. */
static int implicit_offered(locus_device *gpu)
{
    if (DEVICE_TEST_HAS_IMPLICIT_CONV)
        return 1;
    const char *tuning = getenv("LOCUS_OPENCL_TUNING");
    if (tuning != NULL && tuning[0] != '\0')
        return strcmp(tuning, "gpu") == 0;
    locus_device_info info;
    locus_device_info_init(&info);
    return locus_device_get_info(gpu, &info) == LOCUS_SUCCESS &&
           info.kind == LOCUS_DEVICE_GPU;
}

/* Runs desc on buffers of `elements` floats (at most 25) and checks that
 * it is refused with LOCUS_ERROR_NOT_SUPPORTED and, where `word` is not
 * NULL, a message naming it; `what` labels the failure. */
static void check_refused(locus_context *context, locus_device *gpu,
                          const locus_conv2d_desc *desc, size_t elements,
                          const char *word, const char *what)
{
    float x[25] = {0};
    locus_buffer *bi = cuda_test_buffer(context, x, elements);
    locus_buffer *bf = cuda_test_buffer(context, x, elements);
    locus_buffer *bo = cuda_test_buffer(context, NULL, elements);
    locus_status status =
        bi && bf && bo ? locus_conv2d(context, gpu, desc, bi, bf, bo, NULL)
                       : LOCUS_ERROR_OUT_OF_MEMORY;
    CHECK(status == LOCUS_ERROR_NOT_SUPPORTED &&
              (word == NULL || strstr(locus_last_error(), word) != NULL),
          "%s on " DEVICE_TEST_BACKEND ": %s (%s)", what,
          locus_status_name(status), locus_last_error());
    locus_buffer_destroy(bi);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bo);
}

/* A shape past the implicit GEMM's 32-bit indexing, in tiny buffers: one
 * pixel padded by 2^31 rows above and below, strided past all but the
 * first output row (the padded height plus the kernel passes 2^31). */
static void check_implicit_too_large(locus_context *context, locus_device *gpu)
{
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = desc.in_channels = desc.out_channels = 1;
    desc.in_height = desc.in_width = 1;
    desc.kernel_height = desc.kernel_width = 1;
    desc.pad_h = (size_t)1 << 31;
    desc.stride_h = (size_t)1 << 33;
    desc.algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    size_t out_h = 0, out_w = 0;
    CHECK(locus_conv2d_output_shape(&desc, &out_h, &out_w) == LOCUS_SUCCESS &&
              out_h == 1 && out_w == 1,
          "the too-large implicit case has output %zu x %zu", out_h, out_w);
    check_refused(context, gpu, &desc, 1, "2^31",
                  "implicit conv with 2^32 rows of padding");
}

/* Where the algorithm is not offered, asking for it says so. */
static void check_implicit_refused(locus_context *context, locus_device *gpu)
{
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = desc.in_channels = desc.out_channels = 1;
    desc.in_height = desc.in_width = 3;
    desc.kernel_height = desc.kernel_width = 1;
    desc.algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    check_refused(context, gpu, &desc, 9, NULL, "implicit conv");
}

/* A conv2d asking for winograd that must be refused; `why` names it. */
static void check_winograd_refused(locus_context *context, locus_device *gpu,
                                   size_t kernel_h, size_t kernel_w,
                                   size_t stride, const char *why)
{
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = desc.in_channels = desc.out_channels = 1;
    desc.in_height = desc.in_width = 5;
    desc.kernel_height = kernel_h;
    desc.kernel_width = kernel_w;
    desc.stride_h = desc.stride_w = stride;
    desc.algorithm = LOCUS_CONV_WINOGRAD;
    char what[64];
    snprintf(what, sizeof what, "winograd conv, %s,", why);
    check_refused(context, gpu, &desc, 25, "winograd", what);
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = device_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    has_implicit = implicit_offered(gpu);
    printf("implicit GEMM %s\n", has_implicit ? "offered" : "not offered");
    static const size_t kernels[] = {1, 3, 5, 7};
    static const size_t strides[] = {1, 2};
    static const size_t pads[] = {0, 1, 3};
    static const size_t batches[] = {1, 3};
    for (size_t b = 0; b < 2; b++)
        for (size_t k = 0; k < 4; k++)
            for (size_t s = 0; s < 2; s++)
                for (size_t p = 0; p < 3; p++) {
                    conv_case t = {batches[b], 3,          11,      13, 5,
                                   kernels[k], strides[s], pads[p], 0};
                    check_case(context, gpu, &t, kernels[k] == 3);
                }
    /* Vector paths (sizes multiples of 4) and a real channel count; more
     * than 64 filters (the GPU kernels' 128-row tiles, 64-row ones below),
     * depths and positions off the tiles. 130 -> 100 at 9x7: a depth of
     * 1170 on a grid of two blocks, which CUDA's FP32 implicit GEMM splits
     * in two halves of k adding into the output (conv.cu, conv_k_splits).
     * Then padding 2, so Winograd's 4x4 input tiles reach past the
     * padding and its output tiles are cut at the far edge (P 11). The last
     * two are one image of few tiles and a deep k, as ResNet-50's 7x7
     * layers at batch 1, which CUDA's im2col GEMM splits along k (8 and 4
     * chunks, summed in order): a 3x3 stride-2 layer and a 1x1 one. */
    const conv_case larger[] = {
        {2, 32, 28, 28, 64, 3, 1, 1, 0}, {2, 16, 8, 8, 32, 1, 1, 0, 0},
        {3, 8, 32, 32, 16, 7, 2, 3, 0},  {2, 19, 10, 9, 130, 3, 1, 1, 0},
        {2, 5, 17, 15, 96, 5, 2, 2, 0},  {1, 8, 12, 12, 65, 1, 1, 0, 0},
        {2, 130, 9, 7, 100, 3, 1, 1, 0}, {3, 4, 9, 10, 6, 3, 1, 2, 0},
        {1, 256, 7, 7, 160, 3, 2, 1, 1}, {1, 512, 7, 7, 130, 1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof larger / sizeof larger[0]; i++)
        check_case(context, gpu, &larger[i], 1);
    if (has_implicit)
        check_implicit_too_large(context, gpu);
    else
        check_implicit_refused(context, gpu);
    check_winograd_refused(context, gpu, 5, 5, 1, "5x5 filter");
    check_winograd_refused(context, gpu, 3, 3, 2, "stride 2");
    check_winograd_refused(context, gpu, 3, 1, 1, "3x1 filter");
    for (int math = 0; math < 3; math++)
        printf("conv2d %s: worst relative error vs float64 %.3g; winograd "
               "%.3g (relative to its tile's terms)\n",
               cuda_test_math_names[math], worst[math], worst_winograd[math]);
    locus_context_destroy(context);
    return cuda_test_finish("test_" DEVICE_TEST_BACKEND "_conv");
}
