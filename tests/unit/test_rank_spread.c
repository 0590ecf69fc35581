/* Under an MPI launcher, local ranks that would all choose the same kind of
 * device spread over the identical devices by local rank; without a
 * launcher every op goes to the first; and data already on one device keeps
 * an op there whatever the rank. On two identical fake devices. Also: the
 * scheduler's remembered choice is only reused for the same question (the
 * same op on inputs where they were), never after the data moved. */
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"
#include "test_buffers.h"

enum { SIZE = 96 };

static const char *module_dir;

static const char *device_of_auto_gemm(locus_device *preload)
{
    static char device[32];
    locus_context_options options;
    locus_context_options_init(&options);
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    options.calibration = "nominal";
    options.threads = "1";
    options.device = "auto";
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(&options, &context)))
        return "";
    float *values = test_random_floats(SIZE * SIZE);
    locus_buffer *a = test_upload_floats(context, values, SIZE * SIZE);
    locus_buffer *b = test_upload_floats(context, values, SIZE * SIZE);
    locus_buffer *c = test_upload_floats(context, values, SIZE * SIZE);
    if (preload) {
        /* The same ordinal in this context: put A and B on it first. */
        locus_device_info info;
        locus_device_info_init(&info);
        locus_device *there = NULL;
        TEST_OK(locus_device_get_info(preload, &info));
        TEST_OK(locus_device_find(context, info.selector, &there));
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = SIZE * SIZE;
        double sum;
        TEST_OK(locus_reduce(context, there, &desc, a, &sum, NULL));
        TEST_OK(locus_reduce(context, there, &desc, b, &sum, NULL));
    }
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = SIZE;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, NULL, &desc, a, b, c, &record));
    snprintf(device, sizeof device, "%s", record.device);
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    locus_buffer_destroy(c);
    free(values);
    locus_context_destroy(context);
    return device;
}

static void expect_device(const char *got, const char *want, const char *when)
{
    TEST_EXPECT(strcmp(got, want) == 0, "%s: auto gemm ran on %s, want %s",
                when, got, want);
}

static const char *auto_gemm_on(locus_context *context, locus_buffer *a,
                                locus_buffer *b, locus_buffer *c, size_t n)
{
    static char device[32];
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = n;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, NULL, &desc, a, b, c, &record));
    snprintf(device, sizeof device, "%s", record.device);
    return device;
}

/* A tiny gemm goes to the CPU while its inputs are on the host, to the
 * device once they are there only, and back to the CPU when they return:
 * the same op, three answers, whatever was remembered. */
static void test_remembered_choice_follows_the_data(void)
{
    enum { N = 8 };
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    options.calibration = "nominal";
    options.threads = "1";
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(&options, &context)))
        return;
    float *values = test_random_floats(N * N);
    locus_buffer *a = test_upload_floats(context, values, N * N);
    locus_buffer *b = test_upload_floats(context, values, N * N);
    locus_buffer *c = test_upload_floats(context, values, N * N);
    locus_buffer *a2 = test_upload_floats(context, values, N * N);
    locus_buffer *b2 = test_upload_floats(context, values, N * N);
    for (int i = 0; i < 2; i++)
        expect_device(auto_gemm_on(context, a, b, c, N), "cpu",
                      "inputs on the host");
    /* a and b written on the fake device: current there only. */
    locus_device *fake = NULL;
    TEST_OK(locus_device_find(context, "cuda:0", &fake));
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = N;
    TEST_OK(locus_gemm(context, fake, &desc, b2, c, a, NULL));
    TEST_OK(locus_gemm(context, fake, &desc, a2, c, b, NULL));
    for (int i = 0; i < 2; i++)
        expect_device(auto_gemm_on(context, a, b, c, N), "cuda:0",
                      "inputs on the device only");
    TEST_OK(locus_buffer_write(a, 0, values, N * N * sizeof(float)));
    TEST_OK(locus_buffer_write(b, 0, values, N * N * sizeof(float)));
    expect_device(auto_gemm_on(context, a, b, c, N), "cpu",
                  "inputs back on the host");
    locus_buffer *all[] = {a, b, c, a2, b2};
    for (size_t i = 0; i < 5; i++)
        locus_buffer_destroy(all[i]);
    free(values);
    locus_context_destroy(context);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_rank_spread FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    module_dir = argv[1];
    test_seed(argc - 1, argv + 1);
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    test_remembered_choice_follows_the_data();
    setenv("LOCUS_TEST_FAKE_DEVICE_COUNT", "2", 1);
    expect_device(device_of_auto_gemm(NULL), "cuda:0", "no launcher");
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    expect_device(device_of_auto_gemm(NULL), "cuda:0", "local rank 0 of 2");
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    expect_device(device_of_auto_gemm(NULL), "cuda:1", "local rank 1 of 2");
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
    expect_device(device_of_auto_gemm(NULL), "cuda:0", "local rank 2 of 3");

    /* Data on cuda:0 keeps rank 1's op there. */
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    locus_context_options options;
    locus_context_options_init(&options);
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    locus_context *probe = NULL;
    locus_device *first = NULL;
    if (!TEST_OK(locus_context_create(&options, &probe)) &&
        !TEST_OK(locus_device_find(probe, "cuda:0", &first)))
        expect_device(device_of_auto_gemm(first), "cuda:0",
                      "rank 1 with its inputs on cuda:0");
    locus_context_destroy(probe);
    return test_exit_code();
}
