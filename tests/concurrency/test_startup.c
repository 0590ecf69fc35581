/* Contexts created from eight threads at once with every built backend
 * loaded (PoCL's OpenCL in CI, CUDA and NVIDIA's OpenCL on a GPU machine):
 * PoCL 3.1's set-up is not thread-safe, and before the runtime serialized
 * the backends' process-wide set-up (plugin.c) 5 runs in 6 crashed in its
 * first clGetDeviceInfo. Each round, released together by a barrier,
 * every thread creates a context, sums on each of its devices, checks the
 * sum, and destroys the context.
 *
 * Usage: test_startup PLUGIN_PATH [ROUNDS] */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

#include "test_util.h"

#define THREADS 8
#define COUNT 1000

/* PoCL's compiler (LLVM) gives the thread that builds a program an
 * alternate signal stack from malloc; AddressSanitizer's thread teardown
 * then munmaps it as if it were its own and aborts ("unable to unmap").
 * With use_sigaltstack=0 ASan leaves alternate stacks alone; ASAN_OPTIONS
 * still override this default. Without ASan the function is never called. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "use_sigaltstack=0";
}

static const char *plugin_path;
static int rounds = 10;
static pthread_barrier_t start;

static void sum_on_every_device(locus_context *context)
{
    float values[COUNT];
    double want = 0;
    for (int i = 0; i < COUNT; i++)
        want += values[i] = (float)(i % 5);
    locus_buffer *buffer = NULL;
    if (TEST_OK(locus_buffer_create(context, sizeof values, NULL, &buffer)) !=
        LOCUS_SUCCESS)
        return;
    TEST_OK(locus_buffer_write(buffer, 0, values, sizeof values));
    size_t devices = 0;
    TEST_OK(locus_device_count(context, &devices));
    for (size_t d = 0; d < devices; d++) {
        locus_device *device = NULL;
        if (TEST_OK(locus_device_get(context, d, &device)) != LOCUS_SUCCESS)
            continue;
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = COUNT;
        double sum = NAN;
        locus_record record;
        locus_record_init(&record);
        TEST_OK(locus_reduce(context, device, &desc, buffer, &sum, &record));
        TEST_EXPECT(sum == want, "sum on %s: %g, want %g", record.device, sum,
                    want);
    }
    locus_buffer_destroy(buffer);
}

static void *starter(void *arg)
{
    size_t *opencl_devices = arg;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&start);
        locus_context_options options;
        locus_context_options_init(&options);
        options.ignore_environment = 1;
        options.threads = "1";
        options.backends = "all";
        options.plugin_path = plugin_path;
        options.log = "error";
        locus_context *context = NULL;
        if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
            continue;
        locus_device *opencl = NULL;
        if (locus_device_find(context, "opencl", &opencl) == LOCUS_SUCCESS)
            (*opencl_devices)++;
        sum_on_every_device(context);
        locus_context_destroy(context);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_startup PLUGIN_PATH [ROUNDS]\n");
        return 1;
    }
    plugin_path = argv[1];
    if (argc > 2)
        rounds = atoi(argv[2]);
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t threads[THREADS];
    size_t opencl_found[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, starter, &opencl_found[i]);
    size_t with_opencl = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        with_opencl += opencl_found[i];
    }
    pthread_barrier_destroy(&start);
    /* The test is for the OpenCL set-up: a build with the module must have
     * found a device in every context (PoCL in CI), or it proved nothing. */
#ifdef LOCUS_TEST_EXPECT_OPENCL
    TEST_EXPECT(with_opencl == (size_t)THREADS * (size_t)rounds,
                "opencl found in %zu of %d contexts", with_opencl,
                THREADS * rounds);
#endif
    printf("%d rounds of %d threads, opencl in %zu contexts: %d failure(s)\n",
           rounds, THREADS, with_opencl, test_failures());
    return test_exit_code();
}
