/* The multi-device gemm: results against float64 on fresh random data for
 * odd shapes, every transpose, leading dimensions above the minimum and
 * beta 0 or not, under even, uneven, skewed and degenerate weights, on the
 * CPU and the fake device, and on PoCL's opencl:0 when it is there; the
 * row plan, which counts two views of one device (the same PCI address)
 * once; what the record says; a device failing leaves C as it was; a
 * device that holds B already uses it; every error path.
 *
 * usage: test_gemm_split MODULES_DIR OPENCL_MODULE_DIR [SEED] */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"
#include "gemm_case.h"
#include "test_buffers.h"

/* Under valgrind the PoCL part is skipped: loading PoCL's libraries trips
 * false reports in glibc's loader (strncmp over-reads in is_dst) that the
 * unit suite's valgrind run would count as errors. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#endif
#endif
#ifndef UNDER_VALGRIND
#define UNDER_VALGRIND() 0
#endif

/* PoCL keeps a few bytes per kernel build in its program cache and never
 * frees them (pocl_check_kernel_disk_cache): not ours, and outside what
 * this test checks. LeakSanitizer reads this hook in sanitizer builds. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libpocl.so\n";
}

static locus_context *context;      /* cpu, fake (cuda:0), reduce-only */
static locus_context *pocl_context; /* cpu, fake, PoCL opencl:0 if any */
static locus_context *other_context;
static locus_device *cpu, *fake, *reduce_only;

/* C read back against alpha op(A) op(B) + beta C in float64. */
static int case_check(const gemm_case *s, const char *what)
{
    float *got = malloc(s->c_count * sizeof *got);
    int ok =
        got &&
        !TEST_OK(locus_buffer_read(s->bc, 0, got, s->c_count * sizeof *got)) &&
        gemm_case_check(s, got, what);
    free(got);
    return ok;
}

/* C is exactly what it was before a failed call. */
static void expect_c_unchanged(const gemm_case *s, const char *what)
{
    float *got = malloc(s->c_count * sizeof *got);
    if (got && TEST_OK(locus_buffer_read(
                   s->bc, 0, got, s->c_count * sizeof *got)) == LOCUS_SUCCESS)
        TEST_EXPECT(memcmp(got, s->c, s->c_count * sizeof *got) == 0,
                    "%s: c changed although the split failed", what);
    free(got);
}

static const char *selector_of(locus_device *device)
{
    static locus_device_info info;
    locus_device_info_init(&info);
    if (TEST_OK(locus_device_get_info(device, &info)))
        return "?";
    return info.selector;
}

/* One split, checked: the plan (locus_gemm_split_rows, asked first: the
 * call itself moves data, which the cost model weighs) adds up to m, the
 * result, and the record's device (the devices given rows, joined by '+'),
 * algorithm and flops. */
static void run_split(locus_context *ctx, locus_device *const *devices,
                      size_t count, const double *weights, gemm_case *s,
                      const char *what)
{
    size_t rows[8];
    char want[256] = "";
    if (TEST_OK(locus_gemm_split_rows(ctx, devices, count, weights, &s->desc,
                                      s->ba, s->bb, s->bc, rows)) !=
        LOCUS_SUCCESS)
        return;
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        total += rows[i];
        if (rows[i] > 0)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s",
                     want[0] ? "+" : "", selector_of(devices[i]));
    }
    TEST_EXPECT(total == s->desc.m, "%s: the plan has %zu rows of %zu", what,
                total, s->desc.m);
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_gemm_split(ctx, devices, count, weights, &s->desc, s->ba,
                                 s->bb, s->bc, &record)) != LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        return;
    }
    case_check(s, what);
    TEST_EXPECT(strcmp(record.device, want) == 0,
                "%s: record device '%s', want '%s'", what, record.device, want);
    /* A plan with one device's rows is that device's own gemm, recorded
     * with its kernel. */
    const bool split = strchr(want, '+') != NULL;
    TEST_EXPECT(strcmp(record.op, "gemm") == 0 &&
                    (strcmp(record.algorithm, "split") == 0) == split,
                "%s: record op '%s', algorithm '%s'", what, record.op,
                record.algorithm);
    double flops =
        2.0 * (double)s->desc.m * (double)s->desc.n * (double)s->desc.k;
    TEST_EXPECT(record.flops == flops && record.seconds > 0,
                "%s: record flops %g (want %g), seconds %g", what, record.flops,
                flops, record.seconds);
}

