/* locus_buffer_wrap_device on the fake device module (whose device memory
 * is heap memory the test can look at, 256-byte aligned pointers being
 * "its"): ops there use the caller's memory in place, every other path
 * goes through the coherence rules, results are in the caller's memory
 * when a call returns, nothing is lost or freed at destroy, and each
 * error path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"

enum { M = 13, N = 7, K = 5 };

static locus_context *context;
static locus_device *cpu, *fake;

/* "Device memory" of the fake: 256-byte aligned heap memory, random. */
static float *device_array(size_t count)
{
    size_t bytes = (count * sizeof(float) + 255) / 256 * 256;
    float *memory = aligned_alloc(256, bytes);
    if (!memory)
        abort();
    for (size_t i = 0; i < count; i++)
        memory[i] = (float)test_rng_uniform(-1, 1);
    return memory;
}

static locus_buffer *wrap_device(float *memory, size_t count)
{
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_wrap_device(context, fake, memory,
                                     count * sizeof(float), &buffer));
    return buffer;
}

static void reference(const float *a, const float *b, double *c)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double sum = 0;
            for (size_t p = 0; p < K; p++)
                sum += (double)a[i * K + p] * b[p * N + j];
            c[i * N + j] = sum;
        }
}

static int matches(const float *got, const double *want, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-5 * (1 + fabs(want[i])))) {
            fprintf(stderr, "  element %zu: %g, want %g\n", i, got[i], want[i]);
            return 0;
        }
    return 1;
}

static locus_status gemm_on(locus_device *device, locus_buffer *a,
                            locus_buffer *b, locus_buffer *c,
                            locus_record *record)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M, desc.n = N, desc.k = K;
    locus_record_init(record);
    return locus_gemm(context, device, &desc, a, b, c, record);
}

