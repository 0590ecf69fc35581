/* GEMM and conv2d with bf16 and f16 inputs and f32 outputs on cuda:0
 * against float64 sums of the same half values (decoded exactly), so the
 * only error left is the f32 accumulation's: odd shapes around the wgmma
 * tile (128 x 256 x 64) and the mma.sync tile (128 x 128 x 32), all four
 * transposes (the wgmma path reads every layout in place: no workspace
 * where TMA can address the rows), leading dimensions above the tight
 * value (odd ones, which the wgmma path must pack), alpha/beta specials, NaN
 * and inf inputs, outputs poisoned with NaN before each run, the padding of A
 * and B filled with NaN (read by mistake, it shows in C) and C's padding
 * checked unchanged. conv2d by auto and im2col on small layers; the algorithms
 * not offered in half are refused. Skips (77) without a CUDA device. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

static const locus_dtype types[] = {LOCUS_DTYPE_BF16, LOCUS_DTYPE_F16};
static double worst[2];

static size_t type_slot(locus_dtype type)
{
    return type == LOCUS_DTYPE_BF16 ? 0 : 1;
}

static double half_value(locus_dtype type, uint16_t bits)
{
    if (type == LOCUS_DTYPE_BF16) {
        uint32_t word = (uint32_t)bits << 16;
        float f;
        memcpy(&f, &word, sizeof f);
        return f;
    }
    const int sign = bits >> 15, exponent = (bits >> 10) & 31;
    const int mantissa = bits & 1023;
    double v;
    if (exponent == 31)
        v = mantissa != 0 ? NAN : INFINITY;
    else if (exponent == 0)
        v = ldexp(mantissa, -24);
    else
        v = ldexp(1024 + mantissa, exponent - 25);
    return sign ? -v : v;
}

static uint16_t half_nan(locus_dtype type)
{
    return type == LOCUS_DTYPE_BF16 ? 0x7fc0 : 0x7e00;
}

static uint16_t half_inf(locus_dtype type)
{
    return type == LOCUS_DTYPE_BF16 ? 0x7f80 : 0x7c00;
}

/* Random normal values of magnitude in [2^-5, 2), either sign, with every
 * mantissa bit of the type random. */
static uint16_t half_random(locus_dtype type)
{
    const uint64_t r = (uint64_t)((cuda_test_random() + 1.0f) * 0x1p23f);
    const unsigned sign = r & 1, e = (unsigned)(r >> 1) % 6;
    if (type == LOCUS_DTYPE_BF16)
        return (uint16_t)(sign << 15 | (122 + e) << 7 | (r >> 4 & 127));
    return (uint16_t)(sign << 15 | (10 + e) << 10 | (r >> 4 & 1023));
}

static locus_buffer *half_buffer(locus_context *context, const uint16_t *host,
                                 size_t count)
{
    locus_buffer *buffer = NULL;
    locus_status status = locus_buffer_create(
        context, count > 0 ? count * sizeof(uint16_t) : 2, NULL, &buffer);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_create(%zu halves): %s", count,
          locus_last_error());
    if (status != LOCUS_SUCCESS)
        return NULL;
    if (count > 0) {
        status = locus_buffer_write(buffer, 0, host, count * sizeof(uint16_t));
        CHECK(status == LOCUS_SUCCESS, "locus_buffer_write: %s",
              locus_last_error());
    }
    return buffer;
}

typedef struct gemm_case {
    size_t m, n, k, ld_pad;
    double alpha, beta;
} gemm_case;

/* Special values planted in A: none, one NaN, one inf (with B finite the
 * row of C it reaches becomes NaN or +-inf). */
enum { PLANT_NONE, PLANT_NAN, PLANT_INF };

static double tolerance_of(size_t k)
{
    return 8.0 * 0x1p-24 + 8.0 * sqrt((double)k) * 0x1p-24;
}

