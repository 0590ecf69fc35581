/* The CUDA backend's f64 kernels on cuda:0 against long double (x87,
 * 64-bit mantissa) references: GEMM shapes that take each block tile the
 * backend chooses by shape (64x64, 128x64, 128x128), all four transposes,
 * odd leading dimensions (8-byte copies), alpha with bits a float lacks,
 * beta 0 over NaN, alpha 0; reduce sums that plain double summation gets
 * wrong (cancellation, partial sums that overflow), inf and NaN, min/max,
 * allow_atomic; conv2d by im2col and auto; the refusals (tf32 with f64,
 * conv2d algorithms other than im2col). Outputs are NaN before each run.
 * Skips (77) without a CUDA device. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define U64 0x1p-53 /* unit roundoff of double */

static double random_double(void)
{
    /* Two floats' worth of random bits: every mantissa bit of the double
     * is random. */
    return (double)cuda_test_random() + (double)cuda_test_random() * 0x1p-24;
}

static locus_buffer *f64_buffer(locus_context *context, const double *host,
                                size_t count)
{
    locus_buffer *buffer = NULL;
    locus_status status =
        locus_buffer_create(context, count * sizeof(double), NULL, &buffer);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_create(%zu doubles): %s",
          count, locus_last_error());
    if (status != LOCUS_SUCCESS)
        return NULL;
    double *memory = NULL;
    status = locus_buffer_map(buffer, LOCUS_MAP_WRITE, (void **)&memory);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_map: %s", locus_last_error());
    if (status != LOCUS_SUCCESS) {
        locus_buffer_destroy(buffer);
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        memory[i] = host != NULL ? host[i] : NAN;
    locus_buffer_unmap(buffer);
    return buffer;
}

typedef struct gemm_case {
    size_t m, n, k, pad; /* pad: leading dimensions above tight */
    double alpha, beta;
} gemm_case;

/* C = alpha op(A) op(B) + beta C against long double; error bound
 * (k + 4) u sum |alpha a b| + 2 u |beta c| per element. */
