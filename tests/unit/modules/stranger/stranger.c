/* A backend the runtime has never heard of: "tally", two host-memory
 * devices that describe themselves. Each has a lane number (3 and 5), its
 * own selector part ("tally:lane=5"), which is also how its devices are
 * spelled; it answers tally:N too. Its nominal figures are faster than any
 * CPU's, so the cost model would send it every op it offers. It offers
 * reduce and says it does not offer gemm, although its table has a gemm
 * function: one that writes NaN over C and reports success, so that a gemm
 * the scheduler sent here anyway shows in the result. */
#include <stdio.h>
#include <string.h>

#include <locus/backend.h>

#include "../fake_reduce.h"

static const int lanes[] = {3, 5};
#define DEVICE_COUNT (sizeof lanes / sizeof lanes[0])

static locus_status init(const locus_services *services, void *runtime,
                         void **state, size_t *device_count, char *reason,
                         size_t reason_size)
{
    (void)runtime;
    *state = (void *)services;
    *device_count = DEVICE_COUNT;
    snprintf(reason, reason_size, "%zu tally devices", DEVICE_COUNT);
    return LOCUS_SUCCESS;
}

static void fini(void *state)
{
    (void)state;
}

static locus_status describe(void *state, size_t device,
                             locus_device_info *info)
{
    (void)state;
    snprintf(info->name, sizeof info->name, "tally lane %d", lanes[device]);
    snprintf(info->vendor, sizeof info->vendor, "locus tests");
    info->kind = LOCUS_DEVICE_ACCELERATOR;
    info->compute_units = 1;
    return LOCUS_SUCCESS;
}

/* "lane=N": the device of lane N. */
static int lane_of(const char *part)
{
    int lane = -1;
    char end;
    if (sscanf(part, "lane=%d%c", &lane, &end) != 1 || lane < 0)
        return -1;
    return lane;
}

static int selector_part(void *state, size_t device, const char *part,
                         char *why, size_t why_size)
{
    int lane = lane_of(part);
    if (lane < 0) {
        snprintf(why, why_size, "'%s' is not lane=N", part);
        return -1;
    }
    if (!state)
        return 0;
    if (lanes[device] == lane)
        return 1;
    snprintf(why, why_size, "no lane %d: the lanes are 3 and 5", lane);
    return 0;
}

static void device_selector(void *state, size_t device, char *part,
                            size_t capacity)
{
    (void)state;
    snprintf(part, capacity, "lane=%d", lanes[device]);
}

static void nominal_rates(void *state, size_t device,
                          const locus_device_info *info,
                          locus_backend_rates *rates)
{
    (void)state, (void)device, (void)info;
    *rates = (locus_backend_rates){.launch_seconds = 1e-9,
                                   .gemm_fixed_seconds = 1e-9,
                                   .gemm_flops = 1e18,
                                   .conv_fixed_seconds = 1e-9,
                                   .conv_flops = 1e18,
                                   .reduce_bytes = 1e18};
}

static int offers(void *state, size_t device, locus_op_kind op, int algorithm,
                  locus_dtype dtype)
{
    (void)state, (void)device, (void)algorithm;
    return op == LOCUS_OP_REDUCE && dtype == LOCUS_DTYPE_F32;
}

static locus_status reduce(void *state, size_t device,
                           const locus_reduce_desc *desc, const void *x,
                           double *result, locus_op_context *op)
{
    (void)state, (void)device;
    *result = fake_reduce(desc, x);
    locus_op_set_algorithm(op, "tally");
    return LOCUS_SUCCESS;
}

static locus_status gemm(void *state, size_t device, const locus_gemm_desc *d,
                         const void *a, const void *b, void *c,
                         locus_op_context *op)
{
    (void)state, (void)device, (void)a, (void)b;
    float *C = c;
    for (size_t i = 0; i < d->m; i++)
        for (size_t j = 0; j < d->n; j++)
            C[i * d->ldc + j] = __builtin_nanf("");
    locus_op_set_algorithm(op, "tally");
    return LOCUS_SUCCESS;
}

static const locus_backend table = {
    .struct_size = sizeof table,
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "tally",
    .host_memory = 1,
    .init = init,
    .fini = fini,
    .device_info = describe,
    .reduce = reduce,
    .gemm = gemm,
    .selector_parts = LOCUS_SELECTOR_INDEX,
    .selector_part = selector_part,
    .device_selector = device_selector,
    .nominal_rates = nominal_rates,
    .offers = offers,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
