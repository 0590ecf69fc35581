/* A loop of small ops for counting the runtime's instructions per op
 * (scripts/perf/op-instructions.sh runs it under callgrind). It uses only
 * the API that every version since 0.1 has, so one source builds against
 * the tree before the architecture work (#21) and after it.
 *
 *   op_overhead reduce|gemm SIZE COUNT [DEVICE|auto] [record|norecord]
 *
 * reduce: a sum of SIZE floats; gemm: SIZE^3 f32. DEVICE as
 * locus_device_find takes it (default "cpu"); "auto" passes NULL, so the
 * scheduler chooses each time. Each op gets a record, as `locus bench`
 * asks for one, unless "norecord". The ops run in locus_reduce and
 * locus_gemm only: the count of those functions is the per-op figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

static int fail(const char *step, locus_status status)
{
    fprintf(stderr, "op_overhead: %s: %s\n", step, locus_last_error());
    return status == LOCUS_SUCCESS ? 1 : 2;
}

static void fill(float *values, size_t count)
{
    unsigned state = 12345u;
    for (size_t i = 0; i < count; i++) {
        state = state * 1103515245u + 12345u;
        values[i] = (float)((state >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: op_overhead reduce|gemm SIZE COUNT "
                        "[DEVICE|auto] [record|norecord]\n");
        return 2;
    }
    const int is_gemm = strcmp(argv[1], "gemm") == 0;
    const size_t size = strtoul(argv[2], NULL, 10);
    const long count = strtol(argv[3], NULL, 10);
    const char *selector = argc > 4 ? argv[4] : "cpu";
    const int with_record = !(argc > 5 && strcmp(argv[5], "norecord") == 0);
    if (size == 0 || count < 0 || (!is_gemm && strcmp(argv[1], "reduce")))
        return fail("arguments", LOCUS_SUCCESS);

    locus_context *context = NULL;
    locus_status status = locus_context_create(NULL, &context);
    if (status != LOCUS_SUCCESS)
        return fail("context", status);
    locus_device *device = NULL;
    if (strcmp(selector, "auto") != 0) {
        status = locus_device_find(context, selector, &device);
        if (status != LOCUS_SUCCESS)
            return fail("device", status);
    }
    const size_t elements = is_gemm ? size * size : size;
    float *host = malloc(elements * sizeof *host);
    locus_buffer *buffers[3] = {NULL, NULL, NULL};
    const int buffer_count = is_gemm ? 3 : 1;
    if (!host)
        return fail("malloc", LOCUS_SUCCESS);
    fill(host, elements);
    for (int i = 0; i < buffer_count; i++) {
        status = locus_buffer_create(context, elements * sizeof *host, NULL,
                                     &buffers[i]);
        if (status == LOCUS_SUCCESS)
            status = locus_buffer_write(buffers[i], 0, host,
                                        elements * sizeof *host);
        if (status != LOCUS_SUCCESS)
            return fail("buffer", status);
    }

    locus_reduce_desc reduce;
    locus_reduce_desc_init(&reduce);
    reduce.count = size;
    locus_gemm_desc gemm;
    locus_gemm_desc_init(&gemm);
    gemm.m = gemm.n = gemm.k = size;
    locus_record record;
    double checksum = 0;
    /* One op first: the device copies, any calibration, the accounting's
     * lists; then the counted ones. */
    for (long i = 0; i <= count; i++) {
        locus_record_init(&record);
        locus_record *out = with_record ? &record : NULL;
        double value = 0;
        if (is_gemm)
            status = locus_gemm(context, device, &gemm, buffers[0], buffers[1],
                                buffers[2], out);
        else
            status =
                locus_reduce(context, device, &reduce, buffers[0], &value, out);
        if (status != LOCUS_SUCCESS)
            return fail(argv[1], status);
        checksum += value;
    }
    printf("%s %zu x %ld on %s: last record device %s, algorithm %s, "
           "checksum %.6g\n",
           argv[1], size, count, selector, with_record ? record.device : "-",
           with_record ? record.algorithm : "-", checksum);
    for (int i = 0; i < buffer_count; i++)
        locus_buffer_destroy(buffers[i]);
    free(host);
    locus_context_destroy(context);
    return 0;
}
