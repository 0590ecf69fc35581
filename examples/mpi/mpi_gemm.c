/* Distributed SGEMM with Locus and MPI: C = A B, row-major.
 *
 * Rank 0 makes A (m x k) and B (k x n) from a seed, scatters the rows of A
 * in blocks, one per rank (uneven when the ranks do not divide m), and
 * broadcasts B. Each rank computes its block of rows of C with locus_gemm
 * on the device Locus picks for it (device NULL: LOCUS_DEVICE, or the
 * scheduler's choice, which spreads the ranks of one machine over its
 * GPUs) and checks every element of its block against a float64 product.
 * The program exits nonzero when any rank fails.
 *
 * Build and run against an installed Locus (PKG_CONFIG_PATH as the README
 * says), in the folder of this file (as root, Open MPI also wants
 * OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1):
 *
 *   $ mpicc -std=c17 mpi_gemm.c $(pkg-config --cflags --libs locus) \
 *         -lm -o mpi_gemm
 *   $ mpirun -np 2 ./mpi_gemm 61 33 17
 *
 * usage: mpirun -np RANKS ./mpi_gemm [m n k [seed]]
 *
 * Plain C17 on the public API (locus/locus.h) and MPI; docs/MPI.md. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>
#include <mpi.h>

/* Values in [-1, 1) from a hash of (seed, stream, i): the same on every
 * run, with 24 exact bits. */
static float element(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint64_t z = seed ^ (stream << 56);
    z += (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return (float)(z >> 40) * 0x1.0p-23f - 1.0f;
}

/* MPI errors return rather than abort (MPI_ERRORS_RETURN below); one that
 * happens leaves the ranks out of step, so the job ends here. */
static void check_mpi(int code, const char *call, int rank)
{
    if (code == MPI_SUCCESS)
        return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, call, text);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static bool locus_ok(locus_status status, const char *call, int rank)
{
    if (status == LOCUS_SUCCESS)
        return true;
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, call, locus_last_error());
    return false;
}

static bool parse_size(const char *text, size_t *value)
{
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 0);
    if (end == text || *end != '\0' || text[0] == '-' || parsed == 0 ||
        parsed > INT_MAX)
        return false;
    *value = (size_t)parsed;
    return true;
}

static float *allocate_floats(size_t count, int rank)
{
    /* One float at least: a rank without rows still passes a buffer. */
    float *p = malloc((count > 0 ? count : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "rank %d: cannot allocate %zu floats\n", rank, count);
        MPI_Abort(MPI_COMM_WORLD, 1);
        exit(1);
    }
    return p;
}

/* Each element's error against the float64 product, relative to
 * sum_k |a||b| (the scale of what was summed, so that cancellation does
 * not inflate it). Any order of k float32 additions stays within (k + 3)
 * 2^-24 of that; twice that is allowed. NaN (an element never written:
 * C starts as NaN) counts as infinite. */
static double worst_error(const float *a, const float *b, const float *c,
                          size_t rows, size_t n, size_t k)
{
    double worst = 0.0;
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < n; j++) {
            double dot = 0.0, scale = 0.0;
            for (size_t p = 0; p < k; p++) {
                double product = (double)a[i * k + p] * b[p * n + j];
                dot += product;
                scale += fabs(product);
            }
            double error = fabs(c[i * n + j] - dot) / fmax(scale, 1e-300);
            if (!(error <= worst))
                worst = isnan(error) ? INFINITY : error;
        }
    }
    return worst;
}

/* The rank's block: C rows = A rows x B on the device Locus picks. */
static bool multiply(const float *a, const float *b, float *c, size_t rows,
                     size_t n, size_t k, int rank, locus_record *record)
{
    bool ok = false;
    locus_context *context = NULL;
    locus_buffer *ab = NULL, *bb = NULL, *cb = NULL;
    if (!locus_ok(locus_context_create(NULL, &context), "locus_context_create",
                  rank))
        return false;
    if (!locus_ok(
            locus_buffer_create(context, rows * k * sizeof(float), NULL, &ab),
            "locus_buffer_create(A)", rank) ||
        !locus_ok(
            locus_buffer_create(context, k * n * sizeof(float), NULL, &bb),
            "locus_buffer_create(B)", rank) ||
        !locus_ok(
            locus_buffer_create(context, rows * n * sizeof(float), NULL, &cb),
            "locus_buffer_create(C)", rank) ||
        !locus_ok(locus_buffer_write(ab, 0, a, rows * k * sizeof(float)),
                  "locus_buffer_write(A)", rank) ||
        !locus_ok(locus_buffer_write(bb, 0, b, k * n * sizeof(float)),
                  "locus_buffer_write(B)", rank) ||
        !locus_ok(locus_buffer_write(cb, 0, c, rows * n * sizeof(float)),
                  "locus_buffer_write(C)", rank))
        goto destroy;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = rows;
    desc.n = n;
    desc.k = k;
    desc.alpha = 1.0;
    desc.beta = 0.0;
    ok = locus_ok(locus_gemm(context, NULL, &desc, ab, bb, cb, record),
                  "locus_gemm", rank) &&
         locus_ok(locus_buffer_read(cb, 0, c, rows * n * sizeof(float)),
                  "locus_buffer_read(C)", rank);
destroy:
    locus_buffer_destroy(cb);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(ab);
    locus_context_destroy(context);
    return ok;
}

