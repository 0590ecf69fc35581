/* Injected faults swept over a whole scenario: create a context (the CPU
 * backend and the fake device module), make buffers with every placement,
 * run reduce, gemm and conv2d on the CPU and on the fake device, read
 * everything back, destroy. For each kind of fault (runtime/core/fault.h) and
 * each N, the Nth call of that kind fails once; the scenario must then
 *  - see a clear status (a known error code and a detail that says what
 *    failed) wherever the failure surfaced, never a crash;
 *  - keep every buffer at its last good contents after a failed op;
 *  - carry on normally afterwards, since only one call fails;
 *  - release everything: run under LeakSanitizer, a leak on any error path
 *    fails the run at exit.
 * N grows until a whole scenario runs without reaching the Nth call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"
#include "fault.h"

enum { M = 9, N = 7, K = 5, X_COUNT = 1000 };
/* conv2d: batch 2, 3 -> 4 channels, 6 x 5 image, 3 x 3 kernel, pad 1. */
enum { CB = 2, CC = 3, CH = 6, CW = 5, CK = 4, CR = 3, CS = 3 };
enum { CP = CH, CQ = CW }; /* stride 1, pad 1, 3 x 3: same size */

#define IN_COUNT (CB * CC * CH * CW)
#define FILTER_COUNT (CK * CC * CR * CS)
#define OUT_COUNT (CB * CK * CP * CQ)

static const char *module_dir;
static float a_data[M * K], b_data[K * N], c_start[M * N], x_data[X_COUNT];
static float in_data[IN_COUNT], filter_data[FILTER_COUNT], out_start[OUT_COUNT];

/* Per kind: statuses seen where a fault surfaced, and absorbed faults. */
typedef struct tally {
    unsigned long scenarios;
    unsigned long surfaced[32]; /* by -status */
    unsigned long absorbed;     /* fired, yet every call succeeded */
} tally;

static tally tallies[LOCUS__FAULT_KINDS];
static locus__fault_kind current_kind;
static bool failure_seen; /* in this scenario */

static void fill(float *values, size_t count)
{
    for (size_t i = 0; i < count; i++)
        values[i] = (float)test_rng_uniform(-1, 1);
}

/* A failed call: only an injected fault may fail, once, with a known
 * status and a detail that is not empty. */
static bool check_failure(locus_status status, const char *what)
{
    const char *detail = locus_last_error();
    TEST_EXPECT(locus__fault_fired(current_kind),
                "%s failed with no fault injected: %s: %s", what,
                locus_status_name(status), detail);
    TEST_EXPECT(!failure_seen, "%s failed after the one fault was spent: %s",
                what, detail);
    TEST_EXPECT(status < 0 && status >= LOCUS_ERROR_DEVICE_UNAVAILABLE &&
                    strcmp(locus_status_name(status), "unknown") != 0,
                "%s returned status %d", what, (int)status);
    TEST_EXPECT(detail[0] != '\0', "%s failed with an empty detail", what);
    /* Each kind of fault has one right status, whatever call it hit. */
    static const locus_status expected[LOCUS__FAULT_KINDS] = {
        [LOCUS__FAULT_ALLOC] = LOCUS_ERROR_OUT_OF_MEMORY,
        [LOCUS__FAULT_BIND] = LOCUS_ERROR_PLACEMENT,
        [LOCUS__FAULT_DLOPEN] = LOCUS_ERROR_PLUGIN,
        [LOCUS__FAULT_DEVICE_ALLOC] = LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
        [LOCUS__FAULT_COPY] = LOCUS_ERROR_BACKEND,
    };
    TEST_EXPECT(status == expected[current_kind],
                "%s failed with %s on an injected %s fault, expected %s: %s",
                what, locus_status_name(status),
                locus__fault_name(current_kind),
                locus_status_name(expected[current_kind]), detail);
    failure_seen = true;
    if (status < 0 && -status < 32)
        tallies[current_kind].surfaced[-status]++;
    return false;
}

