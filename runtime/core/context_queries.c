/* What a client may ask of a context once it is made: the settings it was
 * made with, the NUMA nodes and their distances, where the topology came
 * from, the backends and why one is absent. Read-only; the life cycle that
 * fills these is context.c. */
#include "context_types.h"

#include <stdio.h>
#include <string.h>

#include "status.h"

LOCUS_API locus_status locus_setting_count(const locus_context *context,
                                           size_t *count)
{
    locus__clear_error();
    if (!context || !count)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "count" : "context");
    *count = LOCUS__SETTING_COUNT;
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_setting_get(const locus_context *context,
                                         size_t index, locus_setting *out)
{
    locus__clear_error();
    if (!context || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "out" : "context");
    if (index >= LOCUS__SETTING_COUNT)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "setting index %zu; there are %d", index,
                           LOCUS__SETTING_COUNT);
    const locus__setting_text *setting = &context->config.settings[index];
    out->name = locus__setting_name((locus__setting_id)index);
    out->raw = setting->raw;
    out->source = setting->source;
    out->resolved = setting->resolved;
    return LOCUS_SUCCESS;
}

void locus_numa_node_info_init(locus_numa_node_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

LOCUS_API locus_status locus_numa_node_count(const locus_context *context,
                                             size_t *count)
{
    locus__clear_error();
    if (!context || !count)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "count" : "context");
    *count = (size_t)context->topology.node_count;
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_numa_node_get(const locus_context *context,
                                           size_t index,
                                           locus_numa_node_info *info)
{
    locus__clear_error();
    if (!context || !info)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "info" : "context");
    if (info->struct_size < sizeof *info)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "info struct_size %zu: call "
                           "locus_numa_node_info_init first",
                           info->struct_size);
    if (index >= (size_t)context->topology.node_count)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "node position %zu; the topology has %d", index,
                           context->topology.node_count);
    const locus__numa_node *node = &context->topology.nodes[index];
    info->os_index = node->os_index;
    info->memory_bytes = node->memory_bytes;
    info->cpu_count = hwloc_bitmap_weight(node->allowed_cpus);
    snprintf(info->cpus, sizeof info->cpus, "%s", node->cpu_list);
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_numa_distance(const locus_context *context,
                                           size_t from, size_t to,
                                           unsigned *distance)
{
    locus__clear_error();
    if (!context || !distance)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "distance" : "context");
    size_t n = (size_t)context->topology.node_count;
    if (from >= n || to >= n)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "node positions %zu, %zu; the topology has %zu",
                           from, to, n);
    if (context->topology.distances)
        *distance = context->topology.distances[from * n + to];
    else
        *distance = n == 1 ? 10 : 0;
    return LOCUS_SUCCESS;
}

LOCUS_API int locus_topology_is_this_system(const locus_context *context)
{
    return context && context->topology.is_this_system;
}

LOCUS_API const char *locus_topology_source(const locus_context *context)
{
    return context ? context->topology.source : "";
}

void locus_backend_info_init(locus_backend_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
}

LOCUS_API locus_status locus_backend_count(const locus_context *context,
                                           size_t *count)
{
    locus__clear_error();
    if (!context || !count)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "count" : "context");
    *count = context->backend_count;
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_backend_get(const locus_context *context,
                                         size_t index, locus_backend_info *info)
{
    locus__clear_error();
    if (!context || !info)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "info" : "context");
    if (info->struct_size < sizeof *info)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "info struct_size %zu: call "
                           "locus_backend_info_init first",
                           info->struct_size);
    if (index >= context->backend_count)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "backend index %zu; there are %zu", index,
                           context->backend_count);
    const locus__backend_slot *slot = &context->backends[index];
    snprintf(info->name, sizeof info->name, "%s", slot->name);
    info->available = slot->available;
    snprintf(info->reason, sizeof info->reason, "%s", slot->reason);
    info->device_count = 0;
    for (size_t d = 0; d < context->device_count; d++)
        info->device_count += context->devices[d].backend == slot;
    return LOCUS_SUCCESS;
}
