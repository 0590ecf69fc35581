/* Backends describe themselves; the runtime names none. A module with a
 * name the runtime has never heard of ("tally", tests/unit/modules/
 * stranger) is found by its file name, listed, selected by
 * LOCUS_DEVICE=tally:0 and by its own selector part (tally:lane=5, which
 * it also answers, and explains, when it matches nothing), and an op it
 * says it does not offer is never sent to it, though the cost model
 * would prefer it for anything. A module built for ABI version 1 is
 * refused with the versions in the reason. locus_device_offers reports
 * what each backend says, and a module without an offers entry is sent f32
 * only. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <locus/backend.h>

#include "expect_error.h"
#include "test_buffers.h"

static char plugin_path[4096];
static char fake_path[4096]; /* tests/unit/modules/fake_device: "cuda" */

/* The context with these settings (device may be NULL) and the modules of
 * path, logging only errors. */
static locus_status make_context_at(const char *path, const char *backends,
                                    const char *device, const char *strict,
                                    locus_context **out)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = backends;
    options.plugin_path = path;
    options.device = device;
    options.strict = strict;
    options.calibration = "nominal";
    options.log = "error";
    *out = NULL;
    return locus_context_create(&options, out);
}

static locus_status make_context(const char *backends, const char *device,
                                 const char *strict, locus_context **out)
{
    return make_context_at(plugin_path, backends, device, strict, out);
}

static int find_backend(locus_context *context, const char *name,
                        locus_backend_info *info)
{
    size_t count = 0;
    TEST_OK(locus_backend_count(context, &count));
    for (size_t i = 0; i < count; i++) {
        locus_backend_info_init(info);
        TEST_OK(locus_backend_get(context, i, info));
        if (strcmp(info->name, name) == 0)
            return 1;
    }
    return 0;
}

static void test_found_and_listed(void)
{
    locus_context *context = NULL;
    if (TEST_OK(make_context("all", NULL, NULL, &context)) != LOCUS_SUCCESS)
        return;
    locus_backend_info info;
    int listed = find_backend(context, "tally", &info);
    TEST_EXPECT(listed && info.available && info.device_count == 2,
                "tally: listed %d, available %d, %zu devices (%s)", listed,
                info.available, info.device_count, info.reason);
    TEST_EXPECT(strstr(info.reason, "locus-tally.so") &&
                    strstr(info.reason, "2 tally devices"),
                "tally's reason '%s' names neither its file nor its summary",
                info.reason);
    /* Its own spelling of its devices. */
    locus_device *device = NULL;
    TEST_OK(locus_device_find(context, "tally:1", &device));
    locus_device_info dinfo;
    locus_device_info_init(&dinfo);
    if (device &&
        TEST_OK(locus_device_get_info(device, &dinfo)) == LOCUS_SUCCESS)
        TEST_EXPECT(strcmp(dinfo.selector, "tally:lane=5") == 0 &&
                        strcmp(dinfo.backend, "tally") == 0,
                    "tally:1 is spelled '%s' of backend '%s'", dinfo.selector,
                    dinfo.backend);
    /* A part it does not take is the caller's mistake. */
    TEST_ERROR(locus_device_find(context, "tally:lane=x", &device),
               LOCUS_ERROR_INVALID_ARGUMENT, "'lane=x' is not lane=N");
    TEST_ERROR(locus_device_find(context, "tally:gpu", &device),
               LOCUS_ERROR_INVALID_ARGUMENT, "tally takes no device kind");
    TEST_ERROR(locus_device_find(context, "tallx", &device),
               LOCUS_ERROR_INVALID_ARGUMENT, "no backend is named 'tallx'");
    TEST_ERROR(locus_device_find(context, "tally:lane=4", &device),
               LOCUS_ERROR_DEVICE_NOT_FOUND, "tally:lane=4");
    locus_context_destroy(context);

    /* Left out of LOCUS_BACKENDS, it is still listed, and said so. */
    if (TEST_OK(make_context("cpu", NULL, NULL, &context)) != LOCUS_SUCCESS)
        return;
    listed = find_backend(context, "tally", &info);
    TEST_EXPECT(listed && !info.available &&
                    strcmp(info.reason, "not in LOCUS_BACKENDS") == 0,
                "tally left out: available %d, reason '%s'", info.available,
                info.reason);
    locus_context_destroy(context);
    /* A name no module has is refused, naming those there are. */
    TEST_ERROR(make_context("cpu,tallx", NULL, NULL, &context),
               LOCUS_ERROR_BAD_ENVIRONMENT,
               "LOCUS_BACKENDS='cpu,tallx' (option) is not a comma list of "
               "backend names, or all: no backend is named 'tallx'");
    TEST_EXPECT(strstr(locus_last_error(), "tally"),
                "the refusal does not list tally: %s", locus_last_error());
}