static void check_gemm(locus_context *context, locus_device *gpu,
                       const gemm_case *gc, int ta, int tb)
{
    const size_t m = gc->m, n = gc->n, k = gc->k;
    const size_t rows_a = ta ? k : m, cols_a = ta ? m : k;
    const size_t rows_b = tb ? n : k, cols_b = tb ? k : n;
    const size_t lda = cols_a + gc->pad, ldb = cols_b + gc->pad;
    const size_t ldc = n + gc->pad;
    double *a = malloc(rows_a * lda * sizeof *a);
    double *b = malloc(rows_b * ldb * sizeof *b);
    double *c = malloc(m * ldc * sizeof *c);
    double *got = malloc(m * ldc * sizeof *got);
    if (a == NULL || b == NULL || c == NULL || got == NULL) {
        CHECK(0, "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < rows_a * lda; i++)
        a[i] = i % lda < cols_a ? random_double() : NAN;
    for (size_t i = 0; i < rows_b * ldb; i++)
        b[i] = i % ldb < cols_b ? random_double() : NAN;
    for (size_t i = 0; i < m * ldc; i++)
        c[i] = gc->beta == 0.0 ? NAN : random_double();
    locus_buffer *ba = f64_buffer(context, a, rows_a * lda);
    locus_buffer *bb = f64_buffer(context, b, rows_b * ldb);
    locus_buffer *bc = f64_buffer(context, c, m * ldc);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.trans_a = ta ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.trans_b = tb ? LOCUS_TRANS : LOCUS_NO_TRANS;
    desc.m = m;
    desc.n = n;
    desc.k = k;
    desc.lda = lda;
    desc.ldb = ldb;
    desc.ldc = ldc;
    desc.alpha = gc->alpha;
    desc.beta = gc->beta;
    locus_record record;
    locus_record_init(&record);
    locus_status status = locus_gemm(context, gpu, &desc, ba, bb, bc, &record);
    CHECK(status == LOCUS_SUCCESS, "f64 gemm %zux%zux%zu %c%c: %s", m, n, k,
          ta ? 'T' : 'N', tb ? 'T' : 'N', locus_last_error());
    if (status == LOCUS_SUCCESS &&
        locus_buffer_read(bc, 0, got, m * ldc * sizeof *got) == LOCUS_SUCCESS) {
        double worst = 0.0;
        size_t bad = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < ldc; j++) {
                const double g = got[i * ldc + j];
                if (j >= n) { /* padding: untouched */
                    bad += memcmp(&g, &c[i * ldc + j], sizeof g) != 0;
                    continue;
                }
                long double sum = 0.0L, magnitude = 0.0L;
                for (size_t l = 0; l < k; l++) {
                    const long double x = ta ? a[l * lda + i] : a[i * lda + l];
                    const long double y = tb ? b[j * ldb + l] : b[l * ldb + j];
                    sum += x * y;
                    magnitude += fabsl(x * y);
                }
                long double want = (long double)gc->alpha * sum;
                long double bound =
                    (k + 4) * U64 * fabsl((long double)gc->alpha) * magnitude;
                if (gc->beta != 0.0) {
                    want += (long double)gc->beta * c[i * ldc + j];
                    bound += 2 * U64 * fabsl(gc->beta * c[i * ldc + j]);
                }
                const double error =
                    isfinite(g) ? (double)fabsl(g - want) : INFINITY;
                if (!(error <= (double)bound + DBL_MIN))
                    bad++;
                const double ratio = bound > 0 ? error / (double)bound : 0;
                if (ratio > worst)
                    worst = ratio;
            }
        CHECK(bad == 0,
              "f64 gemm %zux%zux%zu %c%c pad %zu alpha %.17g beta %g (%s): %zu "
              "elements off, worst %.3g of the bound",
              m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N', gc->pad, gc->alpha,
              gc->beta, record.algorithm, bad, worst);
    }
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
done:
    free(a);
    free(b);
    free(c);
    free(got);
}

/* alpha 0: C = beta C, NaN in A and B never reaching it. */
static void check_alpha_zero(locus_context *context, locus_device *gpu)
{
    double a[6], b[6], c[4] = {1.0, -2.0, 3.0, 0.5}, got[4];
    for (int i = 0; i < 6; i++)
        a[i] = b[i] = NAN;
    locus_buffer *ba = f64_buffer(context, a, 6);
    locus_buffer *bb = f64_buffer(context, b, 6);
    locus_buffer *bc = f64_buffer(context, c, 4);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.m = desc.n = 2;
    desc.k = 3;
    desc.alpha = 0.0;
    desc.beta = 1.0 + 0x1p-40;
    locus_status status = locus_gemm(context, gpu, &desc, ba, bb, bc, NULL);
    CHECK(status == LOCUS_SUCCESS, "f64 gemm alpha 0: %s", locus_last_error());
    if (status == LOCUS_SUCCESS &&
        locus_buffer_read(bc, 0, got, sizeof got) == LOCUS_SUCCESS)
        for (int i = 0; i < 4; i++)
            CHECK(got[i] == c[i] * desc.beta,
                  "f64 gemm alpha 0: c[%d] = %.17g, expected %.17g", i, got[i],
                  c[i] * desc.beta);
    desc.alpha = 1.0;
    desc.math = LOCUS_MATH_TF32;
    status = locus_gemm(context, gpu, &desc, ba, bb, bc, NULL);
    CHECK(status == LOCUS_ERROR_NOT_SUPPORTED,
          "f64 gemm in tf32: %s, expected not supported",
          locus_status_name(status));
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
}

/* One reduce of x[0..n) against `want` within `bound`. */
static void check_reduce(locus_context *context, locus_device *gpu,
                         const double *x, size_t n, locus_reduce_op op,
                         int atomic, long double want, long double bound,
                         const char *what)
{
    locus_buffer *bx = f64_buffer(context, x, n);
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.op = op;
    desc.count = n;
    desc.allow_atomic = atomic;
    double got = 0.0;
    locus_status status = locus_reduce(context, gpu, &desc, bx, &got, NULL);
    CHECK(status == LOCUS_SUCCESS, "f64 reduce %s: %s", what,
          locus_last_error());
    const int same = isnan(want) ? isnan(got)
                     : isinf(want)
                         ? got == (double)want
                         : isfinite(got) && fabsl(got - want) <= bound;
    CHECK(status != LOCUS_SUCCESS || same,
          "f64 reduce %s (n %zu, op %d, atomic %d): %.17g, expected %.17Lg "
          "within %.3Lg",
          what, n, (int)op, atomic, got, want, bound);
    locus_buffer_destroy(bx);
}

static void check_reduces(locus_context *context, locus_device *gpu)
{
    const size_t big = (size_t)1 << 22;
    double *x = malloc(big * sizeof *x);
    if (x == NULL) {
        CHECK(0, "out of host memory");
        return;
    }
    /* Ones, with +2^60 and -2^60 first: plain summation loses the ones
     * added to the thread sums holding 2^60; compensated, the sum is
     * exact. */
    for (size_t i = 0; i < big; i++)
        x[i] = 1.0;
    x[0] = 0x1p60;
    x[1] = -0x1p60;
    for (int atomic = 0; atomic < 2; atomic++)
        check_reduce(context, gpu, x, big, LOCUS_REDUCE_SUM, atomic,
                     (long double)(big - 2), 0.0L, "cancelling 2^60");
    /* Random values at every size class of the launch (one block,
     * several, the whole grid), against long double; bound 2 u |sum| +
     * (n u)^2 sum |x|. */
    const size_t sizes[] = {1, 3, 513, 100001, big};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s];
        long double sum = 0.0L, abs_sum = 0.0L, lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            x[i] = random_double() * (i % 5 == 0 ? 0x1p30 : 1.0);
            sum += x[i];
            abs_sum += fabsl(x[i]);
            lo = x[i] < lo ? x[i] : lo;
            hi = x[i] > hi ? x[i] : hi;
        }
        const long double nu = (long double)n * U64;
        /* The long double reference itself is off by up to n 2^-64 sum|x|. */
        const long double bound = 2 * U64 * fabsl(sum) + nu * nu * abs_sum +
                                  (long double)n * 0x1p-64L * abs_sum;
        check_reduce(context, gpu, x, n, LOCUS_REDUCE_SUM, 0, sum, bound,
                     "random");
        check_reduce(context, gpu, x, n, LOCUS_REDUCE_MIN, 0, lo, 0.0L,
                     "random min");
        check_reduce(context, gpu, x, n, LOCUS_REDUCE_MAX, 0, hi, 0.0L,
                     "random max");
    }
    /* Partial sums past DBL_MAX, a finite total: the scaled pass. Four
     * values of 1.5 2^1022 first (one vector each for threads 0 and 1,
     * whose sum in the block tree overflows), four negated last, ones
     * between; every error term of the scaled pass is exact, the bound a
     * margin. */
    const size_t n = 100000;
    for (size_t i = 0; i < n; i++)
        x[i] = i < 4 ? 0x1.8p1022 : i >= n - 4 ? -0x1.8p1022 : 1.0;
    check_reduce(context, gpu, x, n, LOCUS_REDUCE_SUM, 0, (long double)(n - 8),
                 1e-6L * n, "overflowing partial sums");
    /* inf, NaN. */
    x[7] = INFINITY;
    for (size_t i = 0; i < n; i++)
        if (i != 7)
            x[i] = 1.0;
    check_reduce(context, gpu, x, n, LOCUS_REDUCE_SUM, 0, INFINITY, 0, "inf");
    x[9] = -INFINITY;
    check_reduce(context, gpu, x, n, LOCUS_REDUCE_SUM, 0, NAN, 0, "inf - inf");
    x[7] = x[9] = 1.0;
    x[n / 2] = NAN;
    check_reduce(context, gpu, x, n, LOCUS_REDUCE_SUM, 0, NAN, 0, "nan");
    check_reduce(context, gpu, x, n, LOCUS_REDUCE_MIN, 0, NAN, 0, "nan min");
    check_reduce(context, gpu, x, n, LOCUS_REDUCE_MAX, 0, NAN, 0, "nan max");
    free(x);
}

