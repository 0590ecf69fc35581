/* The CUDA conv2d_layer's own paths (backends/cuda/cuda_conv_layer.c), on
 * shapes larger than test_device_conv_layer.c's random ones, so that every
 * path and its tiling is taken: the strip depthwise kernel (3x3,
 * multiplier 1, strides 1 and 2, one and several strips a plane), the
 * shared-memory depthwise kernel over several tiles of a plane (strides,
 * dilation, multipliers, an NHWC output, TensorFlow's asymmetric padding),
 * the NHWC depthwise kernel, the direct fallback where the depthwise patch
 * passes shared memory and for groups of few filters, the 1x1 layers as a
 * plain GEMM in all four layout pairs and with groups, grouped im2col in all
 * four layout pairs, im2col by name on a
 * depthwise layer, dense NCHW layers with only a bias or activation through
 * 0.2's kernels (the implicit GEMM, im2col) and the pass after them, and tf32
 * on the GEMM paths. Each case checks the record's
 * algorithm (the path auto took) and every output against a long double
 * sum from the definition within 2 (C/G R S + 2) u sum |terms| (u of the
 * dtype, or of tf32's 10-bit mantissa with LOCUS_MATH_TF32), in f32 and
 * f64, the output poisoned with NaN first. Skips (77) without a CUDA
 * device. */
#include <string.h>

#include "cuda_test.h"

typedef struct layer_case {
    const char *name;
    size_t n, c, h, w, k, r, s, g;
    size_t sh, sw, pt, pl, pb, pr, dh, dw;
    int bias;
    locus_activation act;
    locus_tensor_layout in, out;
    locus_conv_algorithm algorithm;
    const char *expect; /* the record's algorithm */
} layer_case;

#define NCHW LOCUS_LAYOUT_NCHW
#define NHWC LOCUS_LAYOUT_NHWC
#define AUTO LOCUS_CONV_AUTO
#define IM2COL LOCUS_CONV_IM2COL
#define RELU LOCUS_ACTIVATION_RELU
#define RELU6 LOCUS_ACTIVATION_RELU6
#define NONE LOCUS_ACTIVATION_NONE

/* name, n c h w, k r s g, sh sw, pt pl pb pr, dh dw, bias act, layouts,
 * algorithm, expected path */