/* Odd shapes, all four transposes, tight and padded leading dimensions,
 * beta 0 and not, under several weightings, on the given devices. */
static void test_shapes(locus_context *ctx, locus_device *const *devices,
                        size_t count, const char *name)
{
    printf("shapes on %s\n", name);
    static const size_t shapes[][3] = {
        {1, 1, 1}, {7, 33, 13}, {33, 1, 7}, {2, 65, 1}, {61, 17, 40}};
    double even[3] = {1, 1, 1}, uneven[3] = {5, 1, 2};
    double zero_first[3] = {0, 1, 1}, zero_last[3] = {1, 1, 0};
    double skewed[3] = {1, 1e-7, 1e-9}, skewed_back[3] = {1e-9, 1e-7, 1};
    const double *weightings[] = {NULL,      even,   uneven,     zero_first,
                                  zero_last, skewed, skewed_back};
    size_t n_shapes = sizeof shapes / sizeof shapes[0];
    size_t n_weightings = sizeof weightings / sizeof weightings[0];
    for (size_t sh = 0; sh < n_shapes; sh++)
        for (int t = 0; t < 4; t++) {
            size_t pad = (sh + (size_t)t) % 3 == 0 ? 0 : 3;
            double beta = t % 2 ? 0.0 : -0.5;
            const double *weights =
                weightings[(sh * 4 + (size_t)t) % n_weightings];
            /* Too few devices for this weighting to give anyone rows. */
            double given = 0;
            for (size_t i = 0; weights && i < count; i++)
                given += weights[i];
            if (given == 0)
                weights = NULL;
            gemm_case s;
            char what[160];
            snprintf(what, sizeof what,
                     "%s: %zux%zux%zu trans %d%d pad %zu beta %g weighting "
                     "%zu",
                     name, shapes[sh][0], shapes[sh][1], shapes[sh][2], t / 2,
                     t % 2, pad, beta, (sh * 4 + (size_t)t) % n_weightings);
            if (gemm_case_make(&s, ctx, shapes[sh][0], shapes[sh][1],
                               shapes[sh][2], t / 2, t % 2, pad, 1.25, beta))
                run_split(ctx, devices, count, weights, &s, what);
            gemm_case_free(&s);
        }
}

/* Every weighting on one shape that splits into many small blocks. */
static void test_weightings(locus_context *ctx, locus_device *const *devices,
                            size_t count, const char *name)
{
    printf("weightings on %s\n", name);
    const double weightings[][3] = {
        {1, 1, 1}, {1, 2, 3},           {0, 0, 1},         {0, 1, 0},
        {1, 0, 0}, {1e-300, 1, 1e-300}, {1e300, 1e300, 1}, {0.1, 0.7, 0.2}};
    for (size_t w = 0; w < sizeof weightings / sizeof weightings[0]; w++) {
        double given = 0;
        for (size_t i = 0; i < count; i++)
            given += weightings[w][i];
        if (given == 0)
            continue; /* no device of these would get rows */
        gemm_case s;
        char what[96];
        snprintf(what, sizeof what, "%s: weights %g %g %g", name,
                 weightings[w][0], weightings[w][1], weightings[w][2]);
        if (gemm_case_make(&s, ctx, 11, 9, 6, (int)(w % 2), (int)(w / 2 % 2),
                           w % 3, -1.0, w % 2 ? 0.0 : 2.0))
            run_split(ctx, devices, count, weightings[w], &s, what);
        gemm_case_free(&s);
    }
}

/* The row plan: cumulative shares rounded, summing to m, 0 for weight 0;
 * by default the cost model's, which weighs where the data is. */
