/* Single-node GEMM on the default device.
 *
 * C = A B for seeded random A (m x k) and B (k x n), on the device an op
 * given none runs on: LOCUS_DEVICE when set, else the cost model's choice
 * (a GPU for a large product where there is one). The matrices live in
 * buffers Locus allocates and places (LOCUS_NUMA); the program fills them
 * through a write mapping, reads C back through a read mapping, checks
 * every element against a float64 product, and prints the record: the
 * device, how it was chosen, the time and the bytes moved. Exits 1 when an
 * element is off or a call fails, 2 on a bad command line.
 *
 * Build and run against an installed Locus (PKG_CONFIG_PATH as the README
 * says), in the folder of this file:
 *
 *   $ cc -std=c17 gemm.c $(pkg-config --cflags --libs locus) -lm -o gemm
 *   $ ./gemm 300 200 100
 *
 * usage: gemm [m n k]  (default 512 512 512); LOCUS_DEVICE=cpu ./gemm runs
 * it on the CPU. Plain C17 on the public API (locus/locus.h). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

/* A float in [-1, 1) from a 64-bit state (xorshift64*). */
static float next_float(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    uint64_t bits = (*state * UINT64_C(0x2545f4914f6cdd1d)) >> 40;
    return (float)bits * 0x1.0p-23f - 1.0f;
}

static bool ok(locus_status status, const char *call)
{
    if (status == LOCUS_SUCCESS) {
        return true;
    }
    fprintf(stderr, "gemm: %s: %s\n", call, locus_last_error());
    return false;
}

static bool parse_size(const char *text, size_t *value)
{
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || text[0] == '-' || parsed == 0 ||
        parsed > 100000) {
        return false;
    }
    *value = (size_t)parsed;
    return true;
}

/* Fills a buffer of count floats with random values, through a write
 * mapping (the host copy, which the op then copies to a device if it
 * runs on one). */
static bool fill(locus_buffer *buffer, size_t count, uint64_t *state)
{
    void *host = NULL;
    if (!ok(locus_buffer_map(buffer, LOCUS_MAP_WRITE, &host), "map")) {
        return false;
    }
    float *values = host;
    for (size_t i = 0; i < count; ++i) {
        values[i] = next_float(state);
    }
    return ok(locus_buffer_unmap(buffer), "unmap");
}

/* The largest error of C against the float64 product, relative to
 * sum_p |a||b| for each element; any order of k float32 additions stays
 * within (k + 3) 2^-24 of it. NaN counts as infinite. */
static double worst_error(const float *a, const float *b, const float *c,
                          size_t m, size_t n, size_t k)
{
    double worst = 0.0;
    for (size_t i = 0; i < m; ++i) {
        for (size_t j = 0; j < n; ++j) {
            double dot = 0.0, scale = 0.0;
            for (size_t p = 0; p < k; ++p) {
                double product = (double)a[i * k + p] * b[p * n + j];
                dot += product;
                scale += fabs(product);
            }
            double error = fabs(c[i * n + j] - dot) / fmax(scale, 1e-300);
            if (!(error <= worst)) {
                worst = isnan(error) ? INFINITY : error;
            }
        }
    }
    return worst;
}

int main(int argc, char **argv)
{
    size_t m = 512, n = 512, k = 512;
    if ((argc != 1 && argc != 4) ||
        (argc == 4 && (!parse_size(argv[1], &m) || !parse_size(argv[2], &n) ||
                       !parse_size(argv[3], &k)))) {
        fprintf(stderr, "usage: %s [m n k]  (each 1 to 100000)\n", argv[0]);
        return 2;
    }
    locus_context *context = NULL;
    if (!ok(locus_context_create(NULL, &context), "creating a context")) {
        return 1;
    }
    int status = 1;
    locus_buffer *a = NULL, *b = NULL, *c = NULL;
    uint64_t state = UINT64_C(0x9e3779b97f4a7c15);
    if (!ok(locus_buffer_create(context, m * k * sizeof(float), NULL, &a),
            "creating A") ||
        !ok(locus_buffer_create(context, k * n * sizeof(float), NULL, &b),
            "creating B") ||
        !ok(locus_buffer_create(context, m * n * sizeof(float), NULL, &c),
            "creating C") ||
        !fill(a, m * k, &state) || !fill(b, k * n, &state)) {
        goto destroy;
    }

    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = m;
    desc.n = n;
    desc.k = k;
    desc.alpha = 1.0;
    desc.beta = 0.0; /* C is only written: its old contents do not matter */
    locus_record record;
    locus_record_init(&record);
    if (!ok(locus_gemm(context, NULL, &desc, a, b, c, &record), "gemm")) {
        goto destroy;
    }

    /* Read mappings of all three: C's comes back from the device that
     * computed it. */
    void *host_a = NULL, *host_b = NULL, *host_c = NULL;
    if (!ok(locus_buffer_map(a, LOCUS_MAP_READ, &host_a), "map A") ||
        !ok(locus_buffer_map(b, LOCUS_MAP_READ, &host_b), "map B") ||
        !ok(locus_buffer_map(c, LOCUS_MAP_READ, &host_c), "map C")) {
        goto destroy;
    }
    double error = worst_error(host_a, host_b, host_c, m, n, k);
    double bound = 2.0 * (double)(k + 3) * 0x1.0p-24;
    locus_buffer_unmap(c);
    locus_buffer_unmap(b);
    locus_buffer_unmap(a);

    printf("gemm %zux%zux%zu on %s (chosen by %s): %.3f ms, %.2f GFLOP/s, "
           "%llu bytes to the device, %llu back\n",
           m, n, k, record.device, record.chosen_by, record.seconds * 1e3,
           record.flops / record.seconds * 1e-9,
           (unsigned long long)record.bytes_to_device,
           (unsigned long long)record.bytes_from_device);
    printf("max relative error %.3g (bound %.3g): %s\n", error, bound,
           error <= bound ? "ok" : "FAIL");
    status = error <= bound ? 0 : 1;
destroy:
    locus_buffer_destroy(c);
    locus_buffer_destroy(b);
    locus_buffer_destroy(a);
    locus_context_destroy(context);
    return status;
}