static const layer_case cases[] = {
    {"depthwise 3x3 tiles",
     2,
     32,
     40,
     40,
     32,
     3,
     3,
     32,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     RELU6,
     NCHW,
     NCHW,
     AUTO,
     "depthwise"},
    {"depthwise 5x5 s2 m2 dil",
     1,
     8,
     37,
     45,
     16,
     5,
     5,
     8,
     2,
     2,
     2,
     1,
     3,
     2,
     2,
     1,
     1,
     RELU,
     NCHW,
     NCHW,
     AUTO,
     "depthwise"},
    {"depthwise narrow",
     3,
     16,
     7,
     9,
     16,
     3,
     3,
     16,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     0,
     NONE,
     NCHW,
     NCHW,
     AUTO,
     "depthwise"},
    /* The strip kernel (3x3, multiplier 1, no dilation, stride 1 or 2):
     * the first above (40 rows: strips of 8) and the narrow one (7 rows:
     * one strip); here stride 2 with TensorFlow's asymmetric "same"
     * padding, 18 rows (strips of 8, 8 and 2), an NHWC output, and
     * stride 2 on a plane of 7 rows. */
    {"depthwise 3x3 s2 asym strips",
     2,
     24,
     37,
     35,
     24,
     3,
     3,
     24,
     2,
     2,
     0,
     1,
     1,
     0,
     1,
     1,
     1,
     RELU6,
     NCHW,
     NHWC,
     AUTO,
     "depthwise"},
    {"depthwise 3x3 s2 small",
     3,
     20,
     14,
     13,
     20,
     3,
     3,
     20,
     2,
     2,
     1,
     1,
     1,
     1,
     1,
     1,
     0,
     NONE,
     NCHW,
     NCHW,
     AUTO,
     "depthwise"},
    {"depthwise nchw->nhwc",
     2,
     12,
     20,
     33,
     24,
     3,
     3,
     12,
     1,
     2,
     0,
     1,
     2,
     1,
     1,
     1,
     1,
     RELU,
     NCHW,
     NHWC,
     AUTO,
     "depthwise"},
    {"depthwise nhwc",
     2,
     24,
     17,
     19,
     24,
     3,
     3,
     24,
     2,
     1,
     1,
     1,
     1,
     1,
     1,
     2,
     1,
     RELU6,
     NHWC,
     NHWC,
     AUTO,
     "depthwise"},
    {"depthwise nhwc->nchw m3",
     1,
     5,
     15,
     16,
     15,
     3,
     2,
     5,
     1,
     1,
     1,
     0,
     1,
     1,
     1,
     1,
     1,
     NONE,
     NHWC,
     NCHW,
     AUTO,
     "depthwise"},
    {"depthwise patch past shared",
     1,
     4,
     130,
     130,
     4,
     3,
     3,
     4,
     1,
     1,
     0,
     0,
     0,
     0,
     60,
     60,
     1,
     RELU,
     NCHW,
     NCHW,
     AUTO,
     "direct"},
    {"grouped few filters",
     2,
     16,
     14,
     15,
     16,
     3,
     3,
     8,
     1,
     1,
     1,
     1,
     0,
     2,
     1,
     1,
     1,
     RELU,
     NCHW,
     NHWC,
     AUTO,
     "direct"},
    {"1x1 nchw", 2, 64, 20, 21, 48, 1,    1,    1,    1,    1,       0,
     0,          0, 0,  1,  1,  1,  RELU, NCHW, NCHW, AUTO, "im2col"},
    {"1x1 nhwc", 2, 64, 20, 21, 48, 1,     1,    1,    1,    1,       0,
     0,          0, 0,  1,  1,  1,  RELU6, NHWC, NHWC, AUTO, "im2col"},
    {"1x1 nhwc->nchw",
     1,
     40,
     13,
     11,
     72,
     1,
     1,
     1,
     1,
     1,
     0,
     0,
     0,
     0,
     1,
     1,
     1,
     NONE,
     NHWC,
     NCHW,
     AUTO,
     "im2col"},
    {"1x1 nchw->nhwc",
     1,
     40,
     13,
     11,
     72,
     1,
     1,
     1,
     1,
     1,
     0,
     0,
     0,
     0,
     1,
     1,
     0,
     RELU,
     NCHW,
     NHWC,
     AUTO,
     "im2col"},
    {"1x1 groups",
     2,
     32,
     12,
     12,
     64,
     1,
     1,
     2,
     1,
     1,
     0,
     0,
     0,
     0,
     1,
     1,
     1,
     RELU,
     NCHW,
     NCHW,
     AUTO,
     "im2col"},
    {"1x1 groups nhwc",
     2,
     32,
     12,
     12,
     64,
     1,
     1,
     4,
     1,
     1,
     0,
     0,
     0,
     0,
     1,
     1,
     1,
     NONE,
     NHWC,
     NHWC,
     AUTO,
     "im2col"},
    {"3x3 dense bias relu",
     2,
     8,
     20,
     22,
     24,
     3,
     3,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     RELU,
     NCHW,
     NCHW,
     AUTO,
     "implicit"},
    /* Two images: one alone has a single tile and a depth of 300, which
     * auto runs as im2col with its k split (cuda_conv.c). */
    {"5x5 s2 dense relu6",
     2,
     12,
     23,
     21,
     16,
     5,
     5,
     1,
     2,
     2,
     2,
     2,
     2,
     2,
     1,
     1,
     0,
     RELU6,
     NCHW,
     NCHW,
     AUTO,
     "implicit"},
    {"3x3 dense by im2col",
     2,
     8,
     20,
     22,
     24,
     3,
     3,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     RELU,
     NCHW,
     NCHW,
     IM2COL,
     "im2col"},
    {"3x3 dilated asym",
     2,
     16,
     24,
     26,
     24,
     3,
     3,
     1,
     1,
     1,
     2,
     1,
     1,
     2,
     2,
     2,
     1,
     RELU,
     NCHW,
     NCHW,
     AUTO,
     "im2col"},
    {"3x3 nhwc", 2, 16, 24, 26, 24, 3,     3,    1,    1,    1,       1,
     1,          1, 1,  1,  1,  1,  RELU6, NHWC, NHWC, AUTO, "im2col"},
    {"3x3 s2 nhwc->nchw",
     2,
     16,
     25,
     24,
     40,
     3,
     3,
     1,
     2,
     2,
     1,
     0,
     1,
     1,
     1,
     1,
     0,
     RELU,
     NHWC,
     NCHW,
     AUTO,
     "im2col"},
    {"5x3 nchw->nhwc",
     1,
     12,
     21,
     18,
     36,
     5,
     3,
     1,
     1,
     2,
     2,
     1,
     2,
     1,
     1,
     1,
     1,
     NONE,
     NCHW,
     NHWC,
     AUTO,
     "im2col"},
    {"grouped 3x3",
     2,
     32,
     16,
     18,
     64,
     3,
     3,
     4,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     RELU,
     NCHW,
     NCHW,
     AUTO,
     "im2col"},
    {"grouped 3x3 nhwc",
     2,
     32,
     16,
     18,
     64,
     3,
     3,
     4,
     2,
     1,
     1,
     0,
     1,
     1,
     1,
     2,
     1,
     NONE,
     NHWC,
     NHWC,
     AUTO,
     "im2col"},
    {"depthwise by im2col",
     2,
     16,
     18,
     19,
     32,
     3,
     3,
     16,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     RELU6,
     NCHW,
     NHWC,
     IM2COL,
     "im2col"},
    {"depthwise nhwc by im2col",
     1,
     16,
     18,
     19,
     16,
     3,
     3,
     16,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     1,
     RELU,
     NHWC,
     NCHW,
     IM2COL,
     "im2col"},
};

