/* `locus numa`: common NUMA problems, found in the gathered facts and said
 * in plain words. Each finding has a stable kind for scripts; the message
 * says what was seen, why it matters, and what to do. Thresholds are kept
 * coarse on purpose: a finding should be worth a person's attention. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "numa.h"

/* Memory a process must hold before its placement is judged: below it the
 * pages are libraries and stacks, not data. */
#define PROCESS_MIN_BYTES ((uint64_t)16 << 20)

void numa_add_finding(numa_view *view, const char *kind, const char *fix,
                      const char *format, ...)
{
    if (view->finding_count == NUMA_MAX_FINDINGS)
        return;
    numa_finding *finding = &view->findings[view->finding_count++];
    snprintf(finding->kind, sizeof finding->kind, "%s", kind);
    snprintf(finding->fix, sizeof finding->fix, "%s", fix ? fix : "");
    va_list args;
    va_start(args, format);
    vsnprintf(finding->message, sizeof finding->message, format, args);
    va_end(args);
}

/* Most of the process's anonymous memory on nodes none of its threads
 * last ran on. */
static void process_split(numa_view *view)
{
    const numa_process *process = view->process;
    if (!process || !process->ok)
        return;
    uint64_t total = 0, away = 0;
    int thread_nodes = 0, memory_node = 0, thread_node = 0;
    for (int n = 0; n < LOCUS_MAX_NUMA_NODES; n++) {
        if (process->anon_bytes_by_node[n] >
            process->anon_bytes_by_node[memory_node])
            memory_node = n;
        if (process->threads_by_node[n] > process->threads_by_node[thread_node])
            thread_node = n;
        total += process->anon_bytes_by_node[n];
        if (process->threads_by_node[n] == 0)
            away += process->anon_bytes_by_node[n];
        else
            thread_nodes++;
    }
    if (total < PROCESS_MIN_BYTES || thread_nodes == 0 || away * 2 <= total)
        return;
    char away_text[32], total_text[32];
    format_bytes(away, away_text, sizeof away_text);
    format_bytes(total, total_text, sizeof total_text);
    /* Run again with threads and memory on the memory's node; or, for the
     * running process, move its memory to its threads (migratepages is
     * numactl's). */
    char fix[256];
    snprintf(fix, sizeof fix,
             "numactl --cpunodebind=%d --membind=%d %s (or now: "
             "migratepages %d %d %d)",
             memory_node, memory_node, process->command, process->pid,
             memory_node, thread_node);
    numa_add_finding(
        view, "threads-memory-apart", fix,
        "process %d (%s): %s of its %s of anonymous memory is on nodes where "
        "none of its %d threads last ran, so most of its reads cross the "
        "interconnect; bind its threads near its data (numactl "
        "--cpunodebind), or let the threads that use the data first-touch "
        "it (LOCUS_NUMA=local)",
        process->pid, process->command, away_text, total_text,
        process->thread_count);
}

static int first_node(uint64_t mask)
{
    for (int n = 0; n < 64; n++)
        if (mask >> n & 1u)
            return n;
    return -1;
}

static const numa_node_view *node_by_os(const numa_view *view, int os_index)
{
    for (size_t i = 0; i < view->node_count; i++)
        if (view->nodes[i].info.os_index == os_index)
            return &view->nodes[i];
    return NULL;
}

/* A GPU whose host memory traffic cannot be near it. */
static void device_staging(numa_view *view)
{
    int default_node = -1;
    sscanf(view->default_placement, "node:%d", &default_node);
    for (size_t d = 0; d < view->device_count; d++) {
        const numa_device_view *device = &view->devices[d];
        if (device->info.kind == LOCUS_DEVICE_CPU)
            continue;
        const char *name = device->info.selector;
        uint64_t near = device->info.nearest_numa_mask;
        if (near == 0) {
            numa_add_finding(
                view, "device-node-unknown",
                "LOCUS_NUMA=node:N, N the GPU's node (nvidia-smi topo -m "
                "or /sys/bus/pci/devices/<address>/numa_node)",
                "%s (%s): its nearest NUMA node is unknown, so its staging "
                "memory is not placed near it and its transfers are not "
                "split into local and remote",
                name, device->info.name);
            continue;
        }
        int staging = first_node(near);
        const numa_node_view *node = node_by_os(view, staging);
        char fix[256];
        snprintf(fix, sizeof fix,
                 "numactl --cpunodebind=%d --membind=%d <command>; under "
                 "mpirun: --map-by ppr:1:numa --bind-to numa",
                 staging, staging);
        if (view->this_system && node && node->info.cpu_count == 0)
            numa_add_finding(
                view, "device-node-not-allowed", fix,
                "%s is nearest node %d, but this process may run on none of "
                "node %d's cpus (cpuset %s): the thread that stages its "
                "copies runs remote to it",
                name, staging, staging, view->cpus_allowed);
        snprintf(fix, sizeof fix, "LOCUS_NUMA=node:%d", staging);
        if (default_node >= 0 && !(near >> default_node & 1u))
            numa_add_finding(
                view, "staging-off-node", fix,
                "%s is nearest node %d, but buffers are placed on node %d by "
                "default (LOCUS_NUMA=%s): every transfer to or from it reads "
                "remote host memory; place its buffers with node:%d",
                name, staging, default_node, view->default_placement, staging);
    }
}

