/* A module built against another ABI: a future one, or (compiled with
 * -DTEST_ABI_VERSION=1 -DTEST_NAME='"ancient"', modules/abi_v1) the first,
 * from before backends described themselves. The loader must refuse it,
 * naming both versions, and call nothing in it. */
#include <locus/backend.h>

#ifndef TEST_ABI_VERSION
#define TEST_ABI_VERSION (LOCUS_BACKEND_ABI_VERSION + 1)
#endif
#ifndef TEST_NAME
#define TEST_NAME "cuda"
#endif

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
    .abi_version = TEST_ABI_VERSION,
    .name = TEST_NAME,
    .host_memory = 1,
    .init = never_called,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
