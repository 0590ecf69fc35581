/* Buffers: write/read/map round trips, partial writes, wrapped caller
 * memory, records appended to LOCUS_RECORD, and several contexts at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect_error.h"

static locus_context *make_context(const char *record_path)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.record = record_path;
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

static void test_round_trip(locus_context *context)
{
    enum { N = 1000 };
    float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)test_rng_uniform(-1, 1);
    locus_buffer *buffer = NULL;
    if (TEST_OK(locus_buffer_create(context, sizeof in, NULL, &buffer)))
        return;
    size_t bytes = 0;
    TEST_OK(locus_buffer_size(buffer, &bytes));
    TEST_EXPECT(bytes == sizeof in, "size %zu", bytes);
    TEST_OK(locus_buffer_write(buffer, 0, in, sizeof in));
    memset(out, 0xff, sizeof out);
    TEST_OK(locus_buffer_read(buffer, 0, out, sizeof out));
    TEST_EXPECT(memcmp(in, out, sizeof in) == 0, "read differs from write");

    /* A partial write keeps the rest. */
    float patch[3] = {7, 8, 9};
    TEST_OK(
        locus_buffer_write(buffer, 10 * sizeof(float), patch, sizeof patch));
    TEST_OK(locus_buffer_read(buffer, 0, out, sizeof out));
    for (int i = 0; i < N; i++) {
        float want = i >= 10 && i < 13 ? patch[i - 10] : in[i];
        if (!TEST_EXPECT(out[i] == want, "element %d is %g, want %g", i, out[i],
                         want))
            break;
    }
    /* Reads at an offset. */
    float tail[2];
    TEST_OK(
        locus_buffer_read(buffer, (N - 2) * sizeof(float), tail, sizeof tail));
    TEST_EXPECT(tail[0] == in[N - 2] && tail[1] == in[N - 1],
                "offset read got %g %g", tail[0], tail[1]);

    /* Mapping shows the same bytes, and a write mapping changes them. */
    float *host = NULL;
    TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ_WRITE, (void **)&host));
    if (host) {
        TEST_EXPECT(host[11] == 8, "mapped element 11 is %g", host[11]);
        host[0] = 42;
        TEST_OK(locus_buffer_unmap(buffer));
    }
    TEST_OK(locus_buffer_read(buffer, 0, out, sizeof(float)));
    TEST_EXPECT(out[0] == 42, "write through map lost: %g", out[0]);
    locus_buffer_destroy(buffer);
}

static void test_wrap(locus_context *context)
{
    enum { N = 257 };
    float *memory = malloc(N * sizeof(float));
    double expected = 0;
    for (int i = 0; i < N; i++) {
        memory[i] = (float)test_rng_uniform(0, 1);
        expected += memory[i];
    }
    locus_buffer *buffer = NULL;
    if (TEST_OK(locus_buffer_wrap(context, memory, N * sizeof(float),
                                  &buffer)) == LOCUS_SUCCESS) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = N;
        double sum = 0;
        TEST_OK(locus_reduce(context, NULL, &desc, buffer, &sum, NULL));
        TEST_EXPECT(fabs(sum - expected) <= 1e-6 * expected,
                    "sum of wrapped memory %.9g, expected %.9g", sum, expected);
        float *host = NULL;
        TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ, (void **)&host));
        TEST_EXPECT(host == memory, "a wrapped buffer maps to %p, not %p",
                    (void *)host, (void *)memory);
        TEST_OK(locus_buffer_unmap(buffer));
        locus_buffer_destroy(buffer);
    }
    /* The caller's memory is still theirs: writing it must not fault. */
    memory[N - 1] = 1;
    free(memory);
}

static void test_record_file(void)
{
    char path[] = "/tmp/locus-record-XXXXXX";
    int fd = mkstemp(path);
    if (!TEST_EXPECT(fd >= 0, "mkstemp"))
        return;
    close(fd);
    locus_context *context = make_context(path);
    if (!context)
        return;
    locus_buffer *buffer = NULL;
    float values[5] = {3, -1, 4, 1, -5};
    TEST_OK(locus_buffer_create(context, sizeof values, NULL, &buffer));
    TEST_OK(locus_buffer_write(buffer, 0, values, sizeof values));
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = 5;
    desc.op = LOCUS_REDUCE_MIN;
    double result = 0;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_reduce(context, NULL, &desc, buffer, &result, &record));
    TEST_EXPECT(result == -5, "min is %g", result);
    desc.op = LOCUS_REDUCE_MAX;
    TEST_OK(locus_reduce(context, NULL, &desc, buffer, &result, NULL));
    TEST_EXPECT(result == 4, "max is %g", result);
    TEST_EXPECT(strcmp(record.op, "reduce") == 0 &&
                    strcmp(record.device, "cpu") == 0 &&
                    record.bytes == sizeof values && record.seconds > 0 &&
                    record.algorithm[0] != '\0',
                "record op '%s' device '%s' bytes %llu seconds %g "
                "algorithm '%s'",
                record.op, record.device, (unsigned long long)record.bytes,
                record.seconds, record.algorithm);
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);

    FILE *file = fopen(path, "r");
    char line[1024];
    int lines = 0;
    while (file && fgets(line, sizeof line, file)) {
        lines++;
        /* The line's own header (timestamp, pid, rank) comes first:
         * test_record_line.c checks it. */
        TEST_EXPECT(line[0] == '{' && strstr(line, ",\"op\":\"reduce\"") &&
                        strstr(line, "\"provenance\":") &&
                        line[strlen(line) - 2] == '}',
                    "record line '%s'", line);
    }
    TEST_EXPECT(lines == 2, "%d record lines, expected 2", lines);
    if (file)
        fclose(file);
    unlink(path);
}

static void test_record_json_truncates(void)
{
    locus_record record;
    locus_record_init(&record);
    strcpy(record.op, "gemm");
    strcpy(record.algorithm, "a\"b");
    char small[16];
    size_t needed = locus_record_to_json(&record, small, sizeof small);
    TEST_EXPECT(needed > sizeof small && strlen(small) == sizeof small - 1,
                "needed %zu, wrote '%s'", needed, small);
    char full[1024];
    locus_record_to_json(&record, full, sizeof full);
    TEST_EXPECT(strstr(full, "\"algorithm\":\"a\\\"b\"") != NULL,
                "quote not escaped in '%s'", full);
}

static void test_several_contexts(void)
{
    /* Create and destroy repeat, and contexts coexist. */
    for (int round = 0; round < 3; round++) {
        locus_context *first = make_context(NULL);
        locus_context *second = make_context(NULL);
        if (first && second)
            test_round_trip(second);
        locus_context_destroy(first);
        locus_context_destroy(second);
    }
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    locus_context *context = make_context(NULL);
    if (!context)
        return 1;
    test_round_trip(context);
    test_wrap(context);
    locus_context_destroy(context);
    test_record_file();
    test_record_json_truncates();
    test_several_contexts();
    return test_exit_code();
}