/* Creates a buffer; a failure must be clean, and the retry must work. */
static locus_buffer *make_buffer(locus_context *context, const float *values,
                                 size_t count, locus_placement_policy policy)
{
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = policy;
    placement.node = 0;
    size_t bytes = count * sizeof(float);
    locus_buffer *buffer = NULL;
    for (int attempt = 0; attempt < 2 && !buffer; attempt++) {
        locus_status status =
            locus_buffer_create(context, bytes, &placement, &buffer);
        if (status != LOCUS_SUCCESS) {
            TEST_EXPECT(buffer == NULL, "failed create left a buffer");
            check_failure(status, "locus_buffer_create");
        }
    }
    if (buffer)
        TEST_OK(locus_buffer_write(buffer, 0, values, bytes));
    return buffer;
}

/* Reads a buffer back; one failure (the fault landing in a download) is
 * allowed, the retry must then work. */
static bool read_back(locus_buffer *buffer, float *values, size_t count)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        locus_status status =
            locus_buffer_read(buffer, 0, values, count * sizeof(float));
        if (status == LOCUS_SUCCESS)
            return true;
        check_failure(status, "locus_buffer_read");
    }
    return false;
}

static void expect_contents(locus_buffer *buffer, const float *want,
                            size_t count, const char *what)
{
    float *got = malloc(count * sizeof(float));
    if (got && read_back(buffer, got, count))
        TEST_EXPECT(memcmp(got, want, count * sizeof(float)) == 0,
                    "%s does not hold its last good contents (fault %s, "
                    "call %lu)",
                    what, locus__fault_name(current_kind),
                    locus__fault_calls(current_kind));
    free(got);
}

static bool close_to(double got, double want, double scale)
{
    return fabs(got - want) <= 1e-4 * (1 + scale);
}

/* The buffers of one scenario and what each must hold. */
typedef struct scene {
    locus_context *context;
    locus_buffer *a, *b, *c, *x, *in, *filter, *out;
    float c_now[M * N], out_now[OUT_COUNT];
} scene;

static void run_reduce(scene *s, locus_device *device)
{
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = X_COUNT;
    double want = 0, scale = 0;
    for (size_t i = 0; i < X_COUNT; i++) {
        want += x_data[i];
        scale += fabs(x_data[i]);
    }
    double result = 12345.0;
    locus_status status =
        locus_reduce(s->context, device, &desc, s->x, &result, NULL);
    if (status == LOCUS_SUCCESS)
        TEST_EXPECT(close_to(result, want, scale), "reduce %g, want %g", result,
                    want);
    else if (!check_failure(status, "locus_reduce"))
        TEST_EXPECT(result == 12345.0, "a failed reduce wrote its result");
    expect_contents(s->x, x_data, X_COUNT, "x after reduce");
}

static void run_gemm(scene *s, locus_device *device)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M, desc.n = N, desc.k = K;
    desc.alpha = 1.5;
    desc.beta = 0.5; /* C is read too: its copy must be brought in */
    float want[M * N];
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double sum = 0;
            for (size_t p = 0; p < K; p++)
                sum += (double)a_data[i * K + p] * b_data[p * N + j];
            want[i * N + j] = (float)(1.5 * sum + 0.5 * s->c_now[i * N + j]);
        }
    locus_status status =
        locus_gemm(s->context, device, &desc, s->a, s->b, s->c, NULL);
    if (status != LOCUS_SUCCESS) {
        check_failure(status, "locus_gemm");
        expect_contents(s->c, s->c_now, M * N, "c after a failed gemm");
        return;
    }
    float got[M * N];
    if (!read_back(s->c, got, M * N))
        return;
    for (size_t i = 0; i < M * N; i++)
        if (!TEST_EXPECT(close_to(got[i], want[i], 10),
                         "gemm c[%zu] %g, want %g", i, got[i], want[i]))
            break;
    memcpy(s->c_now, got, sizeof got);
}

static float conv_at(size_t n, size_t k, size_t p, size_t q)
{
    double sum = 0;
    for (size_t c = 0; c < CC; c++)
        for (size_t r = 0; r < CR; r++)
            for (size_t t = 0; t < CS; t++) {
                size_t y = p + r, x = q + t; /* padded coordinates */
                if (y < 1 || x < 1 || y - 1 >= CH || x - 1 >= CW)
                    continue;
                sum +=
                    (double)in_data[((n * CC + c) * CH + y - 1) * CW + x - 1] *
                    filter_data[((k * CC + c) * CR + r) * CS + t];
            }
    return (float)sum;
}

