/* locus_conv2d_layer (the features of 0.3) on every device of the backend
 * under test (device_test.h): random shapes covering groups (depthwise,
 * with multipliers 1-3), dilation 1-3, strides 1-3, each pad 0-2 on each
 * side, bias on and off, each activation, the four input/output layout
 * combinations and odd sizes, in f32 and f64 (f64 skipped, saying so, on a
 * device that does not offer it), auto and im2col, the output poisoned
 * with NaN before each run, against a long double sum written from the
 * definition with the CPU test's bound (tests/cpu/test_cpu_conv_layer.c):
 * 2 (C/G R S + 2) u sum |terms|. Also: an input with NaN and infinities
 * gives what IEEE arithmetic gives (NaN where a NaN or inf - inf meets the
 * window, the infinity's sign elsewhere), and MEC, the implicit GEMM and
 * Winograd asked for by name with a feature are LOCUS_ERROR_NOT_SUPPORTED
 * with the feature named. */
#include <string.h>

#include "device_test.h"

typedef struct layer_case {
    size_t n, c, h, w, k, r, s, g;
    size_t sh, sw, pt, pl, pb, pr, dh, dw;
    int bias;
    locus_activation act;
    locus_tensor_layout in_layout, out_layout;
    size_t p, q; /* the output's, from the definition */
} layer_case;

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t rng_range(size_t lo, size_t hi)
{
    return lo + (size_t)(rng_next() % (hi - lo + 1));
}