int main(int argc, char **argv)
{
    int rank = 0, ranks = 1;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Init failed\n");
        return 1;
    }
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler", rank);
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", rank);
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &ranks), "MPI_Comm_size", rank);

    /* Odd sizes: the row blocks are uneven and no dimension is a multiple
     * of a kernel's tile. */
    size_t m = 1001, n = 333, k = 257;
    uint64_t seed = 20240607;
    bool usage = argc != 1 && argc != 4 && argc != 5;
    if (!usage && argc >= 4)
        usage = !parse_size(argv[1], &m) || !parse_size(argv[2], &n) ||
                !parse_size(argv[3], &k);
    if (!usage && argc == 5) {
        char *end = NULL;
        seed = strtoull(argv[4], &end, 0);
        usage = end == argv[4] || *end != '\0';
    }
    /* MPI counts are ints. */
    if (!usage && (m * k > INT_MAX || k * n > INT_MAX))
        usage = true;
    if (usage) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: %s [m n k [seed]] (positive, m*k and k*n below "
                    "2^31)\n",
                    argv[0]);
        check_mpi(MPI_Finalize(), "MPI_Finalize", rank);
        return 2;
    }

    int *counts = malloc((size_t)ranks * sizeof(int));
    int *offsets = malloc((size_t)ranks * sizeof(int));
    if (!counts || !offsets) {
        fprintf(stderr, "rank %d: cannot allocate the block table\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    size_t first_row = 0, rows = 0;
    for (int r = 0; r < ranks; r++) {
        size_t ur = (size_t)r, un = (size_t)ranks;
        size_t begin = m / un * ur + (ur < m % un ? ur : m % un);
        size_t count = m / un + (ur < m % un ? 1 : 0);
        counts[r] = (int)(count * k);
        offsets[r] = (int)(begin * k);
        if (r == rank) {
            first_row = begin;
            rows = count;
        }
    }

    float *a_all = NULL;
    float *a = allocate_floats(rows * k, rank);
    float *b = allocate_floats(k * n, rank);
    float *c = allocate_floats(rows * n, rank);
    if (rank == 0) {
        a_all = allocate_floats(m * k, rank);
        for (size_t i = 0; i < m * k; i++)
            a_all[i] = element(seed, 1, i);
        for (size_t i = 0; i < k * n; i++)
            b[i] = element(seed, 2, i);
    }
    check_mpi(MPI_Scatterv(a_all, counts, offsets, MPI_FLOAT, a, counts[rank],
                           MPI_FLOAT, 0, MPI_COMM_WORLD),
              "MPI_Scatterv", rank);
    check_mpi(MPI_Bcast(b, (int)(k * n), MPI_FLOAT, 0, MPI_COMM_WORLD),
              "MPI_Bcast", rank);
    for (size_t i = 0; i < rows * n; i++)
        c[i] = NAN;

    locus_record record;
    locus_record_init(&record);
    int ok = 1;
    double error = 0.0;
    if (rows > 0) {
        ok = multiply(a, b, c, rows, n, k, rank, &record);
        error = ok ? worst_error(a, b, c, rows, n, k) : INFINITY;
    }
    double tolerance = 2.0 * ((double)k + 3.0) * 0x1.0p-24;
    int good = ok && error <= tolerance;
    int all_good = 0;
    double worst = 0.0;
    check_mpi(
        MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
        "MPI_Allreduce", rank);
    check_mpi(
        MPI_Allreduce(&error, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
        "MPI_Allreduce", rank);
    double gflops =
        record.seconds > 0.0 ? record.flops / record.seconds / 1e9 : 0.0;
    printf("rank %d/%d: C rows [%zu, %zu) of %zux%zu (k %zu) on %s (%.6f s, "
           "%.3g GFLOP/s): max relative error %.2g (tolerance %.2g), all "
           "ranks %.2g (seed %" PRIu64 "): %s\n",
           rank, ranks, first_row, first_row + rows, m, n, k,
           rows > 0 ? record.device : "no device", record.seconds, gflops,
           error, tolerance, worst, seed,
           good ? (all_good ? "ok" : "ok here, FAILED elsewhere") : "FAILED");
    fflush(stdout);
    free(a_all);
    free(a);
    free(b);
    free(c);
    free(counts);
    free(offsets);
    check_mpi(MPI_Finalize(), "MPI_Finalize", rank);
    return all_good ? 0 : 1;
}
