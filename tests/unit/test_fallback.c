/* A device that fails mid-op, on the fake device module: without
 * LOCUS_STRICT the op runs on another device with a warning and the right
 * result; with LOCUS_STRICT=1 it is an error; either way no buffer loses its
 * data or keeps a half-written copy marked current. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"
#include "test_buffers.h"

enum { M = 23, N = 17, K = 11 };

static const char *module_dir;

static locus_context *make_context(const char *strict)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    options.strict = strict;
    options.calibration = "nominal";
    options.log = "error";
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

/* C = A B + C in float64, the float32 result's error relative to the sum
 * of magnitudes. */
static double worst_error(const float *a, const float *b, const float *c0,
                          const float *c)
{
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = c0[i * N + j], scale = fabs(want);
            for (int p = 0; p < K; p++) {
                want += (double)a[i * K + p] * b[p * N + j];
                scale += fabs((double)a[i * K + p] * b[p * N + j]);
            }
            double err = fabs(c[i * N + j] - want) / (scale + 1e-30);
            if (!(err <= worst))
                worst = err;
        }
    return worst;
}

typedef struct operands {
    float *a, *b, *c0;
    locus_buffer *A, *B, *C;
} operands;

/* C is read and written (beta = 1), and is made current on the fake device
 * first, so that a failure there could leave a scribbled copy marked
 * current if the runtime were careless. */
static operands make_operands(locus_context *context, locus_device *fake)
{
    operands o;
    o.a = test_random_floats(M * K);
    o.b = test_random_floats(K * N);
    o.c0 = test_random_floats(M * N);
    o.A = test_upload_floats(context, o.a, M * K);
    o.B = test_upload_floats(context, o.b, K * N);
    o.C = test_upload_floats(context, o.c0, M * N);
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = M * N;
    double sum;
    TEST_OK(locus_reduce(context, fake, &desc, o.C, &sum, NULL));
    return o;
}

static void free_operands(operands *o)
{
    locus_buffer_destroy(o->A);
    locus_buffer_destroy(o->B);
    locus_buffer_destroy(o->C);
    free(o->a);
    free(o->b);
    free(o->c0);
}

static locus_gemm_desc accumulate(void)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M, desc.n = N, desc.k = K;
    desc.beta = 1.0;
    return desc;
}

static void test_falls_back_without_strict(void)
{
    locus_context *context = make_context(NULL);
    locus_device *fake = NULL;
    TEST_OK(locus_device_find(context, "cuda:0", &fake));
    operands o = make_operands(context, fake);
    locus_gemm_desc desc = accumulate();
    locus_record record;
    locus_record_init(&record);
    setenv("LOCUS_TEST_FAKE_GEMM_FAILS", "1", 1);
    TEST_OK(locus_gemm(context, fake, &desc, o.A, o.B, o.C, &record));
    unsetenv("LOCUS_TEST_FAKE_GEMM_FAILS");
    TEST_EXPECT(strcmp(record.device, "cpu") == 0 &&
                    strcmp(record.chosen_by, "fallback") == 0,
                "ran on %s, chosen by %s; want cpu by fallback", record.device,
                record.chosen_by);
    float c[M * N];
    TEST_OK(locus_buffer_read(o.C, 0, c, sizeof c));
    double err = worst_error(o.a, o.b, o.c0, c);
    TEST_EXPECT(err < 1e-5, "fallback result error %g", err);

    /* The device works again: it must read C's new value, not the copy it
     * scribbled on before failing. */
    float c1[M * N];
    memcpy(c1, c, sizeof c1);
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, fake, &desc, o.A, o.B, o.C, &record));
    TEST_EXPECT(record.bytes_to_device > 0 || strcmp(record.device, "cuda:0"),
                "C was not uploaded again after the failure");
    TEST_OK(locus_buffer_read(o.C, 0, c, sizeof c));
    err = worst_error(o.a, o.b, c1, c);
    TEST_EXPECT(err < 1e-5, "rerun on the device: error %g", err);
    free_operands(&o);
    locus_context_destroy(context);
}

static void test_strict_fails_and_keeps_data(void)
{
    locus_context *context = make_context("1");
    locus_device *fake = NULL;
    TEST_OK(locus_device_find(context, "cuda:0", &fake));
    operands o = make_operands(context, fake);
    locus_gemm_desc desc = accumulate();
    setenv("LOCUS_TEST_FAKE_GEMM_FAILS", "1", 1);
    TEST_ERROR(locus_gemm(context, fake, &desc, o.A, o.B, o.C, NULL),
               LOCUS_ERROR_DEVICE_OUT_OF_MEMORY, "LOCUS_STRICT=1 forbids");
    unsetenv("LOCUS_TEST_FAKE_GEMM_FAILS");
    float c[M * N];
    TEST_OK(locus_buffer_read(o.C, 0, c, sizeof c));
    TEST_EXPECT(memcmp(c, o.c0, sizeof c) == 0, "a failed strict op changed C");
    /* And the device's scribbled copy is not used next time. */
    TEST_OK(locus_gemm(context, fake, &desc, o.A, o.B, o.C, NULL));
    TEST_OK(locus_buffer_read(o.C, 0, c, sizeof c));
    double err = worst_error(o.a, o.b, o.c0, c);
    TEST_EXPECT(err < 1e-5, "after the strict failure: error %g", err);

    /* Out of device memory before the op starts: the same. */
    setenv("LOCUS_TEST_FAKE_ALLOC_FAILS", "1", 1);
    locus_buffer *x = test_upload_floats(context, o.c0, M * N);
    locus_reduce_desc rd;
    locus_reduce_desc_init(&rd);
    rd.count = M * N;
    double sum = 0;
    TEST_ERROR(locus_reduce(context, fake, &rd, x, &sum, NULL),
               LOCUS_ERROR_DEVICE_OUT_OF_MEMORY, "cannot hold");
    unsetenv("LOCUS_TEST_FAKE_ALLOC_FAILS");
    locus_buffer_destroy(x);
    free_operands(&o);
    locus_context_destroy(context);
}

static void test_allocation_failure_falls_back(void)
{
    locus_context *context = make_context("0");
    locus_device *fake = NULL;
    TEST_OK(locus_device_find(context, "cuda:0", &fake));
    float *values = test_random_floats(M * N);
    double want = 0;
    for (int i = 0; i < M * N; i++)
        want += values[i];
    setenv("LOCUS_TEST_FAKE_ALLOC_FAILS", "1", 1);
    locus_buffer *x = test_upload_floats(context, values, M * N);
    locus_reduce_desc rd;
    locus_reduce_desc_init(&rd);
    rd.count = M * N;
    double sum = NAN;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_reduce(context, fake, &rd, x, &sum, &record));
    unsetenv("LOCUS_TEST_FAKE_ALLOC_FAILS");
    TEST_EXPECT(fabs(sum - want) <= 1e-5 * (1 + fabs(want)), "sum %g, want %g",
                sum, want);
    TEST_EXPECT(strcmp(record.device, "cpu") == 0, "ran on %s", record.device);
    locus_buffer_destroy(x);
    free(values);
    locus_context_destroy(context);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_fallback FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    module_dir = argv[1];
    test_seed(argc - 1, argv + 1);
    test_falls_back_without_strict();
    test_strict_fails_and_keeps_data();
    test_allocation_failure_falls_back();
    return test_exit_code();
}
