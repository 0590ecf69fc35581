#include "local_rank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context_types.h"
#include "env.h"
#include "pool.h"
#include "status.h"

/* An empty variable reads as unset, as LOCUS_* variables do. */
static const char *variable(const char *name)
{
    const char *value = getenv(name);
    return value && value[0] != '\0' ? value : NULL;
}

static bool read_count(const char *name, int *value, locus__launcher_rank *out)
{
    const char *text = variable(name);
    if (!text) {
        snprintf(out->problem, sizeof out->problem, "%s is not set", name);
        return false;
    }
    if (!locus__parse_small_uint(text, strlen(text), value)) {
        snprintf(out->problem, sizeof out->problem,
                 "%s='%.64s' is not a non-negative integer", name, text);
        return false;
    }
    return true;
}

/* Slurm writes the tasks of each node of the step as "2(x3),1": two tasks
 * on each of the first three nodes, one on the fourth. */
static bool slurm_tasks_on_node(const char *list, int node, int *tasks)
{
    const char *p = list;
    int first_node = 0;
    for (;;) {
        size_t digits = strspn(p, "0123456789");
        int count, repeat = 1;
        if (!locus__parse_small_uint(p, digits, &count))
            return false;
        p += digits;
        if (strncmp(p, "(x", 2) == 0) {
            p += 2;
            digits = strspn(p, "0123456789");
            if (!locus__parse_small_uint(p, digits, &repeat) || repeat < 1 ||
                p[digits] != ')')
                return false;
            p += digits + 1;
        }
        if (node < first_node + repeat) {
            *tasks = count;
            return true;
        }
        first_node += repeat;
        if (*p != ',')
            return false; /* the list ends before this node */
        p++;
    }
}

static bool read_slurm_size(int *size, locus__launcher_rank *out)
{
    const char *list = variable("SLURM_STEP_TASKS_PER_NODE");
    int node;
    if (!read_count("SLURM_NODEID", &node, out))
        return false;
    snprintf(out->size_variable, sizeof out->size_variable,
             "SLURM_STEP_TASKS_PER_NODE");
    if (!slurm_tasks_on_node(list, node, size)) {
        snprintf(out->problem, sizeof out->problem,
                 "SLURM_STEP_TASKS_PER_NODE='%.64s' gives no task count for "
                 "SLURM_NODEID=%d",
                 list, node);
        return false;
    }
    return true;
}

void locus__launcher_rank_read(locus__launcher_rank *out)
{
    static const struct {
        const char *rank;
        const char *size; /* NULL: Slurm's, read apart */
    } launchers[] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
        {"SLURM_LOCALID", NULL},
    };
    memset(out, 0, sizeof *out);
    out->rank = -1;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        if (!variable(launchers[i].rank))
            continue;
        /* A batch script sees SLURM_LOCALID too, but it is no task of a
         * step: only srun's tasks have the step's task counts. */
        if (!launchers[i].size && !variable("SLURM_STEP_TASKS_PER_NODE"))
            continue;
        snprintf(out->rank_variable, sizeof out->rank_variable, "%s",
                 launchers[i].rank);
        int rank = 0, size = 0;
        bool parsed = read_count(launchers[i].rank, &rank, out);
        if (parsed && launchers[i].size) {
            snprintf(out->size_variable, sizeof out->size_variable, "%s",
                     launchers[i].size);
            parsed = read_count(launchers[i].size, &size, out);
        } else if (parsed) {
            parsed = read_slurm_size(&size, out);
        }
        if (parsed && (size < 1 || rank >= size)) {
            snprintf(out->problem, sizeof out->problem,
                     "%s=%d is not below %s=%d", out->rank_variable, rank,
                     out->size_variable, size);
            parsed = false;
        }
        /* The first launcher that speaks decides: a garbled one is not
         * overruled by another's leftovers (an mpirun inside a Slurm
         * allocation sees both). */
        if (parsed) {
            out->rank = rank;
            out->size = size;
        }
        return;
    }
}

bool locus__local_rank(int *rank, int *size)
{
    locus__launcher_rank launcher;
    locus__launcher_rank_read(&launcher);
    bool known = launcher.rank >= 0;
    if (rank)
        *rank = known ? launcher.rank : 0;
    if (size)
        *size = known ? launcher.size : 1;
    return known;
}

/* Adds the allowed cpus of units [first, last) of a node to `share`; the
 * units are its cores, or its PUs in topologies without core objects. */