static void check_gemm(locus_context *context, locus_device *gpu,
                       locus_dtype type, const gemm_case *t, int trans_a,
                       int trans_b, int plant)
{
    const size_t a_rows = trans_a ? t->k : t->m, a_cols = trans_a ? t->m : t->k;
    const size_t b_rows = trans_b ? t->n : t->k, b_cols = trans_b ? t->k : t->n;
    const size_t lda = a_cols + t->ld_pad, ldb = b_cols + t->ld_pad;
    const size_t ldc = t->n + t->ld_pad;
    const size_t a_count = a_rows * lda, b_count = b_rows * ldb;
    const size_t c_count = t->m * ldc;
    uint16_t *a = malloc((a_count + 1) * sizeof *a);
    uint16_t *b = malloc((b_count + 1) * sizeof *b);
    float *c0 = malloc(c_count * sizeof *c0), *c = malloc(c_count * sizeof *c);
    CHECK(a && b && c0 && c, "malloc");
    if (!(a && b && c0 && c))
        goto done;
    for (size_t i = 0; i < a_rows; i++)
        for (size_t j = 0; j < lda; j++)
            a[i * lda + j] = j < a_cols ? half_random(type) : half_nan(type);
    for (size_t i = 0; i < b_rows; i++)
        for (size_t j = 0; j < ldb; j++)
            b[i * ldb + j] = j < b_cols ? half_random(type) : half_nan(type);
    /* The special at A's element (row m / 2, depth k / 2). */
    const size_t si = t->m / 2, sp = t->k / 2;
    const size_t special = trans_a ? sp * lda + si : si * lda + sp;
    if (plant == PLANT_NAN && t->k > 0)
        a[special] = half_nan(type);
    if (plant == PLANT_INF && t->k > 0)
        a[special] = half_inf(type);
    /* The reference reads the decoded values (decoding in the inner loop
     * would make the test slow). */
    double *da = malloc((a_count + 1) * sizeof *da);
    double *db = malloc((b_count + 1) * sizeof *db);
    CHECK(da && db, "malloc");
    if (!(da && db)) {
        free(da);
        free(db);
        goto done;
    }
    for (size_t i = 0; i < a_count; i++)
        da[i] = half_value(type, a[i]);
    for (size_t i = 0; i < b_count; i++)
        db[i] = half_value(type, b[i]);
    cuda_test_fill(c0, c_count);
    if (t->beta == 0.0)
        for (size_t i = 0; i < c_count; i++)
            c0[i] = NAN;
    for (size_t i = 0; i < t->m; i++)
        for (size_t j = t->n; j < ldc; j++)
            c0[i * ldc + j] = NAN;

    locus_buffer *ba = half_buffer(context, a, a_count);
    locus_buffer *bb = half_buffer(context, b, b_count);
    locus_buffer *bc = cuda_test_buffer(context, c0, c_count);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = type;
    desc.trans_a = trans_a ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.trans_b = trans_b ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.m = t->m;
    desc.n = t->n;
    desc.k = t->k;
    desc.lda = lda;
    desc.ldb = ldb;
    desc.ldc = ldc;
    desc.alpha = t->alpha;
    desc.beta = t->beta;
    locus_record record;
    locus_record_init(&record);
    const char *name = locus_dtype_str(type);
    locus_status status =
        ba && bb && bc ? locus_gemm(context, gpu, &desc, ba, bb, bc, &record)
                       : LOCUS_ERROR_OUT_OF_MEMORY;
    CHECK(status == LOCUS_SUCCESS, "%s gemm %zux%zux%zu trans %d%d: %s", name,
          t->m, t->n, t->k, trans_a, trans_b, locus_last_error());
    if (status != LOCUS_SUCCESS || !cuda_test_read(bc, c, c_count))
        goto release;
    double error = 0.0;
    int bad_special = 0, padding_kept = 1;
    size_t where = 0;
    for (size_t i = 0; i < t->m; i++)
        for (size_t j = 0; j < ldc; j++) {
            const float got = c[i * ldc + j];
            if (j >= t->n) {
                if (memcmp(&got, &c0[i * ldc + j], sizeof got) != 0)
                    padding_kept = 0;
                continue;
            }
            double sum = 0.0, magnitude = 0.0;
            if (t->alpha != 0.0)
                for (size_t p = 0; p < t->k; p++) {
                    const double x =
                        trans_a ? da[p * lda + i] : da[i * lda + p];
                    const double y =
                        trans_b ? db[j * ldb + p] : db[p * ldb + j];
                    sum += x * y;
                    magnitude += fabs(x * y);
                }
            double expected = t->alpha * sum;
            magnitude *= fabs(t->alpha);
            if (t->beta != 0.0) {
                expected += t->beta * c0[i * ldc + j];
                magnitude += fabs(t->beta * c0[i * ldc + j]);
            }
            if (!isfinite(expected)) {
                /* Only the row the special reaches: NaN, or the same
                 * infinity. */
                if (!(isnan(expected) ? isnan(got) : got == expected))
                    bad_special = 1;
                continue;
            }
            const double e = cuda_test_error(got, expected, magnitude);
            if (!(e <= error)) {
                error = e;
                where = i * ldc + j;
            }
        }
    const double tolerance = tolerance_of(t->k);
    CHECK(error <= tolerance,
          "%s gemm %zux%zux%zu trans %d%d ld+%zu alpha %g beta %g (%s): "
          "relative error %.3g at (%zu, %zu) (got %.9g), tolerance %.3g",
          name, t->m, t->n, t->k, trans_a, trans_b, t->ld_pad, t->alpha,
          t->beta, record.algorithm, error, where / ldc, where % ldc,
          (double)c[where], tolerance);
    CHECK(!bad_special,
          "%s gemm %zux%zux%zu trans %d%d (%s): the %s in A "
          "did not give NaN/inf where it should",
          name, t->m, t->n, t->k, trans_a, trans_b, record.algorithm,
          plant == PLANT_NAN ? "NaN" : "inf");
    CHECK(padding_kept, "%s gemm %zux%zux%zu trans %d%d (%s) wrote C's padding",
          name, t->m, t->n, t->k, trans_a, trans_b, record.algorithm);
    if (t->alpha != 0.0 && t->k > 0)
        CHECK(strstr(record.algorithm, "half") != NULL,
              "%s gemm ran '%s', not a half kernel", name, record.algorithm);
    if (error > worst[type_slot(type)])
        worst[type_slot(type)] = error;
    /* The wgmma path reads both layouts of A and B where they lie: with
     * rows TMA can address (ld a multiple of 8 elements, buffers from
     * cudaMalloc) nothing is copied into a workspace. */
    if (strstr(record.algorithm, "wgmma") != NULL && lda % 8 == 0 &&
        ldb % 8 == 0)
        CHECK(record.workspace_bytes == 0,
              "%s gemm %zux%zux%zu trans %d%d lda %zu ldb %zu (%s): "
              "workspace %llu bytes, expected none",
              name, t->m, t->n, t->k, trans_a, trans_b, lda, ldb,
              record.algorithm, (unsigned long long)record.workspace_bytes);
    if (t->ld_pad == 0 && trans_b && !trans_a && t->m >= 128)
        printf("%s gemm %zux%zux%zu: %s, workspace %llu bytes\n", name, t->m,
               t->n, t->k, record.algorithm,
               (unsigned long long)record.workspace_bytes);
release:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
    free(da);
    free(db);
done:
    free(a);
    free(b);
    free(c0);
    free(c);
}

