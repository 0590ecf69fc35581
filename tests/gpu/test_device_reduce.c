/* Reduce on the device under test (device_test.h) against float64: sum,
 * min and max over counts that are not multiples of any vector or group
 * size, from 1 element to a few million; the deterministic default repeats
 * bit for bit, the atomic variant agrees within the tolerance; a NaN makes
 * min and max NaN; the IEEE rules (tests/common/ieee_reduce.h). */
#include "device_test.h"

#include "../common/ieee_reduce.h"

static const size_t counts[] = {
    1,      2, 3, 4, 5, 7, 33, 1000, 1023, 4099, 65537, 1000003, (1u << 20) + 3,
    3000017};

static const char *const op_names[] = {"sum", "min", "max"};

static locus_status run(locus_context *context, locus_device *device,
                        locus_buffer *x, size_t count, locus_reduce_op op,
                        int atomic, double *result, locus_record *record)
{
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.op = op;
    desc.count = count;
    desc.allow_atomic = atomic;
    locus_record_init(record);
    *result = NAN;
    return locus_reduce(context, device, &desc, x, result, record);
}

static void check_count(locus_context *context, locus_device *gpu, size_t count)
{
    float *host = malloc(count * sizeof(float));
    CHECK(host != NULL, "malloc of %zu floats", count);
    if (host == NULL)
        return;
    cuda_test_fill(host, count);
    double sum = 0.0, magnitude = 0.0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < count; i++) {
        sum += host[i];
        magnitude += fabs(host[i]);
        lo = host[i] < lo ? host[i] : lo;
        hi = host[i] > hi ? host[i] : hi;
    }
    const double expected[] = {sum, lo, hi};
    locus_buffer *x = cuda_test_buffer(context, host, count);
    if (x == NULL) {
        free(host);
        return;
    }
    const double tolerance = cuda_test_tolerance(count, 0.0);
    for (int op = 0; op < 3; op++) {
        for (int atomic = 0; atomic <= 1; atomic++) {
            double first = NAN, second = NAN;
            locus_record record;
            locus_status status =
                run(context, gpu, x, count, (locus_reduce_op)op, atomic, &first,
                    &record);
            CHECK(status == LOCUS_SUCCESS, "reduce %s of %zu (atomic %d): %s",
                  op_names[op], count, atomic, locus_last_error());
            if (status != LOCUS_SUCCESS)
                continue;
            double error = op == 0
                               ? cuda_test_error(first, expected[op], magnitude)
                               : fabs(first - expected[op]);
            CHECK(op == 0 ? error <= tolerance : error == 0.0,
                  "reduce %s of %zu (atomic %d, %s): %.17g, expected %.17g, "
                  "relative error %.3g, tolerance %.3g",
                  op_names[op], count, atomic, record.algorithm, first,
                  expected[op], error, op == 0 ? tolerance : 0.0);
            if (op == 0 && count >= 1000003)
                printf("reduce sum of %zu (%s): relative error %.3g vs "
                       "float64 (tolerance %.3g)\n",
                       count, record.algorithm, error, tolerance);
            if (!atomic) {
                status = run(context, gpu, x, count, (locus_reduce_op)op, 0,
                             &second, &record);
                CHECK(status == LOCUS_SUCCESS &&
                          memcmp(&first, &second, sizeof first) == 0,
                      "reduce %s of %zu is not deterministic: %.17g then "
                      "%.17g (%s)",
                      op_names[op], count, first, second, locus_last_error());
            }
        }
    }
    locus_buffer_destroy(x);
    free(host);
}

/* A NaN anywhere makes min and max NaN, as on the CPU. */
static void check_nan(locus_context *context, locus_device *gpu)
{
    const size_t count = 4099;
    const size_t positions[] = {0, 1, 2, 3, 2048, 4098};
    float *host = malloc(count * sizeof(float));
    CHECK(host != NULL, "malloc");
    if (host == NULL)
        return;
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
        cuda_test_fill(host, count);
        host[positions[p]] = NAN;
        locus_buffer *x = cuda_test_buffer(context, host, count);
        for (int op = 1; x != NULL && op < 3; op++) {
            for (int atomic = 0; atomic <= 1; atomic++) {
                double result = 0.0;
                locus_record record;
                locus_status status =
                    run(context, gpu, x, count, (locus_reduce_op)op, atomic,
                        &result, &record);
                CHECK(status == LOCUS_SUCCESS && isnan(result),
                      "reduce %s with NaN at %zu (atomic %d): %s %.17g",
                      op_names[op], positions[p], atomic,
                      locus_status_name(status), result);
            }
        }
        locus_buffer_destroy(x);
    }
    free(host);
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = device_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        check_count(context, gpu, counts[i]);
    check_nan(context, gpu);
    for (int atomic = 0; atomic <= 1; atomic++) {
        int failures =
            ieee_reduce_check(context, gpu, DEVICE_TEST_BACKEND, atomic);
        CHECK(failures == 0, "%d IEEE reduce case(s) wrong (atomic %d)",
              failures, atomic);
    }
    /* With no device the scheduler moves the op between this device and
     * the CPU as the count grows: the answers must not change. */
    CHECK(ieee_reduce_check(context, NULL, "auto", 0) == 0,
          "IEEE reduce cases wrong with the scheduler's choice");
    locus_context_destroy(context);
    return cuda_test_finish("test_" DEVICE_TEST_BACKEND "_reduce");
}
