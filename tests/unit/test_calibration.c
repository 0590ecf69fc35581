/* Calibration as an application sees it: measured at first use and cached
 * per host and device under $XDG_CACHE_HOME/locus/, read back by the next
 * process, remeasured when the file is damaged or the configuration
 * changes, and the figures behind each automatic choice in its record. */
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect_error.h"
#include "test_buffers.h"

static char cache_root[] = "/tmp/locus-calibration-XXXXXX";
static char cache_dir[256];

static locus_context *make_context(const char *threads, const char *mode)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.threads = threads;
    options.calibration = mode;
    options.log = "error";
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

static locus_calibration calibration_of(locus_context *context, int remeasure)
{
    locus_calibration c;
    locus_calibration_init(&c);
    locus_device *cpu = NULL;
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    if (cpu)
        TEST_OK(locus_device_calibration(cpu, remeasure, &c));
    return c;
}

static int count_files(char *first, size_t size)
{
    DIR *dir = opendir(cache_dir);
    if (!dir)
        return 0;
    int count = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        if (strncmp(e->d_name, "calibration-", 12) == 0 &&
            strstr(e->d_name, ".txt")) {
            if (count++ == 0 && first)
                snprintf(first, size, "%s/%s", cache_dir, e->d_name);
        }
    closedir(dir);
    return count;
}

static void expect_source(const locus_calibration *c, const char *want,
                          const char *when)
{
    TEST_EXPECT(strcmp(c->source, want) == 0, "%s: source '%s', want '%s'",
                when, c->source, want);
}

static void expect_plausible(const locus_calibration *c)
{
    TEST_EXPECT(c->launch_seconds > 0 && c->launch_seconds < 1, "launch %g s",
                c->launch_seconds);
    TEST_EXPECT(c->gemm_flops_per_second > 1e6 &&
                    c->conv_flops_per_second > 1e6 &&
                    c->reduce_bytes_per_second > 1e6,
                "rates gemm %g conv %g reduce %g", c->gemm_flops_per_second,
                c->conv_flops_per_second, c->reduce_bytes_per_second);
    TEST_EXPECT(c->upload_pageable_bytes_per_second == 0,
                "the cpu has no upload rate: %g",
                c->upload_pageable_bytes_per_second);
    /* Measured: whatever this machine's idle states cost, never negative
     * (a machine that does not sleep deeply may find none). */
    TEST_EXPECT(c->wake_seconds >= 0 && c->wake_seconds < 0.1,
                "cpu wake-up %g s", c->wake_seconds);
}

static void test_measured_then_cached(void)
{
    locus_context *context = make_context("2", NULL);
    locus_calibration first = calibration_of(context, 0);
    expect_source(&first, "measured", "first use");
    expect_plausible(&first);
    locus_context_destroy(context);
    TEST_EXPECT(count_files(NULL, 0) == 1, "%d cache files, want 1",
                count_files(NULL, 0));

    context = make_context("2", NULL);
    locus_calibration second = calibration_of(context, 0);
    expect_source(&second, "cached", "second process");
    TEST_EXPECT(second.gemm_flops_per_second == first.gemm_flops_per_second,
                "cached gemm rate %g, measured %g",
                second.gemm_flops_per_second, first.gemm_flops_per_second);
    TEST_EXPECT(second.wake_seconds == first.wake_seconds,
                "cached wake-up %g s, measured %g s", second.wake_seconds,
                first.wake_seconds);
    locus_calibration again = calibration_of(context, 1);
    expect_source(&again, "measured", "remeasure");
    locus_context_destroy(context);
}

static void test_damaged_file_is_remeasured(void)
{
    char path[512];
    TEST_EXPECT(count_files(path, sizeof path) >= 1, "no cache file");
    FILE *file = fopen(path, "r+");
    TEST_EXPECT(file != NULL, "open %s", path);
    if (!file)
        return;
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fclose(file);
    TEST_EXPECT(truncate(path, length / 2) == 0, "truncate %s", path);

    locus_context *context = make_context("2", NULL);
    locus_calibration c = calibration_of(context, 0);
    expect_source(&c, "measured", "after truncation");
    expect_plausible(&c);
    locus_context_destroy(context);
    context = make_context("2", NULL);
    c = calibration_of(context, 0);
    expect_source(&c, "cached", "after the rewrite");
    locus_context_destroy(context);
}