static void run_conv(scene *s, locus_device *device)
{
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = CB, desc.in_channels = CC, desc.in_height = CH;
    desc.in_width = CW, desc.out_channels = CK;
    desc.kernel_height = CR, desc.kernel_width = CS;
    desc.pad_h = 1, desc.pad_w = 1;
    locus_status status =
        locus_conv2d(s->context, device, &desc, s->in, s->filter, s->out, NULL);
    if (status != LOCUS_SUCCESS) {
        check_failure(status, "locus_conv2d");
        expect_contents(s->out, s->out_now, OUT_COUNT,
                        "output after a failed conv2d");
        return;
    }
    float got[OUT_COUNT];
    if (!read_back(s->out, got, OUT_COUNT))
        return;
    for (size_t n = 0; n < CB; n++)
        for (size_t k = 0; k < CK; k++)
            for (size_t p = 0; p < CP; p++)
                for (size_t q = 0; q < CQ; q++) {
                    size_t i = ((n * CK + k) * CP + p) * CQ + q;
                    float want = conv_at(n, k, p, q);
                    if (!TEST_EXPECT(close_to(got[i], want, 10),
                                     "conv2d out[%zu] %g, want %g", i, got[i],
                                     want))
                        return;
                }
    memcpy(s->out_now, got, sizeof got);
}

/* "1": a failed device op is the op's status (LOCUS_STRICT=1); "0": it
 * falls back to the CPU, so device faults are absorbed and the results must
 * still be right. The sweep runs both ways. */
static const char *strict_mode = "1";

