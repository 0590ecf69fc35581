/* A module whose probe finds no device: the backend is absent, with the
 * module's own reason. */
#include <stdio.h>

#include <locus/backend.h>

static locus_status probe(const locus_services *services, void *runtime,
                          void **state, size_t *device_count, char *reason,
                          size_t reason_size)
{
    (void)services, (void)runtime;
    *state = NULL;
    *device_count = 0;
    snprintf(reason, reason_size, "probe found no fake device");
    return LOCUS_SUCCESS;
}

static locus_status describe(void *state, size_t device,
                             locus_device_info *info)
{
    (void)state, (void)device, (void)info;
    return LOCUS_ERROR_BACKEND;
}

static const locus_backend table = {
    .struct_size = sizeof table,
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "opencl",
    .host_memory = 1,
    .init = probe,
    .device_info = describe,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
