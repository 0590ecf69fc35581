/* A queue overlapping CPU and GPU work.
 *
 * Two queues, each with a thread of its own: one on a GPU (the first CUDA
 * device, else the first OpenCL GPU) runs C = A B, the other on the CPU
 * sums a long vector x meanwhile; it then waits for the product's event
 * (locus_queue_wait_event) and sums C, an op that needs the GPU's result.
 * While both queues work, the calling thread computes the float64
 * references on its own. Where there is no GPU, both queues run on the CPU
 * and the program says so: the ops still overlap the caller's work and
 * each other, and the results are checked the same way. Exits 1 when a
 * result is off or a call fails, 2 on a bad command line.
 *
 * Build and run against an installed Locus (PKG_CONFIG_PATH as the README
 * says), in the folder of this file:
 *
 *   $ cc -std=c17 queue.c $(pkg-config --cflags --libs locus) -lm -o queue
 *   $ ./queue 256 100003
 *
 * usage: queue [n elements]  (default 1024 and 16M: a 1024^3 product and
 * a sum of 16M floats). Plain C17 on the public API. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

static bool ok(locus_status status, const char *call)
{
    if (status == LOCUS_SUCCESS) {
        return true;
    }
    fprintf(stderr, "queue: %s: %s\n", call, locus_last_error());
    return false;
}

static bool parse_count(const char *text, size_t maximum, size_t *value)
{
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || text[0] == '-' || parsed == 0 ||
        parsed > maximum) {
        return false;
    }
    *value = (size_t)parsed;
    return true;
}

/* Positive values in [0, 1): every sum below has no cancellation, so its
 * error is relative to the sum itself. */
