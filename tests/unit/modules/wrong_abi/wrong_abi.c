/* A module built against a future ABI: the loader must refuse it, naming
 * both versions, and call nothing in it. */
#include <locus/backend.h>

static locus_status never_called(const locus_services *services, void *runtime,
                                 void **state, size_t *device_count,
                                 char *reason, size_t reason_size)
{
    (void)services, (void)runtime, (void)state, (void)reason, (void)reason_size;
    *device_count = 1;
    __builtin_trap();
}

static const locus_backend table = {
    .struct_size = sizeof table,
    .abi_version = LOCUS_BACKEND_ABI_VERSION + 1,
    .name = "cuda",
    .host_memory = 1,
    .init = never_called,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