static void test_errors(void)
{
    float *memory = device_array(64);
    locus_buffer *buffer = (locus_buffer *)memory; /* must become NULL */
    TEST_ERROR(locus_buffer_wrap_device(context, fake, memory, 256, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "out");
    TEST_ERROR(locus_buffer_wrap_device(NULL, fake, memory, 256, &buffer),
               LOCUS_ERROR_NULL_ARGUMENT, "context");
    TEST_EXPECT(buffer == NULL, "a failed wrap left *out set");
    TEST_ERROR(locus_buffer_wrap_device(context, NULL, memory, 256, &buffer),
               LOCUS_ERROR_NULL_ARGUMENT, "device");
    TEST_ERROR(locus_buffer_wrap_device(context, fake, NULL, 256, &buffer),
               LOCUS_ERROR_NULL_ARGUMENT, "memory");
    TEST_ERROR(locus_buffer_wrap_device(context, fake, memory, 0, &buffer),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    TEST_ERROR(locus_buffer_wrap_device(context, fake, (void *)UINTPTR_MAX, 2,
                                        &buffer),
               LOCUS_ERROR_SIZE_OVERFLOW, "address space");
    /* The backend's word: not its memory. */
    TEST_ERROR(
        locus_buffer_wrap_device(context, fake, memory + 1, 128, &buffer),
        LOCUS_ERROR_INVALID_ARGUMENT, "not memory of fake device");
    TEST_ERROR(locus_buffer_wrap_device(context, cpu, memory, 256, &buffer),
               LOCUS_ERROR_NOT_SUPPORTED, "locus_buffer_wrap");
    /* A device of another context. */
    locus_context *other = NULL;
    locus_device *other_fake = NULL;
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    if (!TEST_OK(locus_context_create(&options, &other)) &&
        !TEST_OK(locus_device_find(other, "cpu", &other_fake))) {
        TEST_ERROR(
            locus_buffer_wrap_device(context, other_fake, memory, 256, &buffer),
            LOCUS_ERROR_INVALID_ARGUMENT, "another context");
    }
    locus_context_destroy(other);
    TEST_EXPECT(buffer == NULL, "a failed wrap left *out set");
    free(memory);
}

/* The op on the device runs on the caller's memory: nothing moves, and C's
 * device memory holds the result when locus_gemm returns. */
static void test_in_place_on_the_device(void)
{
    float *a = device_array(M * K), *b = device_array(K * N);
    float *c = device_array(M * N);
    double want[M * N];
    reference(a, b, want);
    locus_buffer *A = wrap_device(a, M * K), *B = wrap_device(b, K * N);
    locus_buffer *C = wrap_device(c, M * N);
    locus_record record;
    TEST_OK(gemm_on(fake, A, B, C, &record));
    TEST_EXPECT(record.bytes_to_device == 0 && record.bytes_from_device == 0,
                "gemm on wrapped device memory moved %llu bytes in, %llu out",
                (unsigned long long)record.bytes_to_device,
                (unsigned long long)record.bytes_from_device);
    TEST_EXPECT(matches(c, want, M * N), "C's device memory after the gemm");
    /* The host copy is made on demand, from the device memory. */
    float host[M * N];
    TEST_OK(locus_buffer_read(C, 0, host, sizeof host));
    TEST_EXPECT(matches(host, want, M * N), "locus_buffer_read of C");
    /* A CPU op downloads once, then reads the current host copy. */
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = M * K;
    double sum = 0, got = NAN;
    for (size_t i = 0; i < M * K; i++)
        sum += a[i];
    locus_record_init(&record);
    TEST_OK(locus_reduce(context, cpu, &desc, A, &got, &record));
    TEST_EXPECT(fabs(got - sum) <= 1e-5 * (1 + fabs(sum)),
                "cpu sum of A %g, want %g", got, sum);
    TEST_EXPECT(record.bytes_from_device == M * K * sizeof(float),
                "cpu read of wrapped device memory downloaded %llu bytes",
                (unsigned long long)record.bytes_from_device);
    locus_record_init(&record);
    TEST_OK(locus_reduce(context, cpu, &desc, A, &got, &record));
    TEST_EXPECT(record.bytes_from_device == 0,
                "a current host copy was downloaded again");
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    locus_buffer_destroy(C);
    /* Destroy freed none of it: the memory is still ours, and intact. */
    TEST_EXPECT(matches(c, want, M * N), "C's memory after destroy");
    free(a);
    free(b);
    free(c);
}

/* Writes and write mappings reach the device memory before they return,
 * so the next op on the device needs no upload. */
static void test_host_writes_reach_the_device(void)
{
    float *a = device_array(M * K), *b = device_array(K * N);
    float *c = device_array(M * N);
    locus_buffer *A = wrap_device(a, M * K), *B = wrap_device(b, K * N);
    locus_buffer *C = wrap_device(c, M * N);
    float values[M * K];
    for (size_t i = 0; i < M * K; i++)
        values[i] = (float)test_rng_uniform(-2, 2);
    /* Partial: the rest keeps the device's data. */
    float kept = a[0];
    TEST_OK(locus_buffer_write(A, sizeof(float), values + 1,
                               (M * K - 1) * sizeof(float)));
    TEST_EXPECT(a[0] == kept && a[1] == values[1] &&
                    a[M * K - 1] == values[M * K - 1],
                "locus_buffer_write did not reach the device memory");
    float *mapped = NULL;
    TEST_OK(locus_buffer_map(B, LOCUS_MAP_READ_WRITE, (void **)&mapped));
    if (mapped) {
        TEST_EXPECT(memcmp(mapped, b, K * N * sizeof(float)) == 0,
                    "the mapping does not show the device memory");
        mapped[2] = 3.5f;
    }
    TEST_OK(locus_buffer_unmap(B));
    TEST_EXPECT(b[2] == 3.5f, "unmap did not copy the write to the device");
    double want[M * N];
    reference(a, b, want);
    locus_record record;
    TEST_OK(gemm_on(fake, A, B, C, &record));
    TEST_EXPECT(record.bytes_to_device == 0,
                "the device memory was current, yet %llu bytes went up",
                (unsigned long long)record.bytes_to_device);
    TEST_EXPECT(matches(c, want, M * N), "gemm after host writes");
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    locus_buffer_destroy(C);
    free(a);
    free(b);
    free(c);
}

/* A gemm on the CPU reading and writing wrapped device memory: inputs come
 * down, and C's result is in its device memory when the op returns. */
static void test_op_elsewhere_writes_back(void)
{
    float *a = device_array(M * K), *b = device_array(K * N);
    float *c = device_array(M * N);
    double want[M * N];
    reference(a, b, want);
    locus_buffer *A = wrap_device(a, M * K), *B = wrap_device(b, K * N);
    locus_buffer *C = wrap_device(c, M * N);
    locus_record record;
    TEST_OK(gemm_on(cpu, A, B, C, &record));
    TEST_EXPECT(matches(c, want, M * N),
                "C's device memory after a cpu gemm (not written back)");
    TEST_EXPECT(record.bytes_to_device == M * N * sizeof(float),
                "write-back counted %llu bytes, want %zu",
                (unsigned long long)record.bytes_to_device,
                M * N * sizeof(float));
    TEST_EXPECT(record.bytes_from_device == (M * K + K * N) * sizeof(float),
                "inputs downloaded %llu bytes",
                (unsigned long long)record.bytes_from_device);
    /* Overlap: two wraps of one device array are one array. */
    locus_buffer *C_again = wrap_device(c, M * N);
    TEST_ERROR(gemm_on(fake, A, C_again, C, &record),
               LOCUS_ERROR_INVALID_ARGUMENT, NULL);
    locus_buffer_destroy(C_again);
    /* No NUMA pages to query or move. */
    locus_page_report report;
    locus_page_report_init(&report);
    TEST_ERROR(locus_buffer_query_pages(C, &report), LOCUS_ERROR_NOT_SUPPORTED,
               "device memory");
    TEST_ERROR(locus_buffer_migrate(C, 0), LOCUS_ERROR_NOT_SUPPORTED,
               "device memory");
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    locus_buffer_destroy(C);
    free(a);
    free(b);
    free(c);
}

/* The write-back fails: the op says so, and destroy copies the result. */
static void test_failed_write_back_is_not_lost(void)
{
    float a[M * K], b[K * N];
    for (size_t i = 0; i < M * K; i++)
        a[i] = (float)test_rng_uniform(-1, 1);
    for (size_t i = 0; i < K * N; i++)
        b[i] = (float)test_rng_uniform(-1, 1);
    float *c = device_array(M * N);
    double want[M * N];
    reference(a, b, want);
    locus_buffer *A = NULL, *B = NULL;
    TEST_OK(locus_buffer_wrap(context, a, sizeof a, &A));
    TEST_OK(locus_buffer_wrap(context, b, sizeof b, &B));
    locus_buffer *C = wrap_device(c, M * N);
    setenv("LOCUS_TEST_FAKE_COPY_FAILS", "1", 1);
    locus_record record;
    TEST_ERROR(gemm_on(cpu, A, B, C, &record), LOCUS_ERROR_BACKEND,
               "fake upload");
    unsetenv("LOCUS_TEST_FAKE_COPY_FAILS");
    locus_buffer_destroy(C);
    TEST_EXPECT(matches(c, want, M * N),
                "the result was lost at destroy after a failed write-back");
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    free(c);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_wrap_device FAKE_MODULE_DIR [SEED]\n");
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
    test_errors();
    test_in_place_on_the_device();
    test_host_writes_reach_the_device();
    test_op_elsewhere_writes_back();
    test_failed_write_back_is_not_lost();
    locus_context_destroy(context);
    return test_exit_code();
}