static double rng_uniform(void)
{
    return (double)(rng_next() >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static size_t span(size_t taps, size_t dilation)
{
    return (taps - 1) * dilation + 1;
}

/* Case i of a run: layouts i % 4, activation i % 3, every fifth one
 * depthwise with a multiplier of 2; the rest random. The dilated kernel
 * fits its padded image. */
static layer_case random_case(int i)
{
    for (;;) {
        layer_case lc = {0};
        size_t kind = i % 5 == 4 ? 4 : rng_range(0, 3);
        lc.g = kind == 0 ? 1 : rng_range(2, 4);
        size_t cg = kind >= 3 ? 1 : rng_range(1, 4);
        lc.c = lc.g * cg;
        lc.k = lc.g * (kind == 4 ? 2 : rng_range(1, 3));
        lc.n = rng_range(1, 2);
        lc.h = rng_range(1, 11);
        lc.w = rng_range(1, 13);
        lc.r = rng_range(1, 4);
        lc.s = rng_range(1, 4);
        lc.sh = rng_range(1, 3);
        lc.sw = rng_range(1, 3);
        lc.dh = rng_range(1, 3);
        lc.dw = rng_range(1, 3);
        lc.pt = rng_range(0, 2);
        lc.pl = rng_range(0, 2);
        lc.pb = rng_range(0, 2);
        lc.pr = rng_range(0, 2);
        lc.bias = (int)rng_range(0, 1);
        lc.act = (locus_activation)(i % 3);
        lc.in_layout = (locus_tensor_layout)(i % 2);
        lc.out_layout = (locus_tensor_layout)(i / 2 % 2);
        size_t ph = lc.h + lc.pt + lc.pb, pw = lc.w + lc.pl + lc.pr;
        if (span(lc.r, lc.dh) > ph || span(lc.s, lc.dw) > pw)
            continue;
        lc.p = (ph - span(lc.r, lc.dh)) / lc.sh + 1;
        lc.q = (pw - span(lc.s, lc.dw)) / lc.sw + 1;
        return lc;
    }
}

static void describe(const layer_case *lc, locus_dtype dtype,
                     locus_conv_algorithm algorithm, locus_conv2d_desc *d)
{
    locus_conv2d_desc_init(d);
    d->dtype = dtype;
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
    d->input_layout = lc->in_layout;
    d->output_layout = lc->out_layout;
    d->algorithm = algorithm;
}

/* Output (n, k, p, q) from the definition, in long double, with
 * sum |terms| for its error bound; data in doubles (f32 values exactly). */
static long double reference(const layer_case *lc, const double *in,
                             const double *f, const double *bias, size_t n,
                             size_t k, size_t p, size_t q, long double *mag)
{
    size_t cg = lc->c / lc->g, g = k / (lc->k / lc->g);
    long double sum = 0.0L, m = 0.0L;
    for (size_t c = 0; c < cg; c++) {
        size_t ci = g * cg + c;
        for (size_t r = 0; r < lc->r; r++)
            for (size_t s = 0; s < lc->s; s++) {
                long long y =
                    (long long)(p * lc->sh + r * lc->dh) - (long long)lc->pt;
                long long x =
                    (long long)(q * lc->sw + s * lc->dw) - (long long)lc->pl;
                if (y < 0 || x < 0 || y >= (long long)lc->h ||
                    x >= (long long)lc->w)
                    continue;
                size_t iy = (size_t)y, ix = (size_t)x;
                double xv =
                    lc->in_layout == LOCUS_LAYOUT_NHWC
                        ? in[((n * lc->h + iy) * lc->w + ix) * lc->c + ci]
                        : in[((n * lc->c + ci) * lc->h + iy) * lc->w + ix];
                double fv = lc->in_layout == LOCUS_LAYOUT_NHWC
                                ? f[((k * lc->r + r) * lc->s + s) * cg + c]
                                : f[((k * cg + c) * lc->r + r) * lc->s + s];
                long double t = (long double)xv * fv;
                sum += t;
                m += fabsl(t);
            }
    }
    if (bias) {
        sum += bias[k];
        m += fabsl((long double)bias[k]);
    }
    /* Comparisons leave NaN as it is, as locus.h's relu and relu6. */
    if (lc->act != LOCUS_ACTIVATION_NONE && sum < 0)
        sum = 0;
    if (lc->act == LOCUS_ACTIVATION_RELU6 && sum > 6)
        sum = 6;
    *mag = m;
    return sum;
}

static locus_buffer *upload(locus_context *ctx, const double *x, size_t count,
                            locus_dtype dtype)
{
    size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
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
    CHECK(status == LOCUS_SUCCESS, "buffer of %zu elements: %s", count,
          locus_last_error());
    free(bytes);
    return buf;
}

/* Random values, rounded to f32 when the case runs in f32, so that the
 * reference sums the very inputs the kernels see. */
static double *random_values(size_t count, locus_dtype dtype)
{
    double *x = malloc(count * sizeof *x);
    if (x)
        for (size_t i = 0; i < count; i++) {
            x[i] = rng_uniform();
            if (dtype == LOCUS_DTYPE_F32)
                x[i] = (float)x[i];
        }
    return x;
}

/* got against the reference: NaN where it is NaN, the same infinity where
 * it is one, else within the bound. */
static int output_ok(double got, long double ref, long double mag, double terms,
                     double u)
{
    if (isnan(ref))
        return isnan(got);
    if (isinf(ref))
        return (long double)got == ref;
    return fabs(got - (double)ref) <= 2.0 * terms * u * (double)mag;
}

/* The record's algorithm of each run (the OpenCL backend's kernels). */
static int saw_direct, saw_depthwise, saw_im2col, outputs_checked;

/* Runs one case; special: one NaN, one +inf and one -inf in the input. */
static void run_case(locus_context *ctx, locus_device *dev, const char *name,
                     const layer_case *lc, locus_dtype dtype,
                     locus_conv_algorithm algorithm, int special)
{
    size_t in_count = lc->n * lc->c * lc->h * lc->w;
    size_t f_count = lc->k * (lc->c / lc->g) * lc->r * lc->s;
    size_t out_count = lc->n * lc->k * lc->p * lc->q;
    size_t elem = dtype == LOCUS_DTYPE_F64 ? 8 : 4;
    double *in = random_values(in_count, dtype);
    double *f = random_values(f_count, dtype);
    double *bias = lc->bias ? random_values(lc->k, dtype) : NULL;
    void *out = malloc(out_count * elem);
    locus_buffer *bin = NULL, *bf = NULL, *bb = NULL, *bout = NULL;
    if (!in || !f || !out || (lc->bias && !bias)) {
        CHECK(0, "out of host memory");
        goto release;
    }
    if (special && in_count >= 3) {
        in[in_count / 3] = NAN;
        in[in_count / 2] = INFINITY;
        in[in_count - 1] = -INFINITY;
    }
    bin = upload(ctx, in, in_count, dtype);
    bf = upload(ctx, f, f_count, dtype);
    bb = bias ? upload(ctx, bias, lc->k, dtype) : NULL;
    /* Poisoned: an output the kernels leave unwritten fails. */
    for (size_t i = 0; i < out_count; i++)
        if (dtype == LOCUS_DTYPE_F64)
            ((double *)out)[i] = NAN;
        else
            ((float *)out)[i] = NAN;
    locus_status status =
        locus_buffer_create(ctx, out_count * elem, NULL, &bout);
    if (status == LOCUS_SUCCESS)
        status = locus_buffer_write(bout, 0, out, out_count * elem);
    if (!bin || !bf || (lc->bias && !bb) || status != LOCUS_SUCCESS) {
        CHECK(0, "setup failed: %s", locus_last_error());
        goto release;
    }
    locus_conv2d_desc d;
    describe(lc, dtype, algorithm, &d);
    locus_record record;
    locus_record_init(&record);
    status = locus_conv2d_layer(ctx, dev, &d, bin, bf, bb, bout, &record);
    CHECK(status == LOCUS_SUCCESS, "%s %s %s: %s", name, locus_dtype_str(dtype),
          locus_conv_algorithm_str(algorithm), locus_last_error());
    if (status != LOCUS_SUCCESS)
        goto release;
    saw_direct |= strcmp(record.algorithm, "direct") == 0;
    saw_depthwise |= strcmp(record.algorithm, "depthwise") == 0;
    saw_im2col |= strcmp(record.algorithm, "im2col") == 0;
    status = locus_buffer_read(bout, 0, out, out_count * elem);
    CHECK(status == LOCUS_SUCCESS, "read: %s", locus_last_error());
    double u = dtype == LOCUS_DTYPE_F64 ? 0x1p-53 : 0x1p-24;
    double terms = (double)((lc->c / lc->g) * lc->r * lc->s + 2);
    for (size_t n = 0; n < lc->n; n++)
        for (size_t k = 0; k < lc->k; k++)
            for (size_t p = 0; p < lc->p; p++)
                for (size_t q = 0; q < lc->q; q++) {
                    long double mag;
                    long double ref =
                        reference(lc, in, f, bias, n, k, p, q, &mag);
                    size_t o = lc->out_layout == LOCUS_LAYOUT_NHWC
                                   ? ((n * lc->p + p) * lc->q + q) * lc->k + k
                                   : ((n * lc->k + k) * lc->p + p) * lc->q + q;
                    double got = dtype == LOCUS_DTYPE_F64 ? ((double *)out)[o]
                                                          : ((float *)out)[o];
                    outputs_checked++;
                    const int ok = output_ok(got, ref, mag, terms, u);
                    CHECK(ok,
                          "%s %s %s (%s)%s: n%zu c%zu %zux%zu k%zu %zux%zu "
                          "g%zu stride %zux%zu pad %zu,%zu,%zu,%zu dilation "
                          "%zux%zu bias %d act %d layouts %d/%d: output "
                          "(%zu,%zu,%zu,%zu) %.17g, expected %.17Lg",
                          name, locus_dtype_str(dtype),
                          locus_conv_algorithm_str(algorithm), record.algorithm,
                          special ? " NaN/inf input" : "", lc->n, lc->c, lc->h,
                          lc->w, lc->k, lc->r, lc->s, lc->g, lc->sh, lc->sw,
                          lc->pt, lc->pl, lc->pb, lc->pr, lc->dh, lc->dw,
                          lc->bias, (int)lc->act, (int)lc->in_layout,
                          (int)lc->out_layout, n, k, p, q, got, ref);
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

/* MEC, implicit and Winograd by name, each with one feature: refused with
 * NOT_SUPPORTED naming it. A 3x3 stride-1 layer, which Winograd would
 * otherwise take. */
static void check_refusals(locus_context *ctx, locus_device *dev,
                           const char *name)
{
    static const locus_conv_algorithm algorithms[] = {
        LOCUS_CONV_MEC, LOCUS_CONV_IMPLICIT_GEMM, LOCUS_CONV_WINOGRAD};
    static const char *const words[] = {"groups", "dilation", "activation",
                                        "nhwc"};
    locus_buffer *in = NULL, *f = NULL, *out = NULL;
    /* 1 x 4 x 6 x 6 in, 4 x 4 x 3 x 3 filter: room for every variant. */
    const size_t bytes = 4 * 6 * 6 * sizeof(float);
    if (locus_buffer_create(ctx, bytes, NULL, &in) != LOCUS_SUCCESS ||
        locus_buffer_create(ctx, 4 * 4 * 9 * sizeof(float), NULL, &f) !=
            LOCUS_SUCCESS ||
        locus_buffer_create(ctx, bytes, NULL, &out) != LOCUS_SUCCESS) {
        CHECK(0, "buffers: %s", locus_last_error());
        goto release;
    }
    float zeros[4 * 6 * 6] = {0};
    locus_buffer_write(in, 0, zeros, bytes);
    locus_buffer_write(f, 0, zeros, 4 * 4 * 9 * sizeof(float));
    for (size_t a = 0; a < 3; a++)
        for (size_t w = 0; w < 4; w++) {
            locus_conv2d_desc d;
            locus_conv2d_desc_init(&d);
            d.batch = 1;
            d.in_channels = d.out_channels = 4;
            d.in_height = d.in_width = 6;
            d.kernel_height = d.kernel_width = 3;
            d.pad_h = d.pad_w = 1;
            d.algorithm = algorithms[a];
            if (w == 0)
                d.groups = 2;
            else if (w == 1)
                d.dilation_h = d.dilation_w = 2, d.pad_h = d.pad_w = 2;
            else if (w == 2)
                d.activation = LOCUS_ACTIVATION_RELU;
            else
                d.input_layout = LOCUS_LAYOUT_NHWC;
            locus_status status =
                locus_conv2d_layer(ctx, dev, &d, in, f, NULL, out, NULL);
            const char *error = locus_last_error();
            CHECK(status == LOCUS_ERROR_NOT_SUPPORTED &&
                      strstr(error, words[w]) != NULL,
                  "%s: %s with %s: status %d, \"%s\"", name,
                  locus_conv_algorithm_str(algorithms[a]), words[w],
                  (int)status, error);
        }
release:
    locus_buffer_destroy(in);
    locus_buffer_destroy(f);
    locus_buffer_destroy(out);
}

static void test_device(locus_context *ctx, locus_device *dev, const char *name)
{
    int f64 = 0;
    if (locus_device_offers(dev, LOCUS_OP_CONV2D, LOCUS_CONV_AUTO,
                            LOCUS_DTYPE_F64, &f64) != LOCUS_SUCCESS)
        f64 = 0;
    if (!f64)
        printf("%s: f64 skipped: the device does not offer conv2d in f64\n",
               name);
    for (int i = 0; i < 24; i++) {
        layer_case lc = random_case(i);
        for (int dt = 0; dt < 1 + f64; dt++) {
            locus_dtype dtype = dt ? LOCUS_DTYPE_F64 : LOCUS_DTYPE_F32;
            run_case(ctx, dev, name, &lc, dtype, LOCUS_CONV_AUTO, 0);
            run_case(ctx, dev, name, &lc, dtype, LOCUS_CONV_IM2COL, 0);
        }
    }
    /* NaN and infinities, a dense and a depthwise layer, relu on the
     * second (NaN stays NaN through it), by auto and by im2col (the GEMM
     * must not drop them). */
    layer_case dense = {.n = 1,
                        .c = 3,
                        .h = 7,
                        .w = 6,
                        .k = 4,
                        .r = 3,
                        .s = 3,
                        .g = 1,
                        .sh = 1,
                        .sw = 1,
                        .pt = 1,
                        .pl = 1,
                        .pb = 1,
                        .pr = 2,
                        .dh = 1,
                        .dw = 1,
                        .bias = 1,
                        .act = LOCUS_ACTIVATION_NONE,
                        .p = 7,
                        .q = 7};
    layer_case depthwise = dense;
    depthwise.g = depthwise.c;
    depthwise.k = 2 * depthwise.c;
    depthwise.act = LOCUS_ACTIVATION_RELU;
    for (int dt = 0; dt < 1 + f64; dt++) {
        locus_dtype dtype = dt ? LOCUS_DTYPE_F64 : LOCUS_DTYPE_F32;
        for (int im2col = 0; im2col < 2; im2col++) {
            locus_conv_algorithm algorithm =
                im2col ? LOCUS_CONV_IM2COL : LOCUS_CONV_AUTO;
            run_case(ctx, dev, name, &dense, dtype, algorithm, 1);
            run_case(ctx, dev, name, &depthwise, dtype, algorithm, 1);
        }
    }
    check_refusals(ctx, dev, name);
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *first = NULL, *cpu = NULL;
    int opened = device_test_open(&context, &first, &cpu);
    if (opened != 0)
        return opened;
    size_t count = 0, tested = 0;
    CHECK(locus_device_count(context, &count) == LOCUS_SUCCESS,
          "locus_device_count: %s", locus_last_error());
    for (size_t i = 0; i < count; i++) {
        locus_device *dev = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get(context, i, &dev) != LOCUS_SUCCESS ||
            locus_device_get_info(dev, &info) != LOCUS_SUCCESS) {
            CHECK(0, "device %zu: %s", i, locus_last_error());
            continue;
        }
        if (strcmp(info.backend, DEVICE_TEST_BACKEND) != 0)
            continue;
        printf("testing %s (%s)\n", info.selector, info.name);
        test_device(context, dev, info.selector);
        tested++;
    }
    CHECK(tested > 0, "no %s device", DEVICE_TEST_BACKEND);
    printf("%d outputs checked on %zu devices\n", outputs_checked, tested);
#if defined(LOCUS_TEST_BACKEND_OPENCL)
    /* Each of the OpenCL backend's layer kernels ran. */
    CHECK(saw_direct && saw_depthwise && saw_im2col,
          "kernels that ran: direct %d, depthwise %d, im2col %d", saw_direct,
          saw_depthwise, saw_im2col);
#endif
    locus_context_destroy(context);
    return cuda_test_finish("conv_layer");
}
