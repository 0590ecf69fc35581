#include "topology.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "status.h"
#include "topology_xml.h"

static locus_status open_topology(locus__topology *topology,
                                  const char *description, bool synthetic)
{
    if (hwloc_topology_init(&topology->hwloc) != 0)
        return locus__fail(LOCUS_ERROR_TOPOLOGY, "hwloc_topology_init: %s",
                           strerror(errno));
    if (description && synthetic) {
        if (hwloc_topology_set_synthetic(topology->hwloc, description) != 0)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "LOCUS_TOPOLOGY='synthetic:%s' is not a "
                               "synthetic description hwloc accepts",
                               description);
        snprintf(topology->source, sizeof topology->source, "synthetic:%s",
                 description);
    } else if (description) {
        locus_status checked = locus__topology_xml_check(description);
        if (checked != LOCUS_SUCCESS)
            return checked;
        if (hwloc_topology_set_xml(topology->hwloc, description) != 0)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "LOCUS_TOPOLOGY='%s' is not a readable hwloc "
                               "XML file: %s",
                               description, strerror(errno));
        snprintf(topology->source, sizeof topology->source, "xml:%s",
                 description);
    } else {
        snprintf(topology->source, sizeof topology->source, "this machine");
    }
    /* hwloc's GPU components would start the CUDA driver and every OpenCL
     * platform just to name devices, which the backends do themselves; PCI
     * locality is all the runtime needs from hwloc. */
    static const char *const unwanted[] = {"opencl", "cuda",      "nvml",
                                           "rsmi",   "levelzero", "gl"};
    for (size_t i = 0; i < sizeof unwanted / sizeof unwanted[0]; i++)
        /* EINVAL: this hwloc has no such component, so it cannot run. */
        if (hwloc_topology_set_components(
                topology->hwloc, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                unwanted[i]) != 0 &&
            errno != EINVAL)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "hwloc_topology_set_components(-%s): %s",
                               unwanted[i], strerror(errno));
    /* PCI devices are kept so that GPUs can be placed near their node. */
    if (hwloc_topology_set_io_types_filter(
            topology->hwloc, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0)
        return locus__fail(LOCUS_ERROR_TOPOLOGY,
                           "hwloc_topology_set_io_types_filter: %s",
                           strerror(errno));
    if (hwloc_topology_load(topology->hwloc) != 0) {
        if (description)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "hwloc could not load LOCUS_TOPOLOGY='%s%s': "
                               "%s",
                               synthetic ? "synthetic:" : "", description,
                               strerror(errno));
        return locus__fail(LOCUS_ERROR_TOPOLOGY,
                           "hwloc could not load this machine's topology: %s",
                           strerror(errno));
    }
    topology->is_this_system =
        hwloc_topology_is_thissystem(topology->hwloc) != 0;
    return LOCUS_SUCCESS;
}

/* The cores we may use: hwloc's allowed set (the cgroup cpuset) narrowed by
 * the process binding, which is how taskset and mpirun --bind-to speak. */
static locus_status find_allowed_cpus(locus__topology *topology)
{
    topology->allowed_cpus =
        hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topology->hwloc));
    if (!topology->allowed_cpus)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "allowed cpuset");
    if (!topology->is_this_system)
        return LOCUS_SUCCESS;
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (!bound)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "process cpuset");
    if (hwloc_get_cpubind(topology->hwloc, bound, HWLOC_CPUBIND_PROCESS) == 0 &&
        hwloc_bitmap_intersects(bound, topology->allowed_cpus))
        hwloc_bitmap_and(topology->allowed_cpus, topology->allowed_cpus, bound);
    hwloc_bitmap_free(bound);
    return LOCUS_SUCCESS;
}

static locus_status read_nodes(locus__topology *topology)
{
    int count = hwloc_get_nbobjs_by_type(topology->hwloc, HWLOC_OBJ_NUMANODE);
    if (count <= 0)
        return locus__fail(LOCUS_ERROR_TOPOLOGY,
                           "topology from %s has no NUMA node",
                           topology->source);
    if (count > LOCUS_MAX_NUMA_NODES)
        return locus__fail(LOCUS_ERROR_TOPOLOGY,
                           "topology has %d NUMA nodes; Locus handles up to "
                           "%d",
                           count, LOCUS_MAX_NUMA_NODES);
    topology->nodes = locus__calloc((size_t)count, sizeof *topology->nodes);
    if (!topology->nodes)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "%d node records", count);
    topology->node_count = count;
    for (int i = 0; i < count; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(
            topology->hwloc, HWLOC_OBJ_NUMANODE, (unsigned)i);
        locus__numa_node *node = &topology->nodes[i];
        if (obj->os_index >= LOCUS_MAX_NUMA_NODES)
            return locus__fail(LOCUS_ERROR_TOPOLOGY,
                               "NUMA node number %u is above %d", obj->os_index,
                               LOCUS_MAX_NUMA_NODES - 1);
        node->os_index = (int)obj->os_index;
        node->memory_bytes = obj->attr->numanode.local_memory;
        node->allowed_cpus = hwloc_bitmap_alloc();
        if (!node->allowed_cpus)
            return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "node cpuset");
        hwloc_bitmap_and(node->allowed_cpus, obj->cpuset,
                         topology->allowed_cpus);
        hwloc_bitmap_list_snprintf(node->cpu_list, sizeof node->cpu_list,
                                   node->allowed_cpus);
    }
    return LOCUS_SUCCESS;
}

