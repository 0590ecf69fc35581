/* The op table and the one life cycle every op goes through
 * (runtime/ops/ops.h): each kind's entry agrees with the scheduler's names and
 * the queue's needs; the record's chosen_by names; the gemm split, which runs
 * the same life cycle on the host copies, leaves C's copies as they were when a
 * device fails before any row is written (no copy is dropped: the next op
 * reads C where it is without a transfer), and works in a context that
 * loaded no CPU backend (the host copies are acquired without a host
 * device).
 *
 * usage: test_op_lifecycle FAKE_DEVICE_MODULE_DIR [SEED] */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"
#include "gemm_case.h"
#include "ops.h"
#include "scheduler.h"

static void test_op_table(void)
{
    printf("the op table\n");
    const locus__op_kind kinds[] = {LOCUS__OP_REDUCE, LOCUS__OP_GEMM,
                                    LOCUS__OP_CONV2D};
    const size_t operands[] = {1, 3, 4};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const locus__op_type *type = locus__op_type_of(kinds[i]);
        if (!TEST_EXPECT(type != NULL, "no table entry for kind %d",
                         (int)kinds[i]))
            continue;
        const locus__op_model *model = &type->model;
        TEST_EXPECT(model->kind == kinds[i], "entry of kind %d says kind %d",
                    (int)kinds[i], (int)model->kind);
        TEST_EXPECT(model->name && model->name[0] && model->backend_has &&
                        model->compute_seconds,
                    "kind %d: its cost model is incomplete", (int)kinds[i]);
        /* The figures it reads are the kind's: twice the work, twice the
         * time past the fixed part. */
        locus_backend_rates rates = {.launch_seconds = 1e-6,
                                     .gemm_fixed_seconds = 1e-6,
                                     .gemm_flops = 1e9,
                                     .conv_fixed_seconds = 1e-6,
                                     .conv_flops = 1e9,
                                     .reduce_bytes = 1e9};
        locus__op_cost small = {.op = model, .flops = 1e6, .bytes = 1e6};
        locus__op_cost large = {.op = model, .flops = 2e6, .bytes = 2e6};
        double fixed = 1e-6;
        TEST_EXPECT(fabs((model->compute_seconds(&rates, &large) - fixed) -
                         2 * (model->compute_seconds(&rates, &small) - fixed)) <
                        1e-12,
                    "%s: the time does not grow with its work", model->name);
        TEST_EXPECT(type->operand_count == operands[i] &&
                        type->operand_count <= LOCUS__OP_MAX_OPERANDS,
                    "%s: %zu operands", type->model.name, type->operand_count);
        for (size_t o = 0; o < type->operand_count; o++)
            TEST_EXPECT(type->operand_names[o] && type->operand_names[o][0],
                        "%s: operand %zu has no name", type->model.name, o);
        TEST_EXPECT(type->launch && type->call, "%s: launch or call missing",
                    type->model.name);
    }
}

