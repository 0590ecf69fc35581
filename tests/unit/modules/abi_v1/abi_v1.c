/* A module built for the first backend ABI, before backends described
 * themselves: the loader must refuse it by its version, naming both, and
 * call nothing in it. Its table declares version 1 and the size of the
 * version-1 struct (which ended at unpin). */
#include <stddef.h>

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
    .struct_size = offsetof(locus_backend, unpin) + sizeof(void (*)(void)),
    .abi_version = 1,
    .name = "ancient",
    .host_memory = 1,
    .init = never_called,
    .device_info = NULL,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