static void read_distances(locus__topology *topology)
{
    unsigned count = 1;
    struct hwloc_distances_s *distances = NULL;
    if (hwloc_distances_get_by_type(
            topology->hwloc, HWLOC_OBJ_NUMANODE, &count, &distances,
            HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
        count == 0)
        return;
    int n = topology->node_count;
    topology->distances =
        locus__calloc((size_t)n * (size_t)n, sizeof(unsigned));
    if (topology->distances) {
        /* hwloc's matrix is in its own object order; map it to ours. */
        for (unsigned i = 0; i < distances->nbobjs; i++) {
            int from = locus__topology_node_position(
                topology, (int)distances->objs[i]->os_index);
            for (unsigned j = 0; j < distances->nbobjs; j++) {
                int to = locus__topology_node_position(
                    topology, (int)distances->objs[j]->os_index);
                if (from >= 0 && to >= 0)
                    topology->distances[from * n + to] =
                        (unsigned)distances->values[i * distances->nbobjs + j];
            }
        }
    }
    hwloc_distances_release(topology->hwloc, distances);
}

locus_status locus__topology_load(locus__topology *topology,
                                  const char *description, bool synthetic)
{
    memset(topology, 0, sizeof *topology);
    locus_status status = open_topology(topology, description, synthetic);
    if (status == LOCUS_SUCCESS)
        status = find_allowed_cpus(topology);
    if (status == LOCUS_SUCCESS)
        status = read_nodes(topology);
    if (status != LOCUS_SUCCESS) {
        locus__topology_release(topology);
        return status;
    }
    read_distances(topology);
    return LOCUS_SUCCESS;
}

void locus__topology_release(locus__topology *topology)
{
    for (int i = 0; i < topology->node_count; i++)
        hwloc_bitmap_free(topology->nodes[i].allowed_cpus);
    free(topology->nodes);
    free(topology->distances);
    hwloc_bitmap_free(topology->allowed_cpus);
    if (topology->hwloc)
        hwloc_topology_destroy(topology->hwloc);
    memset(topology, 0, sizeof *topology);
}

int locus__topology_node_position(const locus__topology *topology, int os_index)
{
    for (int i = 0; i < topology->node_count; i++)
        if (topology->nodes[i].os_index == os_index)
            return i;
    return -1;
}

uint64_t locus__topology_nodes_of_cpus(const locus__topology *topology,
                                       hwloc_const_bitmap_t cpus)
{
    uint64_t mask = 0;
    for (int i = 0; i < topology->node_count; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(
            topology->hwloc, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (obj && hwloc_bitmap_intersects(obj->cpuset, cpus))
            mask |= UINT64_C(1) << topology->nodes[i].os_index;
    }
    return mask;
}

uint64_t locus__topology_pci_nodes(const locus__topology *topology,
                                   unsigned domain, unsigned bus,
                                   unsigned device, unsigned function)
{
    hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topology->hwloc, domain, bus,
                                                device, function);
    if (!pci)
        return 0;
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topology->hwloc, pci);
    if (!parent || !parent->nodeset)
        return 0;
    uint64_t mask = 0;
    for (int i = 0; i < topology->node_count; i++)
        if (hwloc_bitmap_isset(parent->nodeset,
                               (unsigned)topology->nodes[i].os_index))
            mask |= UINT64_C(1) << topology->nodes[i].os_index;
    return mask;
}

int locus__topology_node_of_cpu(const locus__topology *topology, int cpu)
{
    if (cpu < 0)
        return -1;
    for (int i = 0; i < topology->node_count; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(
            topology->hwloc, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (obj && hwloc_bitmap_isset(obj->cpuset, (unsigned)cpu))
            return i;
    }
    return -1;
}

size_t locus__topology_cache(const locus__topology *topology, int level,
                             int *sharing)
{
    static const hwloc_obj_type_t types[] = {
        HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE};
    *sharing = 1;
    if (level < 1 || level > 3)
        return 0;
    hwloc_obj_t cache =
        hwloc_get_obj_by_type(topology->hwloc, types[level - 1], 0);
    if (!cache || !cache->attr ||
        cache->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION)
        return 0;
    int cores = hwloc_get_nbobjs_inside_cpuset_by_type(
        topology->hwloc, cache->cpuset, HWLOC_OBJ_CORE);
    *sharing = cores > 0 ? cores : 1;
    return (size_t)cache->attr->cache.size;
}