static void test_rows(void)
{
    printf("row plan\n");
    locus_device *two[] = {cpu, fake};
    size_t rows[2] = {99, 99};
    struct {
        double weights[2];
        size_t m, want[2];
    } cases[] = {
        {{1, 3}, 8, {2, 6}},      {{0, 1}, 5, {0, 5}},
        {{1, 0}, 5, {5, 0}},      {{1, 1e-12}, 100, {100, 0}},
        {{1, 1}, 1, {1, 0}},      {{1, 1}, 7, {4, 3}},
        {{2.5, 2.5}, 10, {5, 5}}, {{1e308, 1e308}, 3, {2, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gemm_case s;
        if (gemm_case_make(&s, context, cases[i].m, 2, 2, 0, 0, 0, 1, 0) &&
            TEST_OK(locus_gemm_split_rows(context, two, 2, cases[i].weights,
                                          &s.desc, s.ba, s.bb, s.bc, rows)) ==
                LOCUS_SUCCESS)
            TEST_EXPECT(rows[0] == cases[i].want[0] &&
                            rows[1] == cases[i].want[1],
                        "weights %g %g over %zu rows: %zu %zu, want %zu %zu",
                        cases[i].weights[0], cases[i].weights[1], cases[i].m,
                        rows[0], rows[1], cases[i].want[0], cases[i].want[1]);
        gemm_case_free(&s);
    }
    /* The cost model's plan: every row placed, and a device that comes to
     * hold B gets no fewer rows (it no longer needs to receive B). */
    gemm_case s;
    if (gemm_case_make(&s, context, 300, 300, 300, 0, 0, 0, 1, 0)) {
        size_t before[2] = {0, 0};
        TEST_OK(locus_gemm_split_rows(context, two, 2, NULL, &s.desc, s.ba,
                                      s.bb, s.bc, before));
        TEST_EXPECT(before[0] + before[1] == 300,
                    "default plan of 300 rows: %zu+%zu", before[0], before[1]);
        /* A reduce on the fake device leaves a copy of B there. */
        locus_reduce_desc reduce;
        locus_reduce_desc_init(&reduce);
        reduce.count = 300 * 300;
        double sum;
        TEST_OK(locus_reduce(context, fake, &reduce, s.bb, &sum, NULL));
        TEST_OK(locus_gemm_split_rows(context, two, 2, NULL, &s.desc, s.ba,
                                      s.bb, s.bc, rows));
        TEST_EXPECT(rows[0] + rows[1] == 300 && rows[1] >= before[1],
                    "with b on the fake device: %zu+%zu rows, before %zu+%zu",
                    rows[0], rows[1], before[0], before[1]);
        printf("cost model plan of 300 rows: %zu+%zu, with b on the fake "
               "device %zu+%zu\n",
               before[0], before[1], rows[0], rows[1]);
    }
    gemm_case_free(&s);
}

/* A device that already holds a current copy of B reads it there: only
 * its rows of A travel (and only they: the host computes the others). */
static void test_b_already_on_device(void)
{
    printf("b already on the device\n");
    gemm_case s;
    if (!gemm_case_make(&s, context, 12, 10, 8, 0, 0, 0, 1.0, 0.0)) {
        gemm_case_free(&s);
        return;
    }
    locus_device *devices[] = {cpu, fake};
    double weights[] = {1, 3};
    size_t rows[2] = {0, 0};
    TEST_OK(locus_gemm_split_rows(context, devices, 2, weights, &s.desc, s.ba,
                                  s.bb, s.bc, rows));
    TEST_EXPECT(rows[0] > 0 && rows[1] > 0, "rows %zu+%zu", rows[0], rows[1]);
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba, s.bb,
                             s.bc, &record));
    uint64_t a_bytes = rows[1] * 8 * sizeof(float);
    uint64_t b_bytes = 8 * 10 * sizeof(float);
    TEST_EXPECT(record.bytes_to_device == a_bytes + b_bytes &&
                    record.bytes_from_device == rows[1] * 10 * sizeof(float),
                "b on the host: %llu bytes up, %llu down",
                (unsigned long long)record.bytes_to_device,
                (unsigned long long)record.bytes_from_device);
    /* A plain gemm on the fake device leaves a copy of B there. */
    locus_buffer *scratch = NULL;
    TEST_OK(
        locus_buffer_create(context, 12 * 10 * sizeof(float), NULL, &scratch));
    if (scratch)
        TEST_OK(locus_gemm(context, fake, &s.desc, s.ba, s.bb, scratch, NULL));
    locus_buffer_destroy(scratch);
    locus_record_init(&record);
    TEST_OK(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba, s.bb,
                             s.bc, &record));
    TEST_EXPECT(record.bytes_to_device == a_bytes,
                "b on the device: %llu bytes up, want %llu (a alone)",
                (unsigned long long)record.bytes_to_device,
                (unsigned long long)a_bytes);
    case_check(&s, "b already on the device");
    gemm_case_free(&s);
}

/* A device that fails (out of memory, a failed copy) fails the call with
 * a detail naming it, and C keeps its previous contents, whether the
 * other block was on the host or not. */