static const gemm_case gemm_cases[] = {
    {1, 1, 1, 0, 1.0, 0.0},
    {7, 5, 3, 0, 1.0, 0.0},
    {33, 17, 65, 3, 1.0, 0.0},
    {64, 256, 64, 0, 1.0, 0.0},
    {128, 256, 128, 0, 1.0, 0.0},
    {130, 260, 70, 0, 0.5, -1.25},
    {257, 129, 200, 1, 1.0, 0.0},
    {200, 300, 129, 8, -2.0, 1.0},
    {96, 512, 256, 0, 1.0, 0.0},
    /* Rows TMA addresses in place in every layout (multiples of 8), with
     * partial tiles of m, n and k: the MN-major boxes past the edges, and
     * with padded ld the NaN padding beside them. */
    {136, 264, 72, 0, 1.0, 0.0},
    {200, 320, 136, 8, 1.0, 0.5},
};

/* alpha 0 or k 0: C = beta C, A and B never read (they hold NaN). */
static void check_scale_only(locus_context *context, locus_device *gpu,
                             locus_dtype type, size_t k, double alpha,
                             double beta)
{
    const size_t m = 9, n = 13;
    uint16_t a[9 * 4], b[4 * 13];
    for (size_t i = 0; i < 9 * 4; i++)
        a[i] = half_nan(type);
    for (size_t i = 0; i < 4 * 13; i++)
        b[i] = half_nan(type);
    float c0[9 * 13], c[9 * 13];
    cuda_test_fill(c0, m * n);
    c0[5] = NAN;
    locus_buffer *ba = k > 0 ? half_buffer(context, a, m * k) : NULL;
    locus_buffer *bb = k > 0 ? half_buffer(context, b, k * n) : NULL;
    locus_buffer *bc = cuda_test_buffer(context, c0, m * n);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = type;
    desc.m = m;
    desc.n = n;
    desc.k = k;
    desc.alpha = alpha;
    desc.beta = beta;
    locus_status status = locus_gemm(context, gpu, &desc, ba, bb, bc, NULL);
    CHECK(status == LOCUS_SUCCESS, "%s gemm k %zu alpha %g beta %g: %s",
          locus_dtype_str(type), k, alpha, beta, locus_last_error());
    if (status == LOCUS_SUCCESS && cuda_test_read(bc, c, m * n))
        for (size_t i = 0; i < m * n; i++) {
            const float expected = beta == 0.0 ? 0.0f : (float)beta * c0[i];
            const int same = isnan(expected) ? isnan(c[i]) : c[i] == expected;
            CHECK(same, "%s gemm k %zu alpha %g beta %g: C[%zu] = %g, not %g",
                  locus_dtype_str(type), k, alpha, beta, i, (double)c[i],
                  (double)expected);
            if (!same)
                break;
        }
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
}

