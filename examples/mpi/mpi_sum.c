/* Distributed sum with Locus and MPI.
 *
 * Each rank fills its slice of one long vector with seeded random floats,
 * sums the slice with locus_reduce on the device Locus picks for it (device
 * NULL: LOCUS_DEVICE, or the scheduler's choice, which spreads the ranks of
 * one machine over its GPUs), and MPI_Allreduce adds the ranks' sums. The
 * total is checked against a float64 sum of the same floats; the program
 * exits nonzero when any rank fails.
 *
 * Build and run against an installed Locus (PKG_CONFIG_PATH as the README
 * says), in the folder of this file (as root, Open MPI also wants
 * OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1):
 *
 *   $ mpicc -std=c17 mpi_sum.c $(pkg-config --cflags --libs locus) \
 *         -lm -o mpi_sum
 *   $ mpirun -np 2 ./mpi_sum 100003
 *
 * usage: mpirun -np RANKS ./mpi_sum [elements [seed]]
 *
 * Plain C17 on the public API (locus/locus.h) and MPI; docs/MPI.md. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>
#include <mpi.h>

/* Any order of adding the floats in float32 blocks and float64 across
 * blocks stays far inside this bound, relative to the sum of the
 * magnitudes (the values are positive, so that is the sum itself). */
#define SUM_TOLERANCE 1e-6

/* Element i of the whole vector, the same on every rank whatever the rank
 * count: a hash of (seed, i) made a float in [0, 1) with 24 exact bits. */
static float element(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return (float)(z >> 40) * 0x1.0p-24f;
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

static bool parse_size(const char *text, uint64_t *value)
{
    char *end = NULL;
    unsigned long long parsed = strtoull(text, &end, 0);
    if (end == text || *end != '\0' || text[0] == '-')
        return false;
    *value = parsed;
    return true;
}

static bool locus_ok(locus_status status, const char *call, int rank)
{
    if (status == LOCUS_SUCCESS)
        return true;
    fprintf(stderr, "rank %d: %s failed: %s\n", rank, call, locus_last_error());
    return false;
}

/* The rank's work: its slice [begin, end) summed by Locus, and by float64
 * here. Returns false on any failure (already reported). */
static bool sum_slice(uint64_t seed, uint64_t begin, uint64_t end, int rank,
                      double *sum, double *reference, locus_record *record)
{
    bool ok = false;
    locus_context *context = NULL;
    locus_buffer *x = NULL;
    size_t count = (size_t)(end - begin);
    if (!locus_ok(locus_context_create(NULL, &context), "locus_context_create",
                  rank))
        return false;
    /* Mapping fills the buffer in place: its pages stay where Locus placed
     * them (first touch by the workers that will sum them). */
    void *host = NULL;
    if (!locus_ok(locus_buffer_create(context, count * sizeof(float), NULL, &x),
                  "locus_buffer_create", rank) ||
        !locus_ok(locus_buffer_map(x, LOCUS_MAP_WRITE, &host),
                  "locus_buffer_map", rank))
        goto destroy;
    float *values = host;
    *reference = 0.0;
    for (size_t i = 0; i < count; i++) {
        values[i] = element(seed, begin + i);
        *reference += values[i];
    }
    if (!locus_ok(locus_buffer_unmap(x), "locus_buffer_unmap", rank))
        goto destroy;
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.op = LOCUS_REDUCE_SUM;
    desc.count = count;
    ok = locus_ok(locus_reduce(context, NULL, &desc, x, sum, record),
                  "locus_reduce", rank);
destroy:
    locus_buffer_destroy(x);
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

    /* A prime: the slices are uneven. */
    uint64_t total = 10000019, seed = 20240607;
    if ((argc > 1 && (!parse_size(argv[1], &total) || total == 0)) ||
        (argc > 2 && !parse_size(argv[2], &seed)) || argc > 3) {
        if (rank == 0)
            fprintf(stderr, "usage: %s [elements (at least 1) [seed]]\n",
                    argv[0]);
        check_mpi(MPI_Finalize(), "MPI_Finalize", rank);
        return 2;
    }
    uint64_t r = (uint64_t)rank, n = (uint64_t)ranks;
    uint64_t begin = total / n * r + (r < total % n ? r : total % n);
    uint64_t end = begin + total / n + (r < total % n ? 1 : 0);

    /* A rank whose slice is empty (more ranks than elements) has nothing
     * to reduce: Locus refuses a reduction of zero elements. */
    double local[2] = {0.0, 0.0}; /* Locus's sum, the float64 sum */
    locus_record record;
    locus_record_init(&record);
    int ok = 1;
    if (end > begin)
        ok = sum_slice(seed, begin, end, rank, &local[0], &local[1], &record);

    double global[2];
    int all_ok = 0;
    check_mpi(
        MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce", rank);
    check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce", rank);
    double local_error = fabs(local[0] - local[1]) / fmax(local[1], 1e-300);
    double error = fabs(global[0] - global[1]) / fmax(global[1], 1e-300);
    bool good =
        all_ok && local_error <= SUM_TOLERANCE && error <= SUM_TOLERANCE;
    printf("rank %d/%d: sum of elements [%" PRIu64 ", %" PRIu64 ") on %s "
           "(%.6f s): %.9g, float64 %.9g, relative error %.2g; total %.9g, "
           "float64 %.9g, relative error %.2g (seed %" PRIu64 "): %s\n",
           rank, ranks, begin, end, end > begin ? record.device : "no device",
           record.seconds, local[0], local[1], local_error, global[0],
           global[1], error, seed, good ? "ok" : "FAILED");
    fflush(stdout);
    check_mpi(MPI_Finalize(), "MPI_Finalize", rank);
    return good ? 0 : 1;
}