static void test_device_failure(void)
{
    printf("a device failing\n");
    locus_device *devices[] = {cpu, fake};
    double weights[] = {1, 1};
    static const char *const variables[] = {"LOCUS_TEST_FAKE_ALLOC_FAILS",
                                            "LOCUS_TEST_FAKE_COPY_FAILS"};
    static const locus_status expected[] = {LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
                                            LOCUS_ERROR_BACKEND};
    for (int v = 0; v < 2; v++)
        for (int beta = 0; beta < 2; beta++) {
            gemm_case s;
            if (gemm_case_make(&s, context, 9, 7, 5, beta, 0, 2, 1.0, beta)) {
                setenv(variables[v], "1", 1);
                TEST_ERROR(locus_gemm_split(context, devices, 2, weights,
                                            &s.desc, s.ba, s.bb, s.bc, NULL),
                           expected[v], "cuda:0 (rows 5 to 8 of 9) failed");
                unsetenv(variables[v]);
                expect_c_unchanged(&s, variables[v]);
                /* And the next call, the device healthy, succeeds. */
                run_split(context, devices, 2, weights, &s, "after a failure");
            }
            gemm_case_free(&s);
        }
}

static void test_errors(void)
{
    printf("error paths\n");
    gemm_case s;
    if (!gemm_case_make(&s, context, 4, 3, 2, 0, 0, 0, 1.0, 0.0)) {
        gemm_case_free(&s);
        return;
    }
    locus_device *foreign = NULL;
    TEST_OK(locus_device_find(other_context, "cpu", &foreign));
    locus_device *devices[] = {cpu, fake};
    double weights[] = {1, 1};
    TEST_ERROR(locus_gemm_split(NULL, devices, 2, weights, &s.desc, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "context");
    TEST_ERROR(locus_gemm_split(context, NULL, 2, weights, &s.desc, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "devices is NULL");
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, NULL, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "desc");
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, NULL,
                                s.bb, s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "a is NULL");
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                NULL, s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "b is NULL");
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                s.bb, NULL, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "c is NULL");
    TEST_ERROR(locus_gemm_split(context, devices, 0, weights, &s.desc, s.ba,
                                s.bb, s.bc, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "device_count is 0");
    locus_device *with_null[] = {cpu, NULL};
    TEST_ERROR(locus_gemm_split(context, with_null, 2, weights, &s.desc, s.ba,
                                s.bb, s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "devices[1] is NULL");
    locus_device *with_foreign[] = {cpu, foreign};
    TEST_ERROR(locus_gemm_split(context, with_foreign, 2, weights, &s.desc,
                                s.ba, s.bb, s.bc, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT,
               "devices[1] (cpu) belongs to another context");
    locus_device *twice[] = {fake, fake};
    TEST_ERROR(locus_gemm_split(context, twice, 2, weights, &s.desc, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "both cuda:0");
    locus_device *no_gemm[] = {cpu, reduce_only};
    TEST_ERROR(locus_gemm_split(context, no_gemm, 2, weights, &s.desc, s.ba,
                                s.bb, s.bc, NULL),
               LOCUS_ERROR_NOT_SUPPORTED,
               "gemm is not supported on devices[1], opencl:0");
    const double bad_weights[][2] = {{-1, 1}, {1, NAN}, {INFINITY, 1}, {0, 0}};
    const char *const fragments[] = {"weights[0] = -1", "weights[1] = nan",
                                     "weights[0] = inf", "all 2 weights are 0"};
    for (int i = 0; i < 4; i++) {
        TEST_ERROR(locus_gemm_split(context, devices, 2, bad_weights[i],
                                    &s.desc, s.ba, s.bb, s.bc, NULL),
                   LOCUS_ERROR_INVALID_ARGUMENT, fragments[i]);
        size_t rows[2];
        TEST_ERROR(locus_gemm_split_rows(context, devices, 2, bad_weights[i],
                                         &s.desc, s.ba, s.bb, s.bc, rows),
                   LOCUS_ERROR_INVALID_ARGUMENT, fragments[i]);
    }
    /* What locus_gemm checks, checked the same way: m = 0 is BLAS's quick
     * return, k = 0 still needs all of C. */
    locus_gemm_desc bad = s.desc;
    bad.m = 0;
    TEST_OK(locus_gemm_split(context, devices, 2, weights, &bad, s.ba, s.bb,
                             s.bc, NULL));
    bad = s.desc;
    bad.k = 0;
    bad.ldc = s.desc.ldc * 2; /* its last row ends past c's buffer */
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &bad, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "c needs");
    bad = s.desc;
    bad.m = 5;
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &bad, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "a needs");
    bad = s.desc;
    bad.struct_size = 0;
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &bad, s.ba, s.bb,
                                s.bc, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "locus_gemm_desc_init");
    locus_record record;
    memset(&record, 0, sizeof record);
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                s.bb, s.bc, &record),
               LOCUS_ERROR_INVALID_ARGUMENT, "locus_record_init");
    locus_gemm_desc square = s.desc;
    square.m = square.n = square.k = 2;
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &square, s.ba,
                                s.bb, s.ba, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "alias");
    float values[12] = {0};
    locus_buffer *foreign_c = test_upload_floats(other_context, values, 12);
    if (foreign_c)
        TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                    s.bb, foreign_c, NULL),
                   LOCUS_ERROR_INVALID_ARGUMENT,
                   "buffer c belongs to another context");
    locus_buffer_destroy(foreign_c);
    void *host = NULL;
    if (TEST_OK(locus_buffer_map(s.bc, LOCUS_MAP_READ, &host)) ==
        LOCUS_SUCCESS) {
        TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                    s.bb, s.bc, NULL),
                   LOCUS_ERROR_BUSY, "mapped");
        TEST_OK(locus_buffer_unmap(s.bc));
    }
    size_t rows[2] = {99, 99};
    bad = s.desc;
    bad.m = 0;
    if (TEST_OK(locus_gemm_split_rows(context, devices, 2, weights, &bad, s.ba,
                                      s.bb, s.bc, rows)) == LOCUS_SUCCESS)
        TEST_EXPECT(rows[0] == 0 && rows[1] == 0,
                    "m = 0 planned rows %zu and %zu", rows[0], rows[1]);
    TEST_ERROR(locus_gemm_split_rows(context, devices, 2, weights, &s.desc,
                                     s.ba, s.bb, s.bc, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "rows");
    TEST_ERROR(locus_gemm_split_rows(NULL, devices, 2, weights, &s.desc, s.ba,
                                     s.bb, s.bc, rows),
               LOCUS_ERROR_NULL_ARGUMENT, "context");
    TEST_ERROR(locus_gemm_split_rows(context, devices, 2, weights, &s.desc,
                                     s.ba, s.bb, NULL, rows),
               LOCUS_ERROR_NULL_ARGUMENT, "c is NULL");
    TEST_ERROR(locus_gemm_split_rows(context, no_gemm, 2, weights, &s.desc,
                                     s.ba, s.bb, s.bc, rows),
               LOCUS_ERROR_NOT_SUPPORTED, "gemm is not supported");
    /* None of the refused calls touched C. */
    expect_c_unchanged(&s, "refused calls");
    gemm_case_free(&s);
}

