/* A host-memory device that offers reduce and nothing else: the tests of
 * the queues and the split use it for a device that does not offer an
 * op. It registers as the opencl backend. */
#include <stdio.h>

#include <locus/backend.h>

#include "../fake_reduce.h"

static locus_status init(const locus_services *services, void *runtime,
                         void **state, size_t *device_count, char *reason,
                         size_t reason_size)
{
    (void)services, (void)runtime, (void)reason, (void)reason_size;
    *state = NULL;
    *device_count = 1;
    return LOCUS_SUCCESS;
}

static void fini(void *state)
{
    (void)state;
}

static locus_status describe(void *state, size_t device,
                             locus_device_info *info)
{
    (void)state, (void)device;
    snprintf(info->name, sizeof info->name, "reduce-only device");
    snprintf(info->vendor, sizeof info->vendor, "locus tests");
    info->kind = LOCUS_DEVICE_ACCELERATOR;
    info->compute_units = 1;
    return LOCUS_SUCCESS;
}

static locus_status reduce(void *state, size_t device,
                           const locus_reduce_desc *desc, const void *x,
                           double *result, locus_op_context *op)
{
    (void)state, (void)device;
    *result = fake_reduce(desc, x);
    snprintf(op->record->algorithm, sizeof op->record->algorithm,
             "reduce-only");
    return LOCUS_SUCCESS;
}

static const locus_backend table = {
    .struct_size = sizeof table,
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "opencl",
    .host_memory = 1,
    .init = init,
    .fini = fini,
    .device_info = describe,
    .reduce = reduce,
    /* opencl:N and opencl:gpu, as the real one */
    .selector_parts = LOCUS_SELECTOR_INDEX | LOCUS_SELECTOR_KIND,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