static bool add_units(const locus__topology *topology,
                      hwloc_const_bitmap_t cpus, hwloc_obj_type_t unit,
                      int first, int last, hwloc_bitmap_t share)
{
    hwloc_bitmap_t part = hwloc_bitmap_alloc();
    if (!part)
        return false;
    int found = 0;
    int count = hwloc_get_nbobjs_by_type(topology->hwloc, unit);
    for (int i = 0; i < count && found < last; i++) {
        hwloc_obj_t obj =
            hwloc_get_obj_by_type(topology->hwloc, unit, (unsigned)i);
        if (!hwloc_bitmap_intersects(obj->cpuset, cpus))
            continue;
        if (found >= first) {
            hwloc_bitmap_and(part, obj->cpuset, cpus);
            hwloc_bitmap_or(share, share, part);
        }
        found++;
    }
    hwloc_bitmap_free(part);
    return true;
}

static int count_units(const locus__topology *topology,
                       hwloc_const_bitmap_t cpus, hwloc_obj_type_t unit)
{
    int found = 0;
    int count = hwloc_get_nbobjs_by_type(topology->hwloc, unit);
    for (int i = 0; i < count; i++) {
        hwloc_obj_t obj =
            hwloc_get_obj_by_type(topology->hwloc, unit, (unsigned)i);
        found += hwloc_bitmap_intersects(obj->cpuset, cpus) != 0;
    }
    return found;
}

locus_status locus__local_rank_share(const locus__topology *topology, int rank,
                                     int size, hwloc_bitmap_t share)
{
    hwloc_bitmap_zero(share);
    /* Nodes without cpus (memory-only nodes: HBM, CXL) host no rank. */
    int usable[LOCUS_MAX_NUMA_NODES];
    int nodes = 0;
    for (int i = 0; i < topology->node_count && nodes < LOCUS_MAX_NUMA_NODES;
         i++)
        if (!hwloc_bitmap_iszero(topology->nodes[i].allowed_cpus))
            usable[nodes++] = i;
    if (nodes == 0 || size < 1 || rank < 0 || rank >= size) {
        hwloc_bitmap_copy(share, topology->allowed_cpus);
        return LOCUS_SUCCESS;
    }
    if (size < nodes) {
        /* Consecutive nodes are usually the nearest to each other. */
        size_t begin, end;
        locus__pool_split((size_t)nodes, 1, rank, size, &begin, &end);
        for (size_t n = begin; n < end; n++)
            hwloc_bitmap_or(share, share,
                            topology->nodes[usable[n]].allowed_cpus);
        return LOCUS_SUCCESS;
    }
    hwloc_const_bitmap_t cpus =
        topology->nodes[usable[rank % nodes]].allowed_cpus;
    int on_node = size / nodes + (rank % nodes < size % nodes ? 1 : 0);
    int index = rank / nodes;
    hwloc_obj_type_t unit =
        hwloc_get_nbobjs_by_type(topology->hwloc, HWLOC_OBJ_CORE) > 0
            ? HWLOC_OBJ_CORE
            : HWLOC_OBJ_PU;
    int units = count_units(topology, cpus, unit);
    int first, last;
    if (units >= on_node) {
        size_t begin, end;
        locus__pool_split((size_t)units, 1, index, on_node, &begin, &end);
        first = (int)begin;
        last = (int)end;
    } else {
        /* More ranks than cores on the node: ranks pair up on cores. */
        first = (int)((long long)index * units / on_node);
        last = first + 1;
    }
    if (!add_units(topology, cpus, unit, first, last, share))
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                           "cpu set of local rank %d", rank);
    return LOCUS_SUCCESS;
}

/* Whether this rank's pool should be narrowed; if not, says why. */
static bool should_narrow(const locus_context *context,
                          const locus__launcher_rank *launcher, char *reason,
                          size_t capacity)
{
    const locus__topology *topology = &context->topology;
    if (launcher->rank < 0) {
        snprintf(reason, capacity, "%s",
                 launcher->problem[0] ? launcher->problem
                                      : "not started by an MPI launcher");
        return false;
    }
    if (launcher->size == 1) {
        snprintf(reason, capacity, "the only rank on this machine");
        return false;
    }
    if (context->config.threads != 0) {
        snprintf(reason, capacity, "LOCUS_THREADS=%d sets the pool size",
                 context->config.threads);
        return false;
    }
    /* The binding narrows the cgroup's set only when someone (mpirun
     * --bind-to, srun --cpu-bind, taskset) chose cores for this process;
     * their choice stands. */
    if (topology->is_this_system &&
        !hwloc_bitmap_isequal(
            topology->allowed_cpus,
            hwloc_topology_get_allowed_cpuset(topology->hwloc))) {
        char list[96];
        hwloc_bitmap_list_snprintf(list, sizeof list, topology->allowed_cpus);
        snprintf(reason, capacity,
                 "the launcher already bound this process to cpus %s", list);
        return false;
    }
    return true;
}