static locus_context *make_context(const char *plugin_path);
static locus_context *make_context_of(const char *plugin_path,
                                      const char *backends);

/* A CPU block too small to keep its workers busy, which would finish after
 * the device's, is left out of the plan; a larger one stays. Two workers,
 * nominal rates: the CPU does 16 GFLOP/s, the fake device 128. */
static void test_small_cpu_block_left_out(const char *plugin_path)
{
    printf("small cpu block\n");
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.calibration = "nominal";
    options.backends = "cpu,cuda";
    options.plugin_path = plugin_path;
    options.threads = "2";
    locus_context *ctx = NULL;
    if (TEST_OK(locus_context_create(&options, &ctx)))
        return;
    locus_device *two[2] = {NULL, NULL};
    TEST_OK(locus_device_find(ctx, "cpu", &two[0]));
    TEST_OK(locus_device_find(ctx, "cuda:0", &two[1]));
    struct {
        size_t m;
        int cpu_used;
    } cases[] = {{100, 0}, {4000, 1}};
    for (size_t i = 0; i < 2 && two[0] && two[1]; i++) {
        gemm_case s;
        size_t rows[2] = {99, 99};
        if (gemm_case_make(&s, ctx, cases[i].m, 512, 512, 0, 0, 0, 1, 0) &&
            TEST_OK(locus_gemm_split_rows(ctx, two, 2, NULL, &s.desc, s.ba,
                                          s.bb, s.bc, rows)) == LOCUS_SUCCESS)
            TEST_EXPECT(rows[0] + rows[1] == cases[i].m &&
                            (rows[0] > 0) == cases[i].cpu_used,
                        "m = %zu: cpu %zu rows, fake %zu; the cpu should %s",
                        cases[i].m, rows[0], rows[1],
                        cases[i].cpu_used ? "take some" : "take none");
        gemm_case_free(&s);
    }
    locus_context_destroy(ctx);
}