static void balancing(numa_view *view)
{
    if (!view->this_system || !view->has_vmstat)
        return;
    uint64_t moved = view->migrated_after - view->migrated_before;
    if (moved > 0)
        numa_add_finding(
            view, "pages-migrating", "sysctl -w kernel.numa_balancing=0",
            "NUMA balancing moved %llu pages (%llu KiB) in the %.1f s this "
            "report took: some process's pages are moving between nodes, so "
            "placement seen at allocation does not last; bind memory "
            "(node:N) or pin threads, or turn balancing off "
            "(/proc/sys/kernel/numa_balancing = 0) for pinned HPC jobs",
            (unsigned long long)moved, (unsigned long long)moved * 4,
            view->window_seconds);
}

static void narrow_cpuset(numa_view *view)
{
    if (!view->this_system || view->cpus_allowed_count == 0 ||
        view->cpus_online_count == 0)
        return;
    if (view->cpus_allowed_count < view->cpus_online_count) {
        char without[256] = "";
        for (size_t i = 0; i < view->node_count; i++)
            if (view->nodes[i].info.cpu_count == 0) {
                size_t used = strlen(without);
                snprintf(without + used, sizeof without - used, "%s%d",
                         used ? ", " : "", view->nodes[i].info.os_index);
            }
        char fix[256];
        snprintf(fix, sizeof fix,
                 "taskset -c %.160s <command>; under mpirun: --map-by "
                 "ppr:1:numa --bind-to numa (a rank a node)",
                 view->cpus_online);
        numa_add_finding(
            view, "narrow-cpuset", fix,
            "this process may use %d of the machine's %d cpus (%s of %s), "
            "so Locus starts %d workers%s%s%s",
            view->cpus_allowed_count, view->cpus_online_count,
            view->cpus_allowed, view->cpus_online, view->cpus_allowed_count,
            without[0] ? "; none runs on node " : "", without,
            without[0] ? ", whose memory they can only read remotely" : "");
    }
    if (view->mems_allowed[0] && view->nodes_online[0] &&
        strcmp(view->mems_allowed, view->nodes_online) != 0)
        numa_add_finding(view, "narrow-mems",
                         "numactl --membind=all <command> (outside the "
                         "cpuset), or LOCUS_NUMA=interleave within it",
                         "this process may allocate only on nodes %s of %s "
                         "(cpuset.mems): node:N placement elsewhere fails",
                         view->mems_allowed, view->nodes_online);
}

/* Facts of the topology itself, which hold on any machine it describes. */
static void topology_shape(numa_view *view)
{
    for (size_t i = 0; i < view->node_count; i++) {
        const locus_numa_node_info *node = &view->nodes[i].info;
        if (node->cpu_count == 0 && node->memory_bytes > 0 &&
            view->cpus_allowed_count >= view->cpus_online_count) {
            char fix[64];
            snprintf(fix, sizeof fix, "LOCUS_NUMA=node:%d", node->os_index);
            numa_add_finding(
                view, "memory-only-node", fix,
                "node %d has memory but no cpus (HBM, CXL or persistent "
                "memory): `local` placement never puts pages there; use "
                "node:%d for data that belongs there",
                node->os_index, node->os_index);
        }
    }
    size_t n = view->node_count;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            unsigned d = view->distances[i * n + j];
            unsigned back = view->distances[j * n + i];
            if (d != back && d && back)
                numa_add_finding(view, "asymmetric-distance", NULL,
                                 "the distance from node %d to node %d is %u, "
                                 "but %u the other way",
                                 view->nodes[i].info.os_index,
                                 view->nodes[j].info.os_index, d, back);
        }
}

void numa_find(numa_view *view)
{
    process_split(view);
    device_staging(view);
    balancing(view);
    narrow_cpuset(view);
    topology_shape(view);
}