static size_t out_extent(size_t in, size_t lo, size_t hi, size_t r, size_t d,
                         size_t stride)
{
    return (in + lo + hi - ((r - 1) * d + 1)) / stride + 1;
}

static void describe(const layer_case *lc, locus_dtype dtype,
                     locus_math_mode math, locus_conv2d_desc *d)
{
    locus_conv2d_desc_init(d);
    d->dtype = dtype;
    d->math = math;
    d->batch = lc->n;
    d->in_channels = lc->c;
    d->in_height = lc->h;
    d->in_width = lc->w;
    d->out_channels = lc->k;
    d->kernel_height = lc->r;
    d->kernel_width = lc->s;
    d->groups = lc->g;
    d->stride_h = lc->sh;
    d->stride_w = lc->sw;
    d->pad_h = lc->pt;
    d->pad_w = lc->pl;
    d->pad_bottom = lc->pb;
    d->pad_right = lc->pr;
    d->dilation_h = lc->dh;
    d->dilation_w = lc->dw;
    d->activation = lc->act;
    d->input_layout = lc->in;
    d->output_layout = lc->out;
    d->algorithm = lc->algorithm;
}

/* Output (n, k, p, q) from the definition, with sum |terms|. */
static long double reference(const layer_case *lc, const double *in,
                             const double *f, const double *bias, size_t n,
                             size_t k, size_t p, size_t q, long double *mag)
{
    const size_t cg = lc->c / lc->g, g = k / (lc->k / lc->g);
    long double sum = 0.0L, m = 0.0L;
    for (size_t c = 0; c < cg; c++)
        for (size_t r = 0; r < lc->r; r++)
            for (size_t s = 0; s < lc->s; s++) {
                long long y =
                    (long long)(p * lc->sh + r * lc->dh) - (long long)lc->pt;
                long long x =
                    (long long)(q * lc->sw + s * lc->dw) - (long long)lc->pl;
                if (y < 0 || x < 0 || y >= (long long)lc->h ||
                    x >= (long long)lc->w)
                    continue;
                const size_t iy = (size_t)y, ix = (size_t)x, ci = g * cg + c;
                const double xv =
                    lc->in == NHWC
                        ? in[((n * lc->h + iy) * lc->w + ix) * lc->c + ci]
                        : in[((n * lc->c + ci) * lc->h + iy) * lc->w + ix];
                const double fv =
                    lc->in == NHWC ? f[((k * lc->r + r) * lc->s + s) * cg + c]
                                   : f[((k * cg + c) * lc->r + r) * lc->s + s];
                const long double t = (long double)xv * fv;
                sum += t;
                m += fabsl(t);
            }
    if (bias) {
        sum += bias[k];
        m += fabsl((long double)bias[k]);
    }
    if (lc->act != NONE && sum < 0)
        sum = 0;
    if (lc->act == RELU6 && sum > 6)
        sum = 6;
    *mag = m;
    return sum;
}

static locus_buffer *upload(locus_context *ctx, const double *x, size_t count,
                            locus_dtype dtype)
{
    const size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    void *bytes = malloc(count * elem);
    locus_buffer *buf = NULL;
    if (!bytes)
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)bytes)[i] = x[i];
        else
            ((float *)bytes)[i] = (float)x[i];
    locus_status status = locus_buffer_create(ctx, count * elem, NULL, &buf);
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_write(buf, 0, bytes, count * elem);
    free(bytes);
    if (status != LOCUS_SUCCESS) {
        locus_buffer_destroy(buf);
        return NULL;
    }
    return buf;
}

/* Values in [-1, 1), exact in f32 (the reference sums what the GPU sees). */
static double *random_values(size_t count)
{
    double *x = malloc((count ? count : 1) * sizeof *x);
    if (x)
        for (size_t i = 0; i < count; i++)
            x[i] = cuda_test_random();
    return x;
}

