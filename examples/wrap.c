/* Wrapping application memory: ops on the program's own arrays, no copies
 * into Locus buffers.
 *
 * The program owns a state vector x (n floats) and a projection P (8 x n),
 * allocated and freed by itself. It wraps both, and a small result vector
 * y, once with locus_buffer_wrap, then runs a few time steps:
 *  1. it updates x in place inside a write mapping, which hands back its
 *     own array and tells Locus that any device copy is now stale;
 *  2. locus_reduce sums x on the default device;
 *  3. locus_gemm computes y = P x, which is in the program's y as soon as
 *     the call returns, wherever it ran (a GPU copies it back).
 * Each result is checked against float64 arithmetic on the same arrays.
 * Exits 1 when a result is off or a call fails, 2 on a bad command line.
 *
 * Build and run against an installed Locus (PKG_CONFIG_PATH as the README
 * says), in the folder of this file:
 *
 *   $ cc -std=c17 wrap.c $(pkg-config --cflags --libs locus) -lm -o wrap
 *   $ ./wrap 100003
 *
 * usage: wrap [n]  (default 1M). Plain C17 on the public API. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

#define ROWS 8
#define STEPS 3

static bool ok(locus_status status, const char *call)
{
    if (status == LOCUS_SUCCESS) {
        return true;
    }
    fprintf(stderr, "wrap: %s: %s\n", call, locus_last_error());
    return false;
}

static bool parse_count(const char *text, size_t *value)
{
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || text[0] == '-' || parsed == 0 ||
        parsed > (1ull << 28)) {
        return false;
    }
    *value = (size_t)parsed;
    return true;
}

/* 64-byte aligned memory gives Locus's kernels their fastest loads; any
 * alignment of a float works. */
static float *allocate_floats(size_t count)
{
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes);
}

/* One time step of the program's own work on x, done in place inside a
 * write mapping: the pointer the mapping gives is x itself. */
static bool update_state(locus_buffer *buffer, float *x, size_t n, int step)
{
    void *host = NULL;
    if (!ok(locus_buffer_map(buffer, LOCUS_MAP_WRITE, &host), "map x")) {
        return false;
    }
    if (host != x) {
        fprintf(stderr, "wrap: the mapping is not the program's array\n");
        locus_buffer_unmap(buffer);
        return false;
    }
    for (size_t i = 0; i < n; ++i) {
        x[i] = 0.5f * x[i] + 0.125f * (float)(1 + (i + (size_t)step) % 4);
    }
    return ok(locus_buffer_unmap(buffer), "unmap x");
}

/* The sum and y = P x checked against float64 on the program's arrays:
 * the sum within 1e-6 of the sum of |x| (locus.h's bound), each y within
 * (n + 3) 2^-24 of its sum of |terms|, twice that allowed. */
static bool check(const float *x, const float *p, const float *y, size_t n,
                  double sum)
{
    double want = 0.0, magnitude = 0.0;
    for (size_t i = 0; i < n; ++i) {
        want += x[i];
        magnitude += fabs(x[i]);
    }
    bool good = fabs(sum - want) <= 1e-6 * magnitude;
    for (size_t r = 0; r < ROWS; ++r) {
        double dot = 0.0, scale = 0.0;
        for (size_t i = 0; i < n; ++i) {
            dot += (double)p[r * n + i] * x[i];
            scale += fabs((double)p[r * n + i] * x[i]);
        }
        good = good &&
               fabs(y[r] - dot) <= 2.0 * (double)(n + 3) * 0x1.0p-24 * scale;
    }
    return good;
}

int main(int argc, char **argv)
{
    size_t n = 1 << 20;
    if (argc > 2 || (argc == 2 && !parse_count(argv[1], &n))) {
        fprintf(stderr, "usage: %s [n]  (1 to 2^28 elements)\n", argv[0]);
        return 2;
    }
    float *x = allocate_floats(n);
    float *p = allocate_floats(ROWS * n);
    float *y = allocate_floats(ROWS);
    if (x == NULL || p == NULL || y == NULL) {
        fprintf(stderr, "wrap: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; ++i) {
        x[i] = 0.0f;
    }
    for (size_t i = 0; i < ROWS * n; ++i) {
        p[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    }

    int status = 1;
    locus_context *context = NULL;
    locus_buffer *xb = NULL, *pb = NULL, *yb = NULL;
    if (!ok(locus_context_create(NULL, &context), "creating a context")) {
        goto free_arrays;
    }
    if (!ok(locus_buffer_wrap(context, x, n * sizeof(float), &xb), "wrap x") ||
        !ok(locus_buffer_wrap(context, p, ROWS * n * sizeof(float), &pb),
            "wrap P") ||
        !ok(locus_buffer_wrap(context, y, ROWS * sizeof(float), &yb),
            "wrap y")) {
        goto destroy;
    }
    locus_reduce_desc sum_desc;
    locus_reduce_desc_init(&sum_desc);
    sum_desc.op = LOCUS_REDUCE_SUM;
    sum_desc.count = n;
    locus_gemm_desc project;
    locus_gemm_desc_init(&project);
    project.m = ROWS;
    project.n = 1; /* x as an n x 1 matrix */
    project.k = n;
    project.alpha = 1.0;
    project.beta = 0.0;

    status = 0;
    for (int step = 0; step < STEPS && status == 0; ++step) {
        double sum = 0.0;
        locus_record sum_record, project_record;
        locus_record_init(&sum_record);
        locus_record_init(&project_record);
        if (!update_state(xb, x, n, step) ||
            !ok(locus_reduce(context, NULL, &sum_desc, xb, &sum, &sum_record),
                "reduce") ||
            !ok(locus_gemm(context, NULL, &project, pb, xb, yb,
                           &project_record),
                "gemm")) {
            status = 1;
            break;
        }
        /* y is read straight from the program's array. */
        bool good = check(x, p, y, n, sum);
        printf("step %d: sum %.6g on %s, y[0] %.6g on %s: %s\n", step, sum,
               sum_record.device, (double)y[0], project_record.device,
               good ? "ok" : "FAIL");
        status = good ? 0 : 1;
    }
destroy:
    locus_buffer_destroy(yb);
    locus_buffer_destroy(pb);
    locus_buffer_destroy(xb);
    locus_context_destroy(context);
free_arrays:
    free(y);
    free(p);
    free(x);
    return status;
}