/* The rows the default plan gives devices[0 .. count-1] of a 64^3 gemm
 * on fresh buffers (so that no device holds a copy of B from an earlier
 * call, which the model would favour), into rows; then, when run, the
 * split itself, checked. False when the plan failed. */
static bool fresh_plan(locus_context *ctx, locus_device *const *devices,
                       size_t count, const double *weights, bool run,
                       size_t *rows, const char *what)
{
    gemm_case s;
    bool planned =
        gemm_case_make(&s, ctx, 64, 64, 64, 0, 0, 0, 1, 0) &&
        TEST_OK(locus_gemm_split_rows(ctx, devices, count, weights, &s.desc,
                                      s.ba, s.bb, s.bc, rows)) == LOCUS_SUCCESS;
    if (planned && run)
        run_split(ctx, devices, count, weights, &s, what);
    gemm_case_free(&s);
    return planned;
}

/* Two views of one GPU (the same pci_bus_id: cuda:0 and NVIDIA's OpenCL
 * device on the H200) are one device to the default plan: one keeps every
 * row, the other gets none, and the result is still right. Three fake
 * devices: cuda:0 and cuda:2 share an address (spelled differently: the
 * runtime makes it canonical), cuda:1 has none. Nominal rates, so the
 * three are equally fast and a tie keeps the first in the caller's order. */
static void test_same_hardware(const char *plugin_path)
{
    printf("two views of one device\n");
    setenv("LOCUS_TEST_FAKE_DEVICE_COUNT", "3", 1);
    setenv("LOCUS_TEST_FAKE_PCI_BUS_IDS", "0000:3B:00.0,,0:3b:0.0", 1);
    locus_context *ctx = make_context_of(plugin_path, "cuda");
    unsetenv("LOCUS_TEST_FAKE_DEVICE_COUNT");
    unsetenv("LOCUS_TEST_FAKE_PCI_BUS_IDS");
    locus_device *dev[3] = {NULL, NULL, NULL};
    for (int i = 0; ctx && i < 3; i++) {
        char selector[16];
        snprintf(selector, sizeof selector, "cuda:%d", i);
        TEST_OK(locus_device_find(ctx, selector, &dev[i]));
    }
    if (!dev[0] || !dev[1] || !dev[2]) {
        locus_context_destroy(ctx);
        return;
    }
    static const char *const want_id[3] = {"0000:3b:00.0", "", "0000:3b:00.0"};
    for (int i = 0; i < 3; i++) {
        locus_device_info info;
        locus_device_info_init(&info);
        TEST_OK(locus_device_get_info(dev[i], &info));
        TEST_EXPECT(strcmp(info.pci_bus_id, want_id[i]) == 0,
                    "cuda:%d pci_bus_id '%s', want '%s'", i, info.pci_bus_id,
                    want_id[i]);
    }
    /* A caller built before the field gets the fields it knows only. */
    locus_device_info old;
    memset(&old, 'x', sizeof old);
    old.struct_size = offsetof(locus_device_info, pci_bus_id);
    TEST_OK(locus_device_get_info(dev[0], &old));
    TEST_EXPECT(old.struct_size == offsetof(locus_device_info, pci_bus_id) &&
                    old.pci_bus_id[0] == 'x',
                "an older caller's info: struct_size %zu, pci_bus_id written",
                old.struct_size);

    size_t rows[3] = {99, 99, 99};
    /* Control: two different devices share the rows. */
    locus_device *distinct[] = {dev[0], dev[1]};
    if (fresh_plan(ctx, distinct, 2, NULL, false, rows, ""))
        TEST_EXPECT(rows[0] > 0 && rows[1] > 0,
                    "cuda:0+cuda:1 (two devices): %zu+%zu rows", rows[0],
                    rows[1]);
    locus_device *views[] = {dev[0], dev[2]};
    if (fresh_plan(ctx, views, 2, NULL, true, rows, "cuda:0+cuda:2"))
        TEST_EXPECT(rows[0] == 64 && rows[1] == 0,
                    "cuda:0+cuda:2 (one device): %zu+%zu rows, want 64+0",
                    rows[0], rows[1]);
    locus_device *views_back[] = {dev[2], dev[0]};
    if (fresh_plan(ctx, views_back, 2, NULL, false, rows, ""))
        TEST_EXPECT(rows[0] == 64 && rows[1] == 0,
                    "cuda:2+cuda:0 (one device): %zu+%zu rows, want 64+0",
                    rows[0], rows[1]);
    /* With a third, distinct device: the two views count once. */
    locus_device *trio[] = {dev[0], dev[1], dev[2]};
    if (fresh_plan(ctx, trio, 3, NULL, true, rows, "cuda:0+cuda:1+cuda:2"))
        TEST_EXPECT(rows[0] > 0 && rows[1] > 0 && rows[2] == 0,
                    "cuda:0+cuda:1+cuda:2: %zu+%zu+%zu rows, want cuda:2 "
                    "none",
                    rows[0], rows[1], rows[2]);
    /* Given weights are the caller's plan and are kept. */
    double weights[] = {1, 1};
    if (fresh_plan(ctx, views, 2, weights, true, rows, "cuda:0+cuda:2 1:1"))
        TEST_EXPECT(rows[0] == 32 && rows[1] == 32,
                    "cuda:0+cuda:2 weighted 1:1: %zu+%zu rows", rows[0],
                    rows[1]);
    locus_context_destroy(ctx);
}