/* A reduce of 1000 floats 1, 2, ...: its device and the sum. */
static void reduce_lands(locus_context *context, locus_device *device,
                         const char *want_device, const char *want_by)
{
    enum { COUNT = 1000 };
    float x[COUNT];
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)(i + 1);
    locus_buffer *buffer = test_upload_floats(context, x, COUNT);
    if (!buffer)
        return;
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = COUNT;
    locus_record record;
    locus_record_init(&record);
    double sum = 0;
    if (TEST_OK(locus_reduce(context, device, &desc, buffer, &sum, &record)) ==
        LOCUS_SUCCESS)
        TEST_EXPECT(sum == COUNT * (COUNT + 1) / 2.0 &&
                        strcmp(record.device, want_device) == 0 &&
                        strcmp(record.chosen_by, want_by) == 0,
                    "reduce: %g on %s chosen by %s; want %g on %s by %s", sum,
                    record.device, record.chosen_by, COUNT * (COUNT + 1) / 2.0,
                    want_device, want_by);
    locus_buffer_destroy(buffer);
}

static void test_selected(void)
{
    static const struct {
        const char *device, *lands;
    } cases[] = {
        {"tally:0", "tally:lane=3"},
        {"tally:1", "tally:lane=5"},
        {"tally:lane=5", "tally:lane=5"},
        {"tally", "tally:lane=3"},
        {"tally:lane=4,tally:lane=3", "tally:lane=3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        locus_context *context = NULL;
        if (TEST_OK(make_context("all", cases[i].device, NULL, &context)) !=
            LOCUS_SUCCESS)
            continue;
        reduce_lands(context, NULL, cases[i].lands, "LOCUS_DEVICE");
        locus_context_destroy(context);
    }
    /* The cost model, left to itself, takes the fastest device there is. */
    locus_context *context = NULL;
    if (TEST_OK(make_context("all", "auto", NULL, &context)) == LOCUS_SUCCESS) {
        reduce_lands(context, NULL, "tally:lane=3", "auto");
        locus_context_destroy(context);
    }
    /* A lane it does not have: refused under LOCUS_STRICT=1, with the
     * module's own word on why; a part that does not parse, always. */
    TEST_ERROR(make_context("all", "tally:lane=4", "1", &context),
               LOCUS_ERROR_DEVICE_UNAVAILABLE,
               "no lane 4: the lanes are 3 and 5");
    TEST_ERROR(make_context("all", "tally:lane=-4", NULL, &context),
               LOCUS_ERROR_BAD_ENVIRONMENT,
               "LOCUS_DEVICE='tally:lane=-4' (option) is not auto or BACKEND");
    TEST_EXPECT(strstr(locus_last_error(), "'lane=-4' is not lane=N") != NULL,
                "the refusal lacks the module's reason: %s",
                locus_last_error());
}

/* C = A B of 64 x 64 ones: every element 64 wherever it ran. */
static void test_never_sent_what_it_does_not_offer(void)
{
    enum { DIM = 64 };
    static float ones[DIM * DIM], c[DIM * DIM];
    for (size_t i = 0; i < DIM * DIM; i++)
        ones[i] = 1.0f;
    static const char *const selectors[] = {"auto", "tally:0", "tally:lane=5"};
    for (size_t s = 0; s < sizeof selectors / sizeof selectors[0]; s++) {
        locus_context *context = NULL;
        if (TEST_OK(make_context("all", selectors[s], NULL, &context)) !=
            LOCUS_SUCCESS)
            continue;
        locus_buffer *a = test_upload_floats(context, ones, DIM * DIM);
        locus_buffer *b = test_upload_floats(context, ones, DIM * DIM);
        locus_buffer *cb = test_upload_floats(context, ones, DIM * DIM);
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.m = desc.n = desc.k = DIM;
        locus_record record;
        locus_record_init(&record);
        if (a && b && cb &&
            TEST_OK(locus_gemm(context, NULL, &desc, a, b, cb, &record)) ==
                LOCUS_SUCCESS &&
            TEST_OK(locus_buffer_read(cb, 0, c, sizeof c)) == LOCUS_SUCCESS) {
            size_t wrong = 0;
            for (size_t i = 0; i < DIM * DIM; i++)
                wrong += c[i] != (float)DIM;
            TEST_EXPECT(wrong == 0 && strcmp(record.device, "cpu") == 0,
                        "LOCUS_DEVICE=%s: gemm ran on %s (chosen by %s), %zu "
                        "elements wrong",
                        selectors[s], record.device, record.chosen_by, wrong);
        }
        /* Named by the caller: refused, nothing written. */
        locus_device *tally = NULL;
        TEST_OK(locus_device_find(context, "tally:0", &tally));
        if (tally && cb)
            TEST_ERROR(locus_gemm(context, tally, &desc, a, b, cb, NULL),
                       LOCUS_ERROR_NOT_SUPPORTED,
                       "gemm is not supported on tally:lane=3");
        locus_buffer_destroy(a);
        locus_buffer_destroy(b);
        locus_buffer_destroy(cb);
        locus_context_destroy(context);
    }
    /* Strict: LOCUS_DEVICE names no device that offers gemm, an error. */
    locus_context *context = NULL;
    if (TEST_OK(make_context("all", "tally:0", "1", &context)) != LOCUS_SUCCESS)
        return;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = DIM;
    locus_buffer *a = test_upload_floats(context, ones, DIM * DIM);
    locus_buffer *b = test_upload_floats(context, ones, DIM * DIM);
    locus_buffer *cb = test_upload_floats(context, ones, DIM * DIM);
    if (a && b && cb)
        TEST_ERROR(locus_gemm(context, NULL, &desc, a, b, cb, NULL),
                   LOCUS_ERROR_DEVICE_UNAVAILABLE, "LOCUS_STRICT=1");
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    locus_buffer_destroy(cb);
    locus_context_destroy(context);
}

static void expect_offers(locus_device *device, locus_op_kind op, int algorithm,
                          int want)
{
    int offered = -1;
    if (TEST_OK(locus_device_offers(device, op, algorithm, LOCUS_DTYPE_F32,
                                    &offered)) == LOCUS_SUCCESS)
        TEST_EXPECT(offered == want, "op %d algorithm %d: offered %d, want %d",
                    (int)op, algorithm, offered, want);
}

static void test_offers_query(void)
{
    locus_context *context = NULL;
    if (TEST_OK(make_context("all", NULL, NULL, &context)) != LOCUS_SUCCESS)
        return;
    locus_device *tally = NULL, *cpu = NULL;
    TEST_OK(locus_device_find(context, "tally:lane=3", &tally));
    TEST_OK(locus_device_find(context, "cpu", &cpu));
    if (tally && cpu) {
        expect_offers(tally, LOCUS_OP_REDUCE, 0, 1);
        expect_offers(tally, LOCUS_OP_GEMM, 0, 0);
        expect_offers(tally, LOCUS_OP_CONV2D, LOCUS_CONV_AUTO, 0);
        expect_offers(cpu, LOCUS_OP_GEMM, 0, 1);
        expect_offers(cpu, LOCUS_OP_CONV2D, LOCUS_CONV_MEC, 1);
        expect_offers(cpu, LOCUS_OP_CONV2D, LOCUS_CONV_WINOGRAD, 0);
        int offered = -1;
        TEST_OK(locus_device_offers(cpu, LOCUS_OP_REDUCE, 0, LOCUS_DTYPE_F64,
                                    &offered));
        TEST_EXPECT(offered == 1, "cpu offers f64 reduce: %d", offered);
        /* Reduce takes f32 or f64 only (ops_reduce.c). */
        TEST_OK(locus_device_offers(cpu, LOCUS_OP_REDUCE, 0, LOCUS_DTYPE_BF16,
                                    &offered));
        TEST_EXPECT(offered == 0, "cpu offers bf16 reduce: %d", offered);
        TEST_ERROR(locus_device_offers(cpu, (locus_op_kind)7, 0,
                                       LOCUS_DTYPE_F32, &offered),
                   LOCUS_ERROR_INVALID_ARGUMENT, "op kind 7 is unknown");
        TEST_ERROR(locus_device_offers(cpu, LOCUS_OP_CONV2D, 9, LOCUS_DTYPE_F32,
                                       &offered),
                   LOCUS_ERROR_INVALID_ARGUMENT,
                   "conv2d algorithm 9 is unknown");
        TEST_ERROR(locus_device_offers(cpu, LOCUS_OP_GEMM, 1, LOCUS_DTYPE_F32,
                                       &offered),
                   LOCUS_ERROR_INVALID_ARGUMENT, "gemm has one algorithm");
        TEST_ERROR(locus_device_offers(cpu, LOCUS_OP_GEMM, 0, (locus_dtype)5,
                                       &offered),
                   LOCUS_ERROR_INVALID_ARGUMENT, "dtype 5 is unknown");
        TEST_ERROR(
            locus_device_offers(cpu, LOCUS_OP_GEMM, 0, LOCUS_DTYPE_F32, NULL),
            LOCUS_ERROR_NULL_ARGUMENT, "offered is NULL");
        TEST_ERROR(locus_device_offers(NULL, LOCUS_OP_GEMM, 0, LOCUS_DTYPE_F32,
                                       &offered),
                   LOCUS_ERROR_NULL_ARGUMENT, "device is NULL");
    }
    locus_context_destroy(context);
}

/* The fake device module has no offers entry and loops that read floats:
 * it offers every op in f32 and nothing else, and an f16 gemm asked of it
 * is refused before its loops see it (libFuzzer's fuzz_ops found that
 * request reading past its A when such a module was taken to offer every
 * dtype). */
static void test_no_offers_entry_means_f32(void)
{
    locus_context *context = NULL;
    if (TEST_OK(make_context_at(fake_path, "cuda", NULL, NULL, &context)) !=
        LOCUS_SUCCESS)
        return;
    locus_device *fake = NULL;
    if (TEST_OK(locus_device_find(context, "cuda:0", &fake)) == LOCUS_SUCCESS) {
        static const locus_dtype dtypes[] = {LOCUS_DTYPE_F32, LOCUS_DTYPE_F64,
                                             LOCUS_DTYPE_BF16, LOCUS_DTYPE_F16};
        for (size_t i = 0; i < 4; i++) {
            int offered = -1;
            TEST_OK(locus_device_offers(fake, LOCUS_OP_GEMM, 0, dtypes[i],
                                        &offered));
            TEST_EXPECT(offered == (dtypes[i] == LOCUS_DTYPE_F32),
                        "the module without offers: gemm in %s offered %d",
                        locus_dtype_str(dtypes[i]), offered);
        }
        /* A 30 x 16 f16 A fits 1 KiB, as floats it would not. */
        static const float zeros[256];
        locus_buffer *a = test_upload_floats(context, zeros, 256);
        locus_buffer *b = test_upload_floats(context, zeros, 256);
        locus_buffer *c = test_upload_floats(context, zeros, 256);
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.dtype = LOCUS_DTYPE_F16;
        desc.m = 30, desc.n = 8, desc.k = 16;
        if (a && b && c)
            TEST_ERROR(locus_gemm(context, fake, &desc, a, b, c, NULL),
                       LOCUS_ERROR_NOT_SUPPORTED, "is not offered on cuda:0");
        locus_buffer_destroy(a);
        locus_buffer_destroy(b);
        locus_buffer_destroy(c);
    }
    locus_context_destroy(context);
}

/* An f32 gemm's alpha that rounds to 0 in f32 is alpha 0 (BLAS's sgemm
 * sees 0): the module gets A and B NULL and must scale C only. The fake
 * module once tested the double alpha instead and read through NULL
 * (libFuzzer's fuzz_ops found it, a run of the scheduler sending such a
 * gemm there); backend.h now tells modules to test a == NULL. */
static void test_alpha_rounding_to_zero_only_scales(void)
{
    locus_context *context = NULL;
    if (TEST_OK(make_context_at(fake_path, "cuda", NULL, NULL, &context)) !=
        LOCUS_SUCCESS)
        return;
    locus_device *fake = NULL;
    if (TEST_OK(locus_device_find(context, "cuda:0", &fake)) == LOCUS_SUCCESS) {
        float values[12];
        for (int i = 0; i < 12; i++)
            values[i] = (float)(i + 1);
        locus_buffer *a = test_upload_floats(context, values, 12);
        locus_buffer *b = test_upload_floats(context, values, 12);
        locus_buffer *cb = test_upload_floats(context, values, 6);
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.m = 2, desc.n = 3, desc.k = 4;
        desc.alpha = 1e-300; /* 0 in f32 */
        desc.beta = 0.5;
        float c[6] = {0};
        if (a && b && cb &&
            TEST_OK(locus_gemm(context, fake, &desc, a, b, cb, NULL)) ==
                LOCUS_SUCCESS &&
            TEST_OK(locus_buffer_read(cb, 0, c, sizeof c)) == LOCUS_SUCCESS)
            for (int i = 0; i < 6; i++)
                TEST_EXPECT(c[i] == 0.5f * values[i],
                            "C[%d] = %g, expected beta C = %g", i, c[i],
                            0.5f * values[i]);
        locus_buffer_destroy(a);
        locus_buffer_destroy(b);
        locus_buffer_destroy(cb);
    }
    locus_context_destroy(context);
}

static void test_old_abi_refused(void)
{
    locus_context *context = NULL;
    if (TEST_OK(make_context("all", NULL, NULL, &context)) != LOCUS_SUCCESS)
        return;
    char expected[96];
    snprintf(expected, sizeof expected,
             "backend ABI version 1, this runtime needs %u",
             LOCUS_BACKEND_ABI_VERSION);
    locus_backend_info info;
    int listed = find_backend(context, "ancient", &info);
    TEST_EXPECT(listed && !info.available && strstr(info.reason, expected) &&
                    strstr(info.reason, "locus-ancient.so"),
                "the ABI 1 module: listed %d, available %d, reason '%s', "
                "expected '%s'",
                listed, info.available, info.reason, expected);
    locus_context_destroy(context);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_backend_describe MODULES_BUILD_DIR\n");
        return 1;
    }
    snprintf(plugin_path, sizeof plugin_path, "%s/stranger:%s/abi_v1", argv[1],
             argv[1]);
    snprintf(fake_path, sizeof fake_path, "%s/fake_device", argv[1]);
    test_found_and_listed();
    test_selected();
    test_never_sent_what_it_does_not_offer();
    test_offers_query();
    test_old_abi_refused();
    test_no_offers_entry_means_f32();
    test_alpha_rounding_to_zero_only_scales();
    return test_exit_code();
}