/* The cpus of the context's workers, and the OS nodes they are on. */
static bool pool_cpus(const locus_context *context, char *list, size_t capacity,
                      uint64_t *nodes, int *workers)
{
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    if (!cpus)
        return false;
    *nodes = 0;
    *workers = locus__pool_size(context->pool);
    for (int w = 0; w < *workers; w++) {
        const locus__worker_info *info = locus__pool_worker(context->pool, w);
        hwloc_bitmap_set(cpus, (unsigned)info->cpu);
        if (info->node_os_index >= 0 &&
            info->node_os_index < LOCUS_MAX_NUMA_NODES)
            *nodes |= UINT64_C(1) << info->node_os_index;
    }
    hwloc_bitmap_list_snprintf(list, capacity, cpus);
    hwloc_bitmap_free(cpus);
    return true;
}

static void log_mapping(const locus_context *context)
{
    const locus__local_rank_map *map = &context->local_rank;
    const locus__launcher_rank *launcher = &map->launcher;
    if (launcher->problem[0]) {
        locus__log(context, LOCUS_LOG_WARN,
                   "%s: this process reads as not started by an MPI launcher",
                   launcher->problem);
        return;
    }
    char list[128], node_list[128] = "";
    uint64_t nodes;
    int workers;
    if (launcher->rank < 0 ||
        !pool_cpus(context, list, sizeof list, &nodes, &workers))
        return;
    size_t used = 0;
    for (int n = 0; n < LOCUS_MAX_NUMA_NODES && used < sizeof node_list; n++)
        if (nodes & (UINT64_C(1) << n))
            used += (size_t)snprintf(node_list + used, sizeof node_list - used,
                                     "%s%d", used ? "," : "", n);
    locus__log(context, LOCUS_LOG_INFO,
               "local rank %d of %d (%s): %d worker%s on cpus %s, NUMA node "
               "%s; %s%s",
               launcher->rank, launcher->size, launcher->rank_variable, workers,
               workers == 1 ? "" : "s", list, node_list,
               map->narrowed ? "" : "not narrowed: ", map->reason);
}

locus_status locus__local_rank_pool_create(locus_context *context,
                                           bool ignore_environment)
{
    locus__local_rank_map *map = &context->local_rank;
    memset(map, 0, sizeof *map);
    map->launcher.rank = -1;
    if (ignore_environment)
        snprintf(map->reason, sizeof map->reason,
                 "the context reads no environment");
    else
        locus__launcher_rank_read(&map->launcher);
    map->narrowed =
        !ignore_environment &&
        should_narrow(context, &map->launcher, map->reason, sizeof map->reason);
    locus__topology *topology = &context->topology;
    locus_status status;
    if (!map->narrowed) {
        status = locus__pool_create(topology, context->config.threads,
                                    &context->pool);
    } else {
        hwloc_bitmap_t share = hwloc_bitmap_alloc();
        if (!share)
            return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                               "cpu set of local rank %d", map->launcher.rank);
        status = locus__local_rank_share(topology, map->launcher.rank,
                                         map->launcher.size, share);
        if (status == LOCUS_SUCCESS) {
            /* The pool alone sees the share: nodes, devices and placement
             * keep describing the whole machine. */
            hwloc_bitmap_t all = topology->allowed_cpus;
            topology->allowed_cpus = share;
            status = locus__pool_create(topology, 0, &context->pool);
            topology->allowed_cpus = all;
            snprintf(map->reason, sizeof map->reason,
                     "narrowed to this rank's share: ranks spread over the "
                     "NUMA nodes, a node's cores split among its ranks");
        }
        hwloc_bitmap_free(share);
    }
    if (status == LOCUS_SUCCESS)
        log_mapping(context);
    return status;
}

void locus_local_rank_info_init(locus_local_rank_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->local_rank = -1;
}

LOCUS_API locus_status locus_local_rank_get(const locus_context *context,
                                            locus_local_rank_info *info)
{
    locus__clear_error();
    if (!context || !info)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "info" : "context");
    if (info->struct_size < sizeof *info)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "info struct_size %zu: call "
                           "locus_local_rank_info_init first",
                           info->struct_size);
    const locus__local_rank_map *map = &context->local_rank;
    info->local_rank = map->launcher.rank;
    info->local_size = map->launcher.rank >= 0 ? map->launcher.size : 0;
    snprintf(info->variable, sizeof info->variable, "%s",
             map->launcher.rank_variable);
    info->narrowed = map->narrowed;
    snprintf(info->reason, sizeof info->reason, "%s", map->reason);
    if (!pool_cpus(context, info->cpus, sizeof info->cpus, &info->numa_mask,
                   &info->workers))
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "worker cpu set");
    return LOCUS_SUCCESS;
}