static void run_case(locus_context *ctx, locus_device *gpu,
                     const layer_case *lc, locus_dtype dtype,
                     locus_math_mode math)
{
    const size_t p = out_extent(lc->h, lc->pt, lc->pb, lc->r, lc->dh, lc->sh);
    const size_t q = out_extent(lc->w, lc->pl, lc->pr, lc->s, lc->dw, lc->sw);
    const size_t in_count = lc->n * lc->c * lc->h * lc->w;
    const size_t f_count = lc->k * (lc->c / lc->g) * lc->r * lc->s;
    const size_t out_count = lc->n * lc->k * p * q;
    const size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    double *in = random_values(in_count), *f = random_values(f_count);
    double *bias = lc->bias ? random_values(lc->k) : NULL;
    void *out = malloc(out_count * elem);
    locus_buffer *bin = NULL, *bf = NULL, *bb = NULL, *bout = NULL;
    const char *what = dtype == LOCUS_DTYPE_F64  ? "f64"
                       : math == LOCUS_MATH_TF32 ? "f32 tf32"
                                                 : "f32";
    if (!in || !f || !out || (lc->bias && !bias)) {
        CHECK(0, "out of host memory");
        goto release;
    }
    for (size_t i = 0; i < out_count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)out)[i] = NAN;
        else
            ((float *)out)[i] = NAN;
    bin = upload(ctx, in, in_count, dtype);
    bf = upload(ctx, f, f_count, dtype);
    bb = bias ? upload(ctx, bias, lc->k, dtype) : NULL;
    locus_status status =
        locus_buffer_create(ctx, out_count * elem, NULL, &bout);
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_write(bout, 0, out, out_count * elem);
    if (!bin || !bf || (lc->bias && !bb) || status != LOCUS_SUCCESS) {
        CHECK(0, "%s: setup failed: %s", lc->name, locus_last_error());
        goto release;
    }
    locus_conv2d_desc d;
    describe(lc, dtype, math, &d);
    locus_record record;
    locus_record_init(&record);
    status = locus_conv2d_layer(ctx, gpu, &d, bin, bf, bb, bout, &record);
    CHECK(status == LOCUS_SUCCESS, "%s %s: %s", lc->name, what,
          locus_last_error());
    if (status != LOCUS_SUCCESS)
        goto release;
    /* 0.2's kernels are f32's: an f64 dense layer runs im2col. */
    const char *expect =
        dtype == LOCUS_DTYPE_F64 && strcmp(lc->expect, "implicit") == 0
            ? "im2col"
            : lc->expect;
    CHECK(strcmp(record.algorithm, expect) == 0, "%s %s: ran %s, expected %s",
          lc->name, what, record.algorithm, expect);
    status = locus_buffer_read(bout, 0, out, out_count * elem);
    CHECK(status == LOCUS_SUCCESS, "read: %s", locus_last_error());
    const double u = dtype == LOCUS_DTYPE_F64  ? 0x1p-53
                     : math == LOCUS_MATH_TF32 ? 0x1p-11
                                               : 0x1p-24;
    const double terms = (double)((lc->c / lc->g) * lc->r * lc->s + 2);
    for (size_t n = 0; n < lc->n; n++)
        for (size_t k = 0; k < lc->k; k++)
            for (size_t y = 0; y < p; y++)
                for (size_t x = 0; x < q; x++) {
                    long double mag;
                    const long double ref =
                        reference(lc, in, f, bias, n, k, y, x, &mag);
                    const size_t o = lc->out == NHWC
                                         ? ((n * p + y) * q + x) * lc->k + k
                                         : ((n * lc->k + k) * p + y) * q + x;
                    const double got = dtype == LOCUS_DTYPE_F64
                                           ? ((double *)out)[o]
                                           : ((float *)out)[o];
                    const int ok = fabs(got - (double)ref) <=
                                   2.0 * terms * u * (double)mag;
                    CHECK(ok,
                          "%s %s (%s): output (%zu,%zu,%zu,%zu) %.17g, "
                          "expected %.17Lg",
                          lc->name, what, record.algorithm, n, k, y, x, got,
                          ref);
                    if (!ok)
                        goto release;
                }
release:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bout);
    free(in);
    free(f);
    free(bias);
    free(out);
}

int main(void)
{
    locus_context *ctx = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = cuda_test_open(&ctx, &gpu, &cpu);
    if (opened != 0)
        return opened;
    const size_t count = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < count; i++) {
        run_case(ctx, gpu, &cases[i], LOCUS_DTYPE_F32, LOCUS_MATH_FP32);
        run_case(ctx, gpu, &cases[i], LOCUS_DTYPE_F64, LOCUS_MATH_FP32);
        /* tf32 reaches the GEMM paths only; the others stay FP32. */
        if (strcmp(cases[i].expect, "im2col") == 0 ||
            strcmp(cases[i].expect, "implicit") == 0)
            run_case(ctx, gpu, &cases[i], LOCUS_DTYPE_F32, LOCUS_MATH_TF32);
    }
    printf("%zu layer cases\n", count);
    locus_context_destroy(ctx);
    return cuda_test_finish("cuda_conv_layer");
}