/* conv2d f64 (auto and im2col) against long double; the algorithms not
 * offered in f64 are refused. */
static void check_conv(locus_context *context, locus_device *gpu,
                       locus_conv_algorithm algorithm, size_t kernel,
                       size_t stride, size_t pad, locus_status expected)
{
    const size_t batch = 2, channels = 3, height = 9, width = 7, filters = 5;
    const size_t p = (height + 2 * pad - kernel) / stride + 1;
    const size_t q = (width + 2 * pad - kernel) / stride + 1;
    const size_t nx = batch * channels * height * width;
    const size_t nf = filters * channels * kernel * kernel;
    const size_t ny = batch * filters * p * q;
    double *x = malloc(nx * sizeof *x), *f = malloc(nf * sizeof *f);
    double *y = malloc(ny * sizeof *y);
    if (x == NULL || f == NULL || y == NULL) {
        CHECK(0, "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < nx; i++)
        x[i] = random_double();
    for (size_t i = 0; i < nf; i++)
        f[i] = random_double();
    locus_buffer *bx = f64_buffer(context, x, nx);
    locus_buffer *bf = f64_buffer(context, f, nf);
    locus_buffer *by = f64_buffer(context, NULL, ny);
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.batch = batch;
    desc.in_channels = channels;
    desc.in_height = height;
    desc.in_width = width;
    desc.out_channels = filters;
    desc.kernel_height = desc.kernel_width = kernel;
    desc.stride_h = desc.stride_w = stride;
    desc.pad_h = desc.pad_w = pad;
    desc.algorithm = algorithm;
    locus_status status = locus_conv2d(context, gpu, &desc, bx, bf, by, NULL);
    CHECK(status == expected,
          "f64 conv2d algorithm %d %zux%zu: %s, expected %s", (int)algorithm,
          kernel, kernel, locus_status_name(status),
          locus_status_name(expected));
    if (status == LOCUS_SUCCESS &&
        locus_buffer_read(by, 0, y, ny * sizeof *y) == LOCUS_SUCCESS) {
        size_t bad = 0;
        for (size_t img = 0; img < batch; img++)
            for (size_t kk = 0; kk < filters; kk++)
                for (size_t i = 0; i < p; i++)
                    for (size_t j = 0; j < q; j++) {
                        long double sum = 0, magnitude = 0;
                        for (size_t c = 0; c < channels; c++)
                            for (size_t r = 0; r < kernel; r++)
                                for (size_t s = 0; s < kernel; s++) {
                                    const long h =
                                        (long)(i * stride + r) - (long)pad;
                                    const long w =
                                        (long)(j * stride + s) - (long)pad;
                                    if (h < 0 || w < 0 || h >= (long)height ||
                                        w >= (long)width)
                                        continue;
                                    const long double v =
                                        (long double)
                                            x[((img * channels + c) * height +
                                               (size_t)h) *
                                                  width +
                                              (size_t)w] *
                                        f[((kk * channels + c) * kernel + r) *
                                              kernel +
                                          s];
                                    sum += v;
                                    magnitude += fabsl(v);
                                }
                        const double g =
                            y[((img * filters + kk) * p + i) * q + j];
                        const long double bound =
                            (channels * kernel * kernel + 4) * U64 * magnitude;
                        if (!(isfinite(g) && fabsl(g - sum) <= bound))
                            bad++;
                    }
        CHECK(bad == 0, "f64 conv2d %zux%zu stride %zu pad %zu: %zu off",
              kernel, kernel, stride, pad, bad);
    }
    locus_buffer_destroy(bx);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(by);
done:
    free(x);
    free(f);
    free(y);
}

static void check_offers(locus_device *gpu)
{
    const struct {
        locus_op_kind op;
        int algorithm, offered;
    } expected[] = {
        {LOCUS_OP_REDUCE, 0, 1},
        {LOCUS_OP_GEMM, 0, 1},
        {LOCUS_OP_CONV2D, LOCUS_CONV_AUTO, 1},
        {LOCUS_OP_CONV2D, LOCUS_CONV_IM2COL, 1},
        {LOCUS_OP_CONV2D, LOCUS_CONV_MEC, 0},
        {LOCUS_OP_CONV2D, LOCUS_CONV_IMPLICIT_GEMM, 0},
        {LOCUS_OP_CONV2D, LOCUS_CONV_WINOGRAD, 0},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        int offered = -1;
        locus_status status =
            locus_device_offers(gpu, expected[i].op, expected[i].algorithm,
                                LOCUS_DTYPE_F64, &offered);
        CHECK(status == LOCUS_SUCCESS && offered == expected[i].offered,
              "f64: locus_device_offers(op %d, algorithm %d) gave %d (%s), "
              "expected %d",
              (int)expected[i].op, expected[i].algorithm, offered,
              locus_status_name(status), expected[i].offered);
    }
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = cuda_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    check_offers(gpu);
    /* 64x64 tiles (few tiles), 128x64 (a few waves of them), 128x128
     * (at least one tile an SM); k not a multiple of 16; odd leading
     * dimensions; alpha 1 + 2^-40, which a float would round to 1. */
    const gemm_case cases[] = {
        {1, 1, 1, 0, 1.0, 0.0},        {7, 5, 3, 1, 1.0 + 0x1p-40, 0.0},
        {70, 33, 37, 0, -0.75, 0.5},   {257, 131, 19, 1, 1.0 + 0x1p-40, -1.5},
        {1100, 1500, 23, 0, 1.0, 0.0}, {1700, 1601, 35, 3, 2.0, 1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 4; t++)
            check_gemm(context, gpu, &cases[i], t & 1, t & 2);
    check_alpha_zero(context, gpu);
    check_reduces(context, gpu);
    check_conv(context, gpu, LOCUS_CONV_AUTO, 3, 1, 1, LOCUS_SUCCESS);
    check_conv(context, gpu, LOCUS_CONV_IM2COL, 3, 2, 0, LOCUS_SUCCESS);
    check_conv(context, gpu, LOCUS_CONV_AUTO, 1, 1, 0, LOCUS_SUCCESS);
    check_conv(context, gpu, LOCUS_CONV_IMPLICIT_GEMM, 3, 1, 1,
               LOCUS_ERROR_NOT_SUPPORTED);
    check_conv(context, gpu, LOCUS_CONV_WINOGRAD, 3, 1, 1,
               LOCUS_ERROR_NOT_SUPPORTED);
    locus_context_destroy(context);
    return cuda_test_finish("cuda_f64");
}