typedef struct conv_case {
    size_t batch, channels, height, width, filters, kh, kw, stride, pad;
} conv_case;

static const conv_case conv_cases[] = {
    {2, 3, 7, 7, 5, 3, 3, 1, 1},
    {1, 8, 9, 6, 16, 3, 2, 2, 1},
    {3, 16, 5, 5, 8, 1, 1, 1, 0},
    {1, 32, 12, 10, 40, 3, 3, 1, 0},
};

static void check_conv(locus_context *context, locus_device *gpu,
                       locus_dtype type, const conv_case *t,
                       locus_conv_algorithm algorithm)
{
    const size_t P = (t->height + 2 * t->pad - t->kh) / t->stride + 1;
    const size_t Q = (t->width + 2 * t->pad - t->kw) / t->stride + 1;
    const size_t in_count = t->batch * t->channels * t->height * t->width;
    const size_t f_count = t->filters * t->channels * t->kh * t->kw;
    const size_t out_count = t->batch * t->filters * P * Q;
    uint16_t *x = malloc(in_count * sizeof *x),
             *f = malloc(f_count * sizeof *f);
    float *y = malloc(out_count * sizeof *y);
    CHECK(x && f && y, "malloc");
    if (!(x && f && y))
        goto done;
    for (size_t i = 0; i < in_count; i++)
        x[i] = half_random(type);
    for (size_t i = 0; i < f_count; i++)
        f[i] = half_random(type);
    locus_buffer *bx = half_buffer(context, x, in_count);
    locus_buffer *bf = half_buffer(context, f, f_count);
    locus_buffer *by = cuda_test_buffer(context, NULL, out_count);
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.dtype = type;
    desc.batch = t->batch;
    desc.in_channels = t->channels;
    desc.in_height = t->height;
    desc.in_width = t->width;
    desc.out_channels = t->filters;
    desc.kernel_height = t->kh;
    desc.kernel_width = t->kw;
    desc.stride_h = desc.stride_w = t->stride;
    desc.pad_h = desc.pad_w = t->pad;
    desc.algorithm = algorithm;
    locus_record record;
    locus_record_init(&record);
    const char *name = locus_dtype_str(type);
    locus_status status =
        bx && bf && by ? locus_conv2d(context, gpu, &desc, bx, bf, by, &record)
                       : LOCUS_ERROR_OUT_OF_MEMORY;
    CHECK(status == LOCUS_SUCCESS,
          "%s conv2d %zux%zux%zux%zu k %zu %zux%zu: %s", name, t->batch,
          t->channels, t->height, t->width, t->filters, t->kh, t->kw,
          locus_last_error());
    if (status == LOCUS_SUCCESS && cuda_test_read(by, y, out_count)) {
        double error = 0.0;
        const size_t terms = t->channels * t->kh * t->kw;
        for (size_t n = 0; n < t->batch; n++)
            for (size_t k = 0; k < t->filters; k++)
                for (size_t p = 0; p < P; p++)
                    for (size_t q = 0; q < Q; q++) {
                        double sum = 0.0, magnitude = 0.0;
                        for (size_t c = 0; c < t->channels; c++)
                            for (size_t r = 0; r < t->kh; r++)
                                for (size_t s = 0; s < t->kw; s++) {
                                    const size_t h = p * t->stride + r;
                                    const size_t w = q * t->stride + s;
                                    if (h < t->pad || w < t->pad ||
                                        h - t->pad >= t->height ||
                                        w - t->pad >= t->width)
                                        continue;
                                    const double v =
                                        half_value(type,
                                                   x[((n * t->channels + c) *
                                                          t->height +
                                                      h - t->pad) *
                                                         t->width +
                                                     w - t->pad]) *
                                        half_value(
                                            type,
                                            f[((k * t->channels + c) * t->kh +
                                               r) *
                                                  t->kw +
                                              s]);
                                    sum += v;
                                    magnitude += fabs(v);
                                }
                        const double e = cuda_test_error(
                            y[((n * t->filters + k) * P + p) * Q + q], sum,
                            magnitude);
                        if (!(e <= error))
                            error = e;
                    }
        CHECK(error <= tolerance_of(terms),
              "%s conv2d %zux%zux%zux%zu k %zu %zux%zu stride %zu pad %zu "
              "(%s, %s): relative error %.3g, tolerance %.3g",
              name, t->batch, t->channels, t->height, t->width, t->filters,
              t->kh, t->kw, t->stride, t->pad,
              locus_conv_algorithm_str(algorithm), record.algorithm, error,
              tolerance_of(terms));
        if (error > worst[type_slot(type)])
            worst[type_slot(type)] = error;
    }
    locus_buffer_destroy(bx);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(by);
done:
    free(x);
    free(f);
    free(y);
}