/* FNV-1a, as the cache file's checksum (calibration_file.c). */
static unsigned long long fnv1a(const char *text, size_t length)
{
    unsigned long long hash = 14695981039346656037ULL;
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)text[i];
        hash *= 1099511628211ULL;
    }
    return hash;
}

/* The file as the Locus before wake_seconds wrote it (format 3, no such
 * line, a good checksum) is not trusted: measured again and rewritten. */
static void test_file_before_wake_is_remeasured(void)
{
    char path[512], text[8192], old[8192];
    TEST_EXPECT(count_files(path, sizeof path) >= 1, "no cache file");
    FILE *file = fopen(path, "r");
    if (!TEST_EXPECT(file != NULL, "open %s", path))
        return;
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = '\0';
    char *wake = strstr(text, "wake_seconds ");
    char *checksum = strstr(text, "checksum ");
    if (!TEST_EXPECT(strncmp(text, "locus-calibration 7\n", 20) == 0 && wake &&
                         checksum,
                     "unexpected cache file:\n%s", text))
        return;
    /* The body without the wake line, under the old format line. */
    *checksum = '\0';
    int n =
        snprintf(old, sizeof old, "locus-calibration 3\n%.*s%s",
                 (int)(wake - text - 20), text + 20, strchr(wake, '\n') + 1);
    snprintf(old + n, sizeof old - (size_t)n, "checksum %016llx\n",
             fnv1a(old, (size_t)n));
    file = fopen(path, "w");
    if (!TEST_EXPECT(file != NULL, "rewrite %s", path))
        return;
    fputs(old, file);
    fclose(file);

    locus_context *context = make_context("2", NULL);
    locus_calibration c = calibration_of(context, 0);
    expect_source(&c, "measured", "a format 3 file");
    locus_context_destroy(context);
    file = fopen(path, "r");
    if (!TEST_EXPECT(file != NULL, "open %s again", path))
        return;
    length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = '\0';
    TEST_EXPECT(strncmp(text, "locus-calibration 7\n", 20) == 0 &&
                    strstr(text, "wake_seconds ") != NULL &&
                    strstr(text, "shallow_wake_seconds ") != NULL,
                "the old file was not rewritten:\n%s", text);
}

static void test_other_configuration_other_file(void)
{
    locus_context *context = make_context("1", NULL);
    locus_calibration c = calibration_of(context, 0);
    expect_source(&c, "measured", "one worker");
    locus_context_destroy(context);
    TEST_EXPECT(count_files(NULL, 0) == 2, "%d cache files, want 2",
                count_files(NULL, 0));
    context = make_context("1", "nominal");
    c = calibration_of(context, 0);
    expect_source(&c, "nominal", "LOCUS_CALIBRATION=nominal");
    TEST_EXPECT(c.wake_seconds > 0, "nominal cpu wake-up %g s", c.wake_seconds);
    locus_context_destroy(context);
}