static void scenario(void)
{
    scene s = {0};
    memcpy(s.c_now, c_start, sizeof c_start);
    memcpy(s.out_now, out_start, sizeof out_start);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda"; /* the fake module calls itself cuda */
    options.plugin_path = module_dir;
    options.log = "error";
    options.strict = strict_mode;
    options.calibration = "nominal";
    locus_status status = locus_context_create(&options, &s.context);
    if (status != LOCUS_SUCCESS) {
        TEST_EXPECT(s.context == NULL, "failed create left a context");
        check_failure(status, "locus_context_create");
        return;
    }
    locus_device *cpu = NULL, *fake = NULL;
    TEST_OK(locus_device_find(s.context, "cpu", &cpu));
    if (locus_device_find(s.context, "cuda", &fake) != LOCUS_SUCCESS) {
        /* Only a failed dlopen (or an allocation in the module's probe)
         * may make the module absent; the reason must say so. */
        locus_backend_info info;
        locus_backend_info_init(&info);
        TEST_OK(locus_backend_get(s.context, 1, &info));
        TEST_EXPECT(locus__fault_fired(current_kind) && !failure_seen,
                    "fake device absent with no fault: %s", info.reason);
        TEST_EXPECT(strstr(info.reason, "injected") != NULL,
                    "absent module's reason '%s' does not name the fault",
                    info.reason);
        failure_seen = true;
        tallies[current_kind].surfaced[-LOCUS_ERROR_PLUGIN]++;
        fake = NULL;
    }
    s.a = make_buffer(s.context, a_data, M * K, LOCUS_PLACE_NODE);
    s.b = make_buffer(s.context, b_data, K * N, LOCUS_PLACE_INTERLEAVE);
    s.c = make_buffer(s.context, c_start, M * N, LOCUS_PLACE_DEFAULT);
    s.x = make_buffer(s.context, x_data, X_COUNT, LOCUS_PLACE_LOCAL);
    s.in = make_buffer(s.context, in_data, IN_COUNT, LOCUS_PLACE_OFF);
    s.filter =
        make_buffer(s.context, filter_data, FILTER_COUNT, LOCUS_PLACE_DEFAULT);
    s.out = make_buffer(s.context, out_start, OUT_COUNT, LOCUS_PLACE_DEFAULT);
    if (s.a && s.b && s.c && s.x && s.in && s.filter && s.out && cpu) {
        locus_device *devices[] = {cpu, fake, cpu, fake};
        for (size_t d = 0; d < 4; d++) {
            if (!devices[d])
                continue;
            run_reduce(&s, devices[d]);
            run_gemm(&s, devices[d]);
            run_conv(&s, devices[d]);
        }
        /* Inputs are never written; each op above left them alone. */
        expect_contents(s.a, a_data, M * K, "a");
        expect_contents(s.b, b_data, K * N, "b");
        expect_contents(s.in, in_data, IN_COUNT, "input");
        expect_contents(s.filter, filter_data, FILTER_COUNT, "filter");
    }
    locus_buffer *all[] = {s.a, s.b, s.c, s.x, s.in, s.filter, s.out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        locus_buffer_destroy(all[i]);
    locus_context_destroy(s.context);
}

/* The module's own failures (not the runtime's fault points) reach the
 * caller as its status, and the data stays. */
static void backend_copy_failure(void)
{
    current_kind = LOCUS__FAULT_COPY;
    locus__fault_arm(LOCUS__FAULT_COPY, 0);
    scene s = {0};
    memcpy(s.c_now, c_start, sizeof c_start);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = module_dir;
    options.strict = "1"; /* else the gemm falls back to the CPU */
    if (TEST_OK(locus_context_create(&options, &s.context)) != LOCUS_SUCCESS)
        return;
    locus_device *fake = NULL;
    TEST_OK(locus_device_find(s.context, "cuda", &fake));
    s.a = make_buffer(s.context, a_data, M * K, LOCUS_PLACE_DEFAULT);
    s.b = make_buffer(s.context, b_data, K * N, LOCUS_PLACE_DEFAULT);
    s.c = make_buffer(s.context, c_start, M * N, LOCUS_PLACE_DEFAULT);
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M, desc.n = N, desc.k = K;
    setenv("LOCUS_TEST_FAKE_COPY_FAILS", "1", 1);
    if (fake && s.a && s.b && s.c)
        TEST_ERROR(locus_gemm(s.context, fake, &desc, s.a, s.b, s.c, NULL),
                   LOCUS_ERROR_BACKEND, "fake upload");
    unsetenv("LOCUS_TEST_FAKE_COPY_FAILS");
    if (s.c)
        expect_contents(s.c, c_start, M * N, "c after a failed upload");
    locus_buffer_destroy(s.a);
    locus_buffer_destroy(s.b);
    locus_buffer_destroy(s.c);
    locus_context_destroy(s.context);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_fault_sweep FAKE_MODULE_DIR [SEED]\n");
        return 1;
    }
    module_dir = argv[1];
    test_seed(argc - 1, argv + 1);
    fill(a_data, M * K);
    fill(b_data, K * N);
    fill(c_start, M * N);
    fill(x_data, X_COUNT);
    fill(in_data, IN_COUNT);
    fill(filter_data, FILTER_COUNT);
    fill(out_start, OUT_COUNT);

    /* A sweep is bounded: a scenario makes a few hundred calls of a kind. */
    const unsigned long limit = 20000;
    for (int sweep = 0; sweep < 2 * LOCUS__FAULT_KINDS; sweep++) {
        int kind = sweep % LOCUS__FAULT_KINDS;
        strict_mode = sweep < LOCUS__FAULT_KINDS ? "1" : "0";
        memset(&tallies[kind], 0, sizeof tallies[kind]);
        current_kind = (locus__fault_kind)kind;
        unsigned long n = 1;
        for (; n <= limit; n++) {
            locus__fault_arm(current_kind, n);
            failure_seen = false;
            scenario();
            bool fired = locus__fault_fired(current_kind);
            if (fired && !failure_seen)
                tallies[kind].absorbed++;
            if (!fired)
                break;
            tallies[kind].scenarios++;
            if (test_failures() > 20)
                break;
        }
        locus__fault_arm(current_kind, 0);
        TEST_EXPECT(n <= limit, "fault %s: sweep did not end by N = %lu",
                    locus__fault_name(current_kind), limit);
        printf("fault %-12s %-10s %5lu scenarios, each with the Nth call "
               "failed; %lu absorbed (no call failed);",
               locus__fault_name(current_kind),
               strict_mode[0] == '1' ? "strict" : "fallback",
               tallies[kind].scenarios, tallies[kind].absorbed);
        for (int code = 1; code < 32; code++)
            if (tallies[kind].surfaced[code])
                printf(" %s x%lu", locus_status_name((locus_status)-code),
                       tallies[kind].surfaced[code]);
        printf("\n");
        fflush(stdout);
    }
    backend_copy_failure();
    return test_exit_code();
}