/* What cuda:0 offers in half, and that the rest is refused. */
static void check_offers(locus_context *context, locus_device *gpu,
                         locus_dtype type)
{
    const struct {
        locus_op_kind op;
        int algorithm, offered;
    } expected[] = {
        {LOCUS_OP_GEMM, 0, 1},
        {LOCUS_OP_CONV2D, LOCUS_CONV_AUTO, 1},
        {LOCUS_OP_CONV2D, LOCUS_CONV_IM2COL, 1},
        {LOCUS_OP_CONV2D, LOCUS_CONV_MEC, 0},
        {LOCUS_OP_CONV2D, LOCUS_CONV_IMPLICIT_GEMM, 0},
        {LOCUS_OP_CONV2D, LOCUS_CONV_WINOGRAD, 0},
        {LOCUS_OP_REDUCE, 0, 0},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        int offered = -1;
        locus_status status = locus_device_offers(
            gpu, expected[i].op, expected[i].algorithm, type, &offered);
        CHECK(status == LOCUS_SUCCESS && offered == expected[i].offered,
              "%s: locus_device_offers(op %d, algorithm %d) gave %d (%s), "
              "expected %d",
              locus_dtype_str(type), (int)expected[i].op, expected[i].algorithm,
              offered, locus_status_name(status), expected[i].offered);
    }
    /* A refused conv2d algorithm: NOT_SUPPORTED, not a wrong answer. */
    uint16_t x[2 * 4 * 4] = {0}, f[2 * 2 * 3 * 3] = {0};
    locus_buffer *bx = half_buffer(context, x, 2 * 4 * 4);
    locus_buffer *bf = half_buffer(context, f, 2 * 2 * 3 * 3);
    locus_buffer *by = cuda_test_buffer(context, NULL, 2 * 2 * 2);
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.dtype = type;
    desc.batch = 1;
    desc.in_channels = 2;
    desc.in_height = desc.in_width = 4;
    desc.out_channels = 2;
    desc.kernel_height = desc.kernel_width = 3;
    desc.algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    locus_status status = locus_conv2d(context, gpu, &desc, bx, bf, by, NULL);
    CHECK(status == LOCUS_ERROR_NOT_SUPPORTED,
          "%s conv2d implicit on cuda:0: %s, expected not supported",
          locus_dtype_str(type), locus_status_name(status));
    locus_buffer_destroy(bx);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(by);
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = cuda_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    for (size_t ti = 0; ti < 2; ti++) {
        const locus_dtype type = types[ti];
        check_offers(context, gpu, type);
        for (size_t i = 0; i < sizeof gemm_cases / sizeof gemm_cases[0]; i++)
            for (int trans = 0; trans < 4; trans++)
                check_gemm(context, gpu, type, &gemm_cases[i], trans >> 1,
                           trans & 1, PLANT_NONE);
        const gemm_case special = {70, 300, 90, 0, 1.0, 0.0};
        for (int trans = 0; trans < 4; trans++) {
            check_gemm(context, gpu, type, &special, trans >> 1, trans & 1,
                       PLANT_NAN);
            check_gemm(context, gpu, type, &special, trans >> 1, trans & 1,
                       PLANT_INF);
        }
        check_scale_only(context, gpu, type, 4, 0.0, 0.0);
        check_scale_only(context, gpu, type, 4, 0.0, 2.5);
        check_scale_only(context, gpu, type, 0, 1.0, -0.5);
        check_scale_only(context, gpu, type, 0, 1.0, 1.0);
        for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
            check_conv(context, gpu, type, &conv_cases[i], LOCUS_CONV_AUTO);
            check_conv(context, gpu, type, &conv_cases[i], LOCUS_CONV_IM2COL);
        }
        printf("%s: worst relative error %.3g (tolerance at k 256: %.3g)\n",
               locus_dtype_str(type), worst[ti], tolerance_of(256));
    }
    locus_context_destroy(context);
    return cuda_test_finish("test_cuda_half");
}
