#include <locus/locus.h>

#include <hwloc.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "isa.h"
#include "status.h"

#define LOCUS_STRINGIFY_(x) #x
#define LOCUS_VERSION_TEXT_(a, b, c)                                           \
    LOCUS_STRINGIFY_(a) "." LOCUS_STRINGIFY_(b) "." LOCUS_STRINGIFY_(c)

int locus_version(void)
{
    return LOCUS_VERSION;
}

const char *locus_version_string(void)
{
    return LOCUS_VERSION_TEXT_(LOCUS_VERSION_MAJOR, LOCUS_VERSION_MINOR,
                               LOCUS_VERSION_PATCH);
}

void locus_build_info_init(locus_build_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

locus_status locus_build_info_get(locus_build_info *info)
{
    locus__clear_error();
    if (!info)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "info is NULL");
    if (info->struct_size < sizeof *info)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "info struct_size %zu: call "
                           "locus_build_info_init first",
                           info->struct_size);
        /* HWLOC_VERSION is the release; HWLOC_API_VERSION only moves with the
         * API, so the release is the one a bug report needs. */
#ifdef HWLOC_VERSION
    snprintf(info->hwloc_built, sizeof info->hwloc_built, "%s", HWLOC_VERSION);
#else
    snprintf(info->hwloc_built, sizeof info->hwloc_built, "API %u.%u",
             HWLOC_API_VERSION >> 16, HWLOC_API_VERSION >> 8 & 0xffu);
#endif
    info->hwloc_api_loaded = hwloc_get_api_version();
    snprintf(info->cpu_isa_tables, sizeof info->cpu_isa_tables, "%s",
             locus__cpu_isa_tables());
    snprintf(info->cpu_isa_best, sizeof info->cpu_isa_best, "%s",
             locus__cpu_isa_best()->name);
    return LOCUS_SUCCESS;
}