static locus_context *make_context_of(const char *plugin_path,
                                      const char *backends)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    /* Nominal rates: a test measures nothing it does not check. */
    options.calibration = "nominal";
    options.backends = backends;
    options.plugin_path = plugin_path;
    locus_context *made = NULL;
    TEST_OK(locus_context_create(&options, &made));
    return made;
}

static locus_context *make_context(const char *plugin_path)
{
    return make_context_of(plugin_path, "cpu,cuda,opencl");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_gemm_split MODULES_DIR OPENCL_MODULE_DIR "
                        "[SEED]\n");
        return 1;
    }
    test_seed(argc - 2, argv + 2);
    char path[4096];
    snprintf(path, sizeof path, "%s/fake_device:%s/reduce_only", argv[1],
             argv[1]);
    context = make_context(path);
    other_context = make_context(path);
    if (!context || !other_context ||
        TEST_OK(locus_device_find(context, "cpu", &cpu)) ||
        TEST_OK(locus_device_find(context, "cuda", &fake)) ||
        TEST_OK(locus_device_find(context, "opencl", &reduce_only)))
        goto destroy;

    test_rows();
    test_small_cpu_block_left_out(path);
    test_same_hardware(path);
    locus_device *pair[] = {cpu, fake, NULL};
    test_shapes(context, pair, 2, "cpu+fake");
    locus_device *fake_first[] = {fake, cpu};
    test_shapes(context, fake_first, 2, "fake+cpu");
    locus_device *cpu_alone[] = {cpu};
    test_shapes(context, cpu_alone, 1, "cpu alone");
    test_weightings(context, pair, 2, "cpu+fake");
    test_b_already_on_device();
    test_device_failure();
    test_errors();

    locus_device *trio[3] = {NULL};
    if (UNDER_VALGRIND()) {
        printf("skipping the PoCL part under valgrind\n");
        goto destroy;
    }
    snprintf(path, sizeof path, "%s/fake_device:%s", argv[1], argv[2]);
    pocl_context = make_context(path);
    if (!pocl_context)
        goto destroy;
    if (locus_device_find(pocl_context, "opencl:0", &trio[2]) !=
        LOCUS_SUCCESS) {
        printf("skipping the PoCL part: no opencl:0 (%s)\n",
               locus_last_error());
        goto destroy;
    }
    if (TEST_OK(locus_device_find(pocl_context, "cpu", &trio[0])) ||
        TEST_OK(locus_device_find(pocl_context, "cuda", &trio[1])))
        goto destroy;
    test_shapes(pocl_context, trio, 3, "cpu+fake+opencl:0");
    test_weightings(pocl_context, trio, 3, "cpu+fake+opencl:0");
    locus_device *ocl_cpu[] = {trio[2], trio[0]};
    test_shapes(pocl_context, ocl_cpu, 2, "opencl:0+cpu");
destroy:
    locus_context_destroy(pocl_context);
    locus_context_destroy(other_context);
    locus_context_destroy(context);
    return test_exit_code();
}
