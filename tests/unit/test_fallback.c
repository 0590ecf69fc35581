/* A device that fails mid-op, on the fake device module: without
 * LOCUS_STRICT the op runs on another device with a warning and the right
 * result; with LOCUS_STRICT=1 it is an error; either way no buffer loses its
 * data or keeps a half-written copy marked current. And an algorithm asked
 * for by name that a device does not offer (conv2d's winograd on the cpu,
 * which the fake device runs) never goes there: the scheduler passes over
 * it, unless the caller or a strict LOCUS_DEVICE named that device. */
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

/* A 3x3 stride-1 conv (winograd's shape) of fresh random data. */
enum { CN = 2, CC = 3, CH = 7, CW = 6, CK = 5, CP = 7, CQ = 6 };

typedef struct conv_operands {
    float *x, *f;
    locus_buffer *X, *F, *Y;
} conv_operands;

static conv_operands make_conv_operands(locus_context *context)
{
    conv_operands o;
    o.x = test_random_floats(CN * CC * CH * CW);
    o.f = test_random_floats(CK * CC * 9);
    o.X = test_upload_floats(context, o.x, CN * CC * CH * CW);
    o.F = test_upload_floats(context, o.f, CK * CC * 9);
    float *poison = malloc(sizeof(float) * CN * CK * CP * CQ);
    for (int i = 0; i < CN * CK * CP * CQ; i++)
        poison[i] = NAN;
    o.Y = test_upload_floats(context, poison, CN * CK * CP * CQ);
    free(poison);
    return o;
}

static void free_conv_operands(conv_operands *o)
{
    locus_buffer_destroy(o->X);
    locus_buffer_destroy(o->F);
    locus_buffer_destroy(o->Y);
    free(o->x);
    free(o->f);
}

static locus_conv2d_desc winograd_desc(void)
{
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = CN, desc.in_channels = CC;
    desc.in_height = CH, desc.in_width = CW;
    desc.out_channels = CK, desc.kernel_height = 3, desc.kernel_width = 3;
    desc.pad_h = 1, desc.pad_w = 1;
    desc.algorithm = LOCUS_CONV_WINOGRAD;
    return desc;
}

/* The output against a float64 direct loop, relative to the terms. */
static double conv_error(const conv_operands *o)
{
    float *y = malloc(sizeof(float) * CN * CK * CP * CQ);
    TEST_OK(locus_buffer_read(o->Y, 0, y, sizeof(float) * CN * CK * CP * CQ));
    double worst = 0;
    for (int n = 0; n < CN; n++)
        for (int k = 0; k < CK; k++)
            for (int p = 0; p < CP; p++)
                for (int q = 0; q < CQ; q++) {
                    double want = 0, scale = 0;
                    for (int c = 0; c < CC; c++)
                        for (int r = 0; r < 3; r++)
                            for (int t = 0; t < 3; t++) {
                                int yy = p + r - 1, xx = q + t - 1;
                                if (yy < 0 || xx < 0 || yy >= CH || xx >= CW)
                                    continue;
                                double term =
                                    (double)o->x[((n * CC + c) * CH + yy) * CW +
                                                 xx] *
                                    o->f[((k * CC + c) * 3 + r) * 3 + t];
                                want += term;
                                scale += fabs(term);
                            }
                    double got = y[((n * CK + k) * CP + p) * CQ + q];
                    double err = fabs(got - want) / (scale + 1e-30);
                    if (!(err <= worst))
                        worst = err;
                }
    free(y);
    return worst;
}

static locus_context *make_device_context(const char *device,
                                          const char *strict)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    options.device = device;
    options.strict = strict;
    options.calibration = "nominal";
    options.log = "error";
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

static void test_unsupported_algorithm_moves_on(void)
{
    /* LOCUS_DEVICE=cpu names the cpu, which does not offer winograd (its
     * table says so): the op goes by the cost model, never to the cpu. */
    locus_context *context = make_device_context("cpu", NULL);
    conv_operands o = make_conv_operands(context);
    locus_conv2d_desc desc = winograd_desc();
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_conv2d(context, NULL, &desc, o.X, o.F, o.Y, &record));
    TEST_EXPECT(strcmp(record.device, "cuda:0") == 0 &&
                    strcmp(record.chosen_by, "auto") == 0,
                "ran on %s, chosen by %s; want cuda:0 by auto", record.device,
                record.chosen_by);
    double err = conv_error(&o);
    TEST_EXPECT(err < 1e-5, "conv after moving on: error %g", err);
    free_conv_operands(&o);
    locus_context_destroy(context);

    /* Automatic choice, wherever it starts, ends on a device offering it. */
    context = make_device_context("auto", "1");
    o = make_conv_operands(context);
    locus_record_init(&record);
    TEST_OK(locus_conv2d(context, NULL, &desc, o.X, o.F, o.Y, &record));
    TEST_EXPECT(strcmp(record.device, "cuda:0") == 0,
                "automatic winograd ran on %s", record.device);
    err = conv_error(&o);
    TEST_EXPECT(err < 1e-5, "automatic winograd: error %g", err);
    free_conv_operands(&o);
    locus_context_destroy(context);
}

static void test_unsupported_algorithm_where_named(void)
{
    /* A strict LOCUS_DEVICE keeps its device, and so does the caller. */
    locus_context *context = make_device_context("cpu", "1");
    conv_operands o = make_conv_operands(context);
    locus_conv2d_desc desc = winograd_desc();
    TEST_ERROR(locus_conv2d(context, NULL, &desc, o.X, o.F, o.Y, NULL),
               LOCUS_ERROR_NOT_SUPPORTED, "winograd is not offered");
    locus_device *cpu = NULL;
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    TEST_ERROR(locus_conv2d(context, cpu, &desc, o.X, o.F, o.Y, NULL),
               LOCUS_ERROR_NOT_SUPPORTED, "winograd is not offered");
    /* Nothing was written: the output is still the poison. */
    float y[CN * CK * CP * CQ];
    TEST_OK(locus_buffer_read(o.Y, 0, y, sizeof y));
    int poisoned = 0;
    for (int i = 0; i < CN * CK * CP * CQ; i++)
        poisoned += isnan(y[i]) != 0;
    TEST_EXPECT(poisoned == CN * CK * CP * CQ,
                "a refused conv wrote %d outputs",
                CN * CK * CP * CQ - poisoned);
    free_conv_operands(&o);
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
    test_unsupported_algorithm_moves_on();
    test_unsupported_algorithm_where_named();
    return test_exit_code();
}