static void test_auto_choice_is_recorded(void)
{
    locus_context *context = make_context("2", NULL);
    enum { M = 37, N = 29, K = 41 };
    float *a = test_random_floats(M * K), *b = test_random_floats(K * N);
    locus_buffer *A = test_upload_floats(context, a, M * K);
    locus_buffer *B = test_upload_floats(context, b, K * N);
    float c[M * N];
    test_fill_nan(c, M * N);
    locus_buffer *C = test_upload_floats(context, c, M * N);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M, desc.n = N, desc.k = K;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, NULL, &desc, A, B, C, &record));
    TEST_OK(locus_buffer_read(C, 0, c, sizeof c));
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0, scale = 0;
            for (int p = 0; p < K; p++) {
                want += (double)a[i * K + p] * b[p * N + j];
                scale += fabs((double)a[i * K + p] * b[p * N + j]);
            }
            double err = fabs(c[i * N + j] - want) / (scale + 1e-30);
            worst = err > worst || isnan(err) ? err : worst;
        }
    TEST_EXPECT(worst < 1e-5, "auto gemm relative error %g", worst);
    TEST_EXPECT(strcmp(record.chosen_by, "auto") == 0, "chosen_by '%s'",
                record.chosen_by);
    TEST_EXPECT(record.estimate_count >= 1 && record.estimated_seconds > 0,
                "%zu estimates, %g s", record.estimate_count,
                record.estimated_seconds);
    TEST_EXPECT(strcmp(record.estimates[0].device, record.device) == 0 &&
                    record.estimates[0].seconds == record.estimated_seconds,
                "cheapest estimate %s, ran on %s", record.estimates[0].device,
                record.device);
    char json[2048];
    locus_record_to_json(&record, json, sizeof json);
    TEST_EXPECT(strstr(json, "\"chosen_by\":\"auto\"") &&
                    strstr(json, "\"estimates\":[{\"device\":\"cpu\""),
                "record JSON %s", json);

    locus_device *cpu = NULL;
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, cpu, &desc, A, B, C, &record));
    TEST_EXPECT(strcmp(record.chosen_by, "caller") == 0 &&
                    record.estimate_count == 0,
                "given a device: chosen_by '%s', %zu estimates",
                record.chosen_by, record.estimate_count);
    locus_buffer_destroy(A);
    locus_buffer_destroy(B);
    locus_buffer_destroy(C);
    free(a);
    free(b);
    locus_context_destroy(context);
}

static void test_errors(void)
{
    locus_calibration c;
    locus_calibration_init(&c);
    TEST_ERROR(locus_device_calibration(NULL, 0, &c), LOCUS_ERROR_NULL_ARGUMENT,
               "device");
    locus_context *context = make_context("1", "nominal");
    locus_device *cpu = NULL;
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    TEST_ERROR(locus_device_calibration(cpu, 0, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "out");
    c.struct_size = 0;
    TEST_ERROR(locus_device_calibration(cpu, 0, &c),
               LOCUS_ERROR_INVALID_ARGUMENT, "locus_calibration_init");
    /* A caller built before wake_seconds: its part, nothing past it. */
    locus_calibration_init(&c);
    c.struct_size = offsetof(locus_calibration, wake_seconds);
    c.wake_seconds = -1;
    TEST_OK(locus_device_calibration(cpu, 0, &c));
    TEST_EXPECT(c.wake_seconds == -1 && c.launch_seconds > 0 &&
                    c.struct_size == offsetof(locus_calibration, wake_seconds),
                "older struct: wake %g, launch %g, struct_size %zu",
                c.wake_seconds, c.launch_seconds, c.struct_size);
    locus_context_destroy(context);
}

/* A cache directory that cannot be made: measured anyway, nothing kept. */
static void test_unwritable_cache(void)
{
    char file[300];
    snprintf(file, sizeof file, "%s/not-a-directory", cache_root);
    FILE *f = fopen(file, "w");
    if (f)
        fclose(f);
    setenv("XDG_CACHE_HOME", file, 1);
    locus_context *context = make_context("1", NULL);
    locus_calibration c = calibration_of(context, 0);
    expect_source(&c, "measured", "no cache directory");
    locus_context_destroy(context);
    setenv("XDG_CACHE_HOME", cache_root, 1);
    unlink(file);
}

static void remove_cache(void)
{
    DIR *dir = opendir(cache_dir);
    if (dir) {
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
            if (e->d_name[0] != '.')
                unlink(path);
        }
        closedir(dir);
    }
    rmdir(cache_dir);
    rmdir(cache_root);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    if (!mkdtemp(cache_root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/locus", cache_root);
    setenv("XDG_CACHE_HOME", cache_root, 1);
    test_measured_then_cached();
    test_damaged_file_is_remeasured();
    test_file_before_wake_is_remeasured();
    test_other_configuration_other_file();
    test_auto_choice_is_recorded();
    test_errors();
    test_unwritable_cache();
    remove_cache();
    return test_exit_code();
}
