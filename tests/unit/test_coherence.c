/* Coherence between host and device copies, on the fake device module
 * (device memory that is heap memory, transfers counted in the record):
 * data moves only when a copy is stale, and whatever ran last, every reader
 * sees the newest data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"

enum { M = 13, N = 7, K = 5 };

static locus_context *context;
static locus_device *cpu, *fake;

static locus_buffer *buffer_of(const float *values, size_t count)
{
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(context, count * sizeof(float), NULL, &buffer));
    if (buffer && values)
        TEST_OK(locus_buffer_write(buffer, 0, values, count * sizeof(float)));
    return buffer;
}

static double sum_on(locus_device *device, locus_buffer *buffer, size_t count,
                     locus_record *record)
{
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = count;
    double sum = NAN;
    locus_record_init(record);
    TEST_OK(locus_reduce(context, device, &desc, buffer, &sum, record));
    return sum;
}

static void fill(float *values, size_t count, double *sum)
{
    *sum = 0;
    for (size_t i = 0; i < count; i++) {
        values[i] = (float)test_rng_uniform(-1, 1);
        *sum += values[i];
    }
}

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-5 * (1 + fabs(want));
}

static void test_uploads_only_when_stale(void)
{
    float values[100];
    double want;
    fill(values, 100, &want);
    locus_buffer *x = buffer_of(values, 100);
    locus_record record;
    double got = sum_on(fake, x, 100, &record);
    TEST_EXPECT(close_to(got, want), "sum on device %g, want %g", got, want);
    TEST_EXPECT(record.bytes_to_device == sizeof values,
                "first use uploaded %llu bytes",
                (unsigned long long)record.bytes_to_device);
    sum_on(fake, x, 100, &record);
    TEST_EXPECT(record.bytes_to_device == 0,
                "a current device copy was uploaded again (%llu bytes)",
                (unsigned long long)record.bytes_to_device);
    /* A host write makes the device copy stale. */
    values[3] += 10;
    TEST_OK(
        locus_buffer_write(x, 3 * sizeof(float), &values[3], sizeof(float)));
    got = sum_on(fake, x, 100, &record);
    TEST_EXPECT(close_to(got, want + 10), "after a host write: %g, want %g",
                got, want + 10);
    TEST_EXPECT(record.bytes_to_device == sizeof values,
                "stale copy not uploaded (%llu bytes)",
                (unsigned long long)record.bytes_to_device);
    /* A CPU op reads without moving anything. */
    sum_on(cpu, x, 100, &record);
    TEST_EXPECT(record.bytes_from_device == 0 && record.bytes_to_device == 0,
                "a cpu read of a host-current buffer moved data");
    locus_buffer_destroy(x);
}

static void reference_gemm(const float *a, const float *b, double *c)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += (double)a[i * K + p] * b[p * N + j];
            c[i * N + j] = s;
        }
}

static void run_gemm(locus_device *device, locus_buffer *a, locus_buffer *b,
                     locus_buffer *c, locus_record *record)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M;
    desc.n = N;
    desc.k = K;
    locus_record_init(record);
    TEST_OK(locus_gemm(context, device, &desc, a, b, c, record));
}

static void test_device_results_reach_every_reader(void)
{
    float a[M * K], b[K * N], poison[M * N];
    double ignored, want[M * N], want_sum = 0;
    fill(a, M * K, &ignored);
    fill(b, K * N, &ignored);
    for (int i = 0; i < M * N; i++)
        poison[i] = NAN;
    reference_gemm(a, b, want);
    for (int i = 0; i < M * N; i++)
        want_sum += want[i];
    locus_buffer *A = buffer_of(a, M * K), *B = buffer_of(b, K * N);
    locus_buffer *C = buffer_of(poison, M * N);
    locus_record record;

    /* beta = 0 and C exactly sized: C is not uploaded. */
    run_gemm(fake, A, B, C, &record);
    TEST_EXPECT(record.bytes_to_device == sizeof a + sizeof b,
                "gemm uploaded %llu bytes, expected a and b only (%zu)",
                (unsigned long long)record.bytes_to_device,
                sizeof a + sizeof b);
    /* A CPU op on C must see the device's result, not the NaN host copy. */
    double got = sum_on(cpu, C, M * N, &record);
    TEST_EXPECT(close_to(got, want_sum), "cpu sum of device result %g, want %g",
                got, want_sum);
    TEST_EXPECT(record.bytes_from_device == sizeof poison,
                "the cpu read downloaded %llu bytes",
                (unsigned long long)record.bytes_from_device);

    /* Device writes again; read and map on the host get its data. */
    run_gemm(fake, A, B, C, &record);
    TEST_EXPECT(record.bytes_to_device == 0,
                "inputs already on the device were uploaded again");
    float out[M * N];
    TEST_OK(locus_buffer_read(C, 0, out, sizeof out));
    for (int i = 0; i < M * N; i++)
        if (!TEST_EXPECT(close_to(out[i], want[i]), "c[%d] = %g, want %g", i,
                         out[i], want[i]))
            break;
    /* CPU writes C; the device's copy is stale and a device read uploads. */
    run_gemm(cpu, A, B, C, &record);
    got = sum_on(fake, C, M * N, &record);
    TEST_EXPECT(close_to(got, want_sum) &&
                    record.bytes_to_device == sizeof poison,
                "device sum after a cpu write: %g (uploaded %llu)", got,
                (unsigned long long)record.bytes_to_device);
    /* Device writes, then a map for reading shows its data. */
    TEST_OK(locus_buffer_write(C, 0, poison, sizeof poison));
    run_gemm(fake, A, B, C, &record);
    float *host = NULL;
    TEST_OK(locus_buffer_map(C, LOCUS_MAP_READ, (void **)&host));
    if (host)
        TEST_EXPECT(close_to(host[M * N - 1], want[M * N - 1]),
                    "mapped c[last] = %g, want %g", host[M * N - 1],
                    want[M * N - 1]);
    TEST_OK(locus_buffer_unmap(C));
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    locus_buffer_destroy(C);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_coherence FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    test_seed(argc - 1, argv + 1);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = argv[1];
    if (TEST_OK(locus_context_create(&options, &context)) ||
        TEST_OK(locus_device_find(context, "cpu", &cpu)) ||
        TEST_OK(locus_device_find(context, "cuda:0", &fake)))
        return 1;
    test_uploads_only_when_stale();
    test_device_results_reach_every_reader();
    locus_context_destroy(context);
    return test_exit_code();
}
