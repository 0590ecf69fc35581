/* An f64 gemm computes with alpha and beta as doubles, also in the BLAS
 * rules' special cases: an alpha or a beta that f32 would round away
 * (1e-50, 1 + 2^-40) is dgemm's own and must not turn the op into "C
 * unchanged" or "C = beta C". */
#include <math.h>
#include <string.h>

#include "expect_error.h"

static locus_context *context;
static locus_device *cpu;

static locus_buffer *doubles(const double *values, size_t count)
{
    locus_buffer *buffer = NULL;
    if (TEST_OK(locus_buffer_create(context, count * sizeof(double), NULL,
                                    &buffer)) == LOCUS_SUCCESS)
        TEST_OK(locus_buffer_write(buffer, 0, values, count * sizeof(double)));
    return buffer;
}

static void read_doubles(locus_buffer *buffer, double *values, size_t count)
{
    TEST_OK(locus_buffer_read(buffer, 0, values, count * sizeof(double)));
}

int main(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS ||
        TEST_OK(locus_device_find(context, "cpu", &cpu)) != LOCUS_SUCCESS)
        return 1;
    const double ones[4] = {1, 1, 1, 1};
    const double c0[4] = {3, -5, 7, 0.5};
    locus_buffer *a = doubles(ones, 4), *b = doubles(ones, 4);
    locus_buffer *c = doubles(c0, 4);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.m = desc.n = desc.k = 2;
    double out[4];

    /* alpha 0, beta 1 + 2^-40: C = beta C, not C unchanged. */
    const double beta = 1.0 + ldexp(1.0, -40);
    desc.alpha = 0.0;
    desc.beta = beta;
    TEST_OK(locus_gemm(context, cpu, &desc, a, b, c, NULL));
    read_doubles(c, out, 4);
    for (int i = 0; i < 4; i++)
        TEST_EXPECT(out[i] == beta * c0[i],
                    "alpha 0: c[%d] = %.17g, want %.17g", i, out[i],
                    beta * c0[i]);

    /* alpha 1e-50 (0 in f32), beta 0: C = alpha A B = 2e-50, not zero. */
    desc.alpha = 1e-50;
    desc.beta = 0.0;
    TEST_OK(locus_gemm(context, cpu, &desc, a, b, c, NULL));
    read_doubles(c, out, 4);
    for (int i = 0; i < 4; i++)
        TEST_EXPECT(fabs(out[i] - 2e-50) <= 1e-65,
                    "alpha 1e-50: c[%d] = %.17g, want 2e-50", i, out[i]);

    /* The same alpha in f32 is sgemm's 0: C = beta C = 0 (floats). */
    desc.dtype = LOCUS_DTYPE_F32;
    float fc[4] = {1, 2, 3, 4};
    TEST_OK(locus_buffer_write(c, 0, fc, sizeof fc));
    TEST_OK(locus_gemm(context, cpu, &desc, a, b, c, NULL));
    TEST_OK(locus_buffer_read(c, 0, fc, sizeof fc));
    for (int i = 0; i < 4; i++)
        TEST_EXPECT(fc[i] == 0.0f && !signbit(fc[i]),
                    "f32 alpha 1e-50: c[%d] = %g, want +0", i, fc[i]);
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    locus_buffer_destroy(c);
    locus_context_destroy(context);
    return test_exit_code();
}