static void test_chosen_by_names(void)
{
    printf("chosen_by names\n");
    static const struct {
        locus__chosen_by by;
        const char *name;
    } names[] = {{LOCUS__CHOSEN_BY_NONE, "none"},
                 {LOCUS__CHOSEN_BY_CALLER, "caller"},
                 {LOCUS__CHOSEN_BY_ENVIRONMENT, "LOCUS_DEVICE"},
                 {LOCUS__CHOSEN_BY_MODEL, "auto"},
                 {LOCUS__CHOSEN_BY_FALLBACK, "fallback"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        TEST_EXPECT(strcmp(locus__chosen_by_name(names[i].by), names[i].name) ==
                        0,
                    "chosen_by %d is '%s', want '%s'", (int)names[i].by,
                    locus__chosen_by_name(names[i].by), names[i].name);
}

static locus_context *make_context(const char *plugin_path,
                                   const char *backends)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.calibration = "nominal";
    options.backends = backends;
    options.plugin_path = plugin_path;
    locus_context *made = NULL;
    TEST_OK(locus_context_create(&options, &made));
    return made;
}

/* C is current on the fake device (a gemm wrote it there) and, once the
 * split has read it, on the host too. The fake device then fails its
 * block before anything is written: both copies stay current, so a CPU
 * gemm reading C afterwards downloads nothing. */
static void test_failed_split_keeps_copies(const char *plugin_path)
{
    printf("a failed split keeps C's copies\n");
    locus_context *context = make_context(plugin_path, "cpu,cuda");
    locus_device *cpu = NULL, *fake = NULL;
    if (!context || TEST_OK(locus_device_find(context, "cpu", &cpu)) ||
        TEST_OK(locus_device_find(context, "cuda", &fake)))
        goto destroy;
    gemm_case s;
    if (!gemm_case_make(&s, context, 9, 7, 5, 0, 0, 0, 1.0, 0.0))
        goto free_case;
    if (TEST_OK(locus_gemm(context, fake, &s.desc, s.ba, s.bb, s.bc, NULL)))
        goto free_case;
    s.desc.beta = 1.0; /* the split reads C: its host copy is made current */
    locus_device *devices[] = {cpu, fake};
    double weights[] = {1, 1};
    setenv("LOCUS_TEST_FAKE_ALLOC_FAILS", "1", 1);
    TEST_ERROR(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                s.bb, s.bc, NULL),
               LOCUS_ERROR_DEVICE_OUT_OF_MEMORY, "cuda:0 (rows 5 to 8 of 9)");
    unsetenv("LOCUS_TEST_FAKE_ALLOC_FAILS");

    locus_record record;
    locus_record_init(&record);
    if (!TEST_OK(locus_gemm(context, cpu, &s.desc, s.ba, s.bb, s.bc, &record)))
        TEST_EXPECT(record.bytes_from_device == 0,
                    "the cpu gemm after the failed split downloaded %llu "
                    "bytes: the split dropped C's host copy",
                    (unsigned long long)record.bytes_from_device);
free_case:
    gemm_case_free(&s);
destroy:
    locus_context_destroy(context);
}

/* Two fake devices and no CPU backend: the split acquires the host copies
 * through the life cycle, computes, and records as every op does. */
static void test_split_without_cpu_backend(const char *plugin_path)
{
    printf("a split with no cpu backend\n");
    setenv("LOCUS_TEST_FAKE_DEVICE_COUNT", "2", 1);
    locus_context *context = make_context(plugin_path, "cuda");
    unsetenv("LOCUS_TEST_FAKE_DEVICE_COUNT");
    locus_device *first = NULL, *second = NULL;
    if (!context || TEST_OK(locus_device_find(context, "cuda:0", &first)) ||
        TEST_OK(locus_device_find(context, "cuda:1", &second)))
        goto destroy;
    gemm_case s;
    if (!gemm_case_make(&s, context, 11, 6, 4, 1, 0, 2, 0.5, 2.0))
        goto free_case;
    locus_device *devices[] = {first, second};
    double weights[] = {1, 2};
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_gemm_split(context, devices, 2, weights, &s.desc, s.ba,
                                 s.bb, s.bc, &record)))
        goto free_case;
    TEST_EXPECT(strcmp(record.op, "gemm") == 0 &&
                    strcmp(record.device, "cuda:0+cuda:1") == 0 &&
                    strcmp(record.algorithm, "split") == 0 &&
                    strcmp(record.chosen_by, "caller") == 0,
                "record: op '%s', device '%s', algorithm '%s', chosen_by "
                "'%s'",
                record.op, record.device, record.algorithm, record.chosen_by);
    TEST_EXPECT(record.flops == 2.0 * 11 * 6 * 4 && record.bytes_to_device > 0,
                "record: %g flops, %llu bytes to the devices", record.flops,
                (unsigned long long)record.bytes_to_device);
    float *got = malloc(s.c_count * sizeof *got);
    if (TEST_EXPECT(got != NULL, "out of memory") &&
        !TEST_OK(locus_buffer_read(s.bc, 0, got, s.c_count * sizeof *got)))
        gemm_case_check(&s, got, "split over two fake devices");
    free(got);
free_case:
    gemm_case_free(&s);
destroy:
    locus_context_destroy(context);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_op_lifecycle FAKE_DEVICE_MODULE_DIR "
                        "[SEED]\n");
        return 1;
    }
    test_seed(argc - 1, argv + 1);
    test_op_table();
    test_chosen_by_names();
    test_failed_split_keeps_copies(argv[1]);
    test_split_without_cpu_backend(argv[1]);
    return test_exit_code();
}