static void fill(float *values, size_t count, uint64_t seed)
{
    for (size_t i = 0; i < count; ++i) {
        uint64_t z = seed + (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
        z = (z ^ (z >> 31)) * UINT64_C(0xbf58476d1ce4e5b9);
        values[i] = (float)((z ^ (z >> 29)) >> 40) * 0x1.0p-24f;
    }
}

/* The first GPU of the context, or NULL when it has none. */
static locus_device *find_gpu(locus_context *context)
{
    size_t count = 0;
    if (locus_device_count(context, &count) != LOCUS_SUCCESS) {
        return NULL;
    }
    for (size_t i = 0; i < count; ++i) {
        locus_device *device = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get(context, i, &device) == LOCUS_SUCCESS &&
            locus_device_get_info(device, &info) == LOCUS_SUCCESS &&
            info.kind == LOCUS_DEVICE_GPU) {
            return device;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    size_t n = 1024, elements = (size_t)1 << 24;
    if ((argc != 1 && argc != 3) ||
        (argc == 3 && (!parse_count(argv[1], 16384, &n) ||
                       !parse_count(argv[2], (size_t)1 << 28, &elements)))) {
        fprintf(stderr,
                "usage: %s [n elements]  (n up to 16384, elements up to "
                "2^28)\n",
                argv[0]);
        return 2;
    }
    float *a = malloc(n * n * sizeof(float));
    float *b = malloc(n * n * sizeof(float));
    float *c = malloc(n * n * sizeof(float));
    float *x = malloc(elements * sizeof(float));
    if (a == NULL || b == NULL || c == NULL || x == NULL) {
        fprintf(stderr, "queue: out of memory\n");
        return 1;
    }
    fill(a, n * n, 1);
    fill(b, n * n, 2);
    fill(x, elements, 3);

    int status = 1;
    locus_context *context = NULL;
    locus_buffer *ab = NULL, *bb = NULL, *cb = NULL, *xb = NULL;
    locus_queue *gpu_queue = NULL, *cpu_queue = NULL;
    locus_event *product = NULL;
    if (!ok(locus_context_create(NULL, &context), "creating a context")) {
        goto free_arrays;
    }
    locus_device *cpu = NULL;
    if (!ok(locus_device_find(context, "cpu", &cpu), "finding the cpu")) {
        goto destroy;
    }
    locus_device *gpu = find_gpu(context);
    locus_device_info gpu_info;
    locus_device_info_init(&gpu_info);
    locus_device_get_info(gpu != NULL ? gpu : cpu, &gpu_info);
    if (gpu == NULL) {
        printf("no GPU: both queues run on the cpu\n");
    }

    if (!ok(locus_buffer_wrap(context, a, n * n * sizeof(float), &ab),
            "wrap A") ||
        !ok(locus_buffer_wrap(context, b, n * n * sizeof(float), &bb),
            "wrap B") ||
        !ok(locus_buffer_wrap(context, c, n * n * sizeof(float), &cb),
            "wrap C") ||
        !ok(locus_buffer_wrap(context, x, elements * sizeof(float), &xb),
            "wrap x") ||
        !ok(locus_queue_create(context, gpu != NULL ? gpu : cpu, &gpu_queue),
            "the gpu queue") ||
        !ok(locus_queue_create(context, cpu, &cpu_queue), "the cpu queue")) {
        goto destroy;
    }

    locus_gemm_desc gemm;
    locus_gemm_desc_init(&gemm);
    gemm.m = gemm.n = gemm.k = n;
    gemm.alpha = 1.0;
    gemm.beta = 0.0;
    locus_reduce_desc sum_x, sum_c;
    locus_reduce_desc_init(&sum_x);
    sum_x.op = LOCUS_REDUCE_SUM;
    sum_x.count = elements;
    locus_reduce_desc_init(&sum_c);
    sum_c.op = LOCUS_REDUCE_SUM;
    sum_c.count = n * n;
    double x_sum = 0.0, c_sum = 0.0;
    /* Each enqueue returns at once; the results are written when the ops
     * complete. */
    if (!ok(locus_enqueue_gemm(gpu_queue, &gemm, ab, bb, cb, NULL, &product),
            "enqueue gemm") ||
        !ok(locus_enqueue_reduce(cpu_queue, &sum_x, xb, &x_sum, NULL, NULL),
            "enqueue the sum of x") ||
        !ok(locus_queue_wait_event(cpu_queue, product), "wait for gemm") ||
        !ok(locus_enqueue_reduce(cpu_queue, &sum_c, cb, &c_sum, NULL, NULL),
            "enqueue the sum of C")) {
        goto destroy;
    }

    /* Meanwhile, the caller's own work: the references. The sum of C's
     * elements is sum_p (column p of A's sum) (row p of B's sum). */
    double x_want = 0.0, c_want = 0.0;
    for (size_t i = 0; i < elements; ++i) {
        x_want += x[i];
    }
    for (size_t p = 0; p < n; ++p) {
        double column = 0.0, row = 0.0;
        for (size_t i = 0; i < n; ++i) {
            column += a[i * n + p];
            row += b[p * n + i];
        }
        c_want += column * row;
    }

    if (!ok(locus_queue_finish(gpu_queue), "the gpu queue's ops") ||
        !ok(locus_queue_finish(cpu_queue), "the cpu queue's ops")) {
        goto destroy;
    }
    /* Each C element is within 2 (n + 3) 2^-24 of its float64 value (all
     * terms positive), and the sum adds 1e-6 at most. */
    double x_error = fabs(x_sum - x_want) / x_want;
    double c_error = fabs(c_sum - c_want) / c_want;
    double c_bound = 2.0 * (double)(n + 3) * 0x1.0p-24 + 1e-6;
    bool good = x_error <= 1e-6 && c_error <= c_bound;
    printf("gemm %zu^3 on %s while the cpu summed %zu floats, then C: "
           "errors %.2g and %.2g: %s\n",
           n, gpu_info.selector, elements, x_error, c_error,
           good ? "ok" : "FAIL");
    status = good ? 0 : 1;
destroy:
    locus_event_destroy(product);
    locus_queue_destroy(cpu_queue);
    locus_queue_destroy(gpu_queue);
    locus_buffer_destroy(xb);
    locus_buffer_destroy(cb);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(ab);
    locus_context_destroy(context);
free_arrays:
    free(x);
    free(c);
    free(b);
    free(a);
    return status;
}
