#include "services.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "account.h"
#include "buffer.h"
#include "context_types.h"
#include "placement.h"
#include "status.h"

static void service_log(void *runtime, locus_log_level level,
                        const char *format, ...)
{
    const locus_context *context = runtime;
    va_list args;
    va_start(args, format);
    locus__vlog_at(context->config.log_level, level, format, args);
    va_end(args);
}

static locus_status service_fail(locus_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    locus__vfail(status, format, args);
    va_end(args);
    return status;
}

static int service_worker_count(void *runtime, int node)
{
    const locus_context *context = runtime;
    return locus__pool_count_on(context->pool, node);
}

static locus_status service_run(void *runtime, int node, locus_worker_fn fn,
                                void *arg)
{
    locus_context *context = runtime;
    return locus__pool_run(context->pool, node, fn, arg);
}

static locus_status service_run_here(void *runtime, int node,
                                     locus_worker_fn fn, void *arg)
{
    locus_context *context = runtime;
    return locus__pool_run_here(context->pool, node, fn, arg);
}

static void service_account_read(locus_op_context *op, const void *memory,
                                 size_t bytes)
{
    if (op)
        locus__account_read(op->runtime_private, memory, bytes);
}

static void service_account_read_rows(locus_op_context *op, const void *memory,
                                      size_t row_bytes, size_t stride,
                                      size_t rows)
{
    if (op)
        locus__account_read_rows(op->runtime_private, memory, row_bytes, stride,
                                 rows);
}

static int service_numa_node_count(void *runtime)
{
    const locus_context *context = runtime;
    return context->topology.node_count;
}

static locus_status service_numa_node(void *runtime, int position,
                                      locus_numa_node_info *info)
{
    return locus_numa_node_get(runtime, (size_t)position, info);
}

/* Workspace memory: bound to a node when asked, plain otherwise. The pages
 * are not first-touched by the pool: the kernel that writes them first
 * places them. */
static void *service_host_alloc(void *runtime, size_t bytes, int node)
{
    const locus_context *context = runtime;
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = node >= 0 ? LOCUS_PLACE_NODE : LOCUS_PLACE_OFF;
    placement.node = node;
    locus__host_memory memory;
    if (locus__host_alloc(&context->topology, NULL, bytes, &placement,
                          &memory) != LOCUS_SUCCESS)
        return NULL;
    return memory.base;
}

static void service_host_free(void *runtime, void *memory, size_t bytes)
{
    (void)runtime;
    if (!memory)
        return;
    size_t page = locus__page_size();
    locus__host_memory block = {
        memory, (bytes + page - 1) / page * page, {0}, false};
    locus__host_free(&block);
}

static uint64_t service_pci_numa_mask(void *runtime, unsigned domain,
                                      unsigned bus, unsigned device,
                                      unsigned function)
{
    const locus_context *context = runtime;
    return locus__topology_pci_nodes(&context->topology, domain, bus, device,
                                     function);
}

static uint64_t service_cpuset_numa_mask(void *runtime, const char *cpu_list)
{
    const locus_context *context = runtime;
    if (!cpu_list)
        return locus__topology_nodes_of_cpus(&context->topology,
                                             context->topology.allowed_cpus);
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    if (!cpus)
        return 0;
    uint64_t mask = 0;
    if (hwloc_bitmap_list_sscanf(cpus, cpu_list) == 0)
        mask = locus__topology_nodes_of_cpus(&context->topology, cpus);
    hwloc_bitmap_free(cpus);
    return mask;
}

static const char *service_forced_cpu_isa(void *runtime)
{
    const locus_context *context = runtime;
    if (context->config.cpu_isa == LOCUS__ISA_NOT_FORCED)
        return NULL;
    return locus__isa_name(context->config.cpu_isa);
}

static int service_topology_is_this_system(void *runtime)
{
    const locus_context *context = runtime;
    return context->topology.is_this_system;
}

static size_t service_cache_bytes(void *runtime, int level)
{
    const locus_context *context = runtime;
    int sharing;
    return locus__topology_cache(&context->topology, level, &sharing);
}

static int service_cache_sharing(void *runtime, int level)
{
    const locus_context *context = runtime;
    int sharing;
    locus__topology_cache(&context->topology, level, &sharing);
    return sharing;
}

static int service_content_key(locus_op_context *op, const void *memory,
                               uint64_t key[2])
{
    if (!op || !op->runtime_private || !memory)
        return 0;
    const locus__account *account = op->runtime_private;
    for (size_t i = 0; i < account->buffer_count; i++) {
        locus_buffer *buffer = account->buffers[i];
        if (buffer->host != memory || buffer->wrapped)
            continue;
        pthread_mutex_lock(&buffer->state_lock);
        key[0] = buffer->id;
        key[1] = buffer->version;
        pthread_mutex_unlock(&buffer->state_lock);
        return 1;
    }
    return 0;
}

void locus__services_fill(locus_services *services)
{
    memset(services, 0, sizeof *services);
    services->struct_size = sizeof *services;
    services->abi_version = LOCUS_BACKEND_ABI_VERSION;
    services->log = service_log;
    services->fail = service_fail;
    services->worker_count = service_worker_count;
    services->run = service_run;
    services->run_here = service_run_here;
    services->content_key = service_content_key;
    services->split = locus__pool_split;
    services->account_read = service_account_read;
    services->account_read_rows = service_account_read_rows;
    services->numa_node_count = service_numa_node_count;
    services->numa_node = service_numa_node;
    services->host_alloc = service_host_alloc;
    services->host_free = service_host_free;
    services->pci_numa_mask = service_pci_numa_mask;
    services->cpuset_numa_mask = service_cpuset_numa_mask;
    services->forced_cpu_isa = service_forced_cpu_isa;
    services->cache_bytes = service_cache_bytes;
    services->cache_sharing = service_cache_sharing;
    services->topology_is_this_system = service_topology_is_this_system;
}
