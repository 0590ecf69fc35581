/* `locus numa`: the gathered facts as tables for people and JSON for
 * scripts (the SVG heat maps are numa_svg.c's). Figures that could not be
 * had are shown as such ("-" in tables, null in JSON) with the reason,
 * never as zeros. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "json.h"
#include "numa.h"
#include "table.h"

/* ---- text ---------------------------------------------------------------- */

/* A node-by-node matrix as a table; cell() formats one entry. */
static void print_matrix(const numa_view *view, const char *title,
                         void (*cell)(const numa_view *, size_t, size_t,
                                      table *, size_t))
{
    size_t shown = view->node_count;
    if (shown + 1 > TABLE_MAX_COLUMNS)
        shown = TABLE_MAX_COLUMNS - 1;
    const char *headers[TABLE_MAX_COLUMNS];
    char labels[TABLE_MAX_COLUMNS][16];
    headers[0] = "from\\to";
    for (size_t i = 0; i < shown; i++) {
        snprintf(labels[i], sizeof labels[i], "%d",
                 view->nodes[i].info.os_index);
        headers[i + 1] = labels[i];
    }
    table t;
    table_init(&t, shown + 1, headers);
    for (size_t c = 0; c <= shown; c++)
        table_align_right(&t, c);
    for (size_t i = 0; i < shown; i++) {
        table_add_row(&t);
        table_set(&t, 0, "%d", view->nodes[i].info.os_index);
        for (size_t j = 0; j < shown; j++)
            cell(view, i, j, &t, j + 1);
    }
    printf("\n%s\n", title);
    table_print(&t, stdout, 2);
    table_free(&t);
}

static void distance_cell(const numa_view *view, size_t i, size_t j, table *t,
                          size_t column)
{
    unsigned d = view->distances[i * view->node_count + j];
    d ? table_set(t, column, "%u", d) : table_set(t, column, "-");
}

/* A measured cell: the median of the runs, then their spread, (greatest -
 * least) / median, so one glance says how far the figure holds. */
static void spread_cell(table *t, size_t column, const char *format,
                        double median, double least, double greatest)
{
    if (isnan(median)) {
        table_set(t, column, "-");
        return;
    }
    char figure[32];
    snprintf(figure, sizeof figure, format, median);
    double spread = median > 0 ? (greatest - least) / median * 100 : 0;
    table_set(t, column, "%s (%.0f%%)", figure, spread);
}

static void bandwidth_cell(const numa_view *view, size_t i, size_t j, table *t,
                           size_t column)
{
    size_t k = i * view->node_count + j;
    spread_cell(t, column, "%.2f", view->bandwidth_gbps[k],
                view->bandwidth_min_gbps[k], view->bandwidth_max_gbps[k]);
}

static void latency_cell(const numa_view *view, size_t i, size_t j, table *t,
                         size_t column)
{
    size_t k = i * view->node_count + j;
    spread_cell(t, column, "%.1f", view->latency_ns[k], view->latency_min_ns[k],
                view->latency_max_ns[k]);
}

static void print_nodes(const numa_view *view)
{
    static const char *const headers[] = {
        "node",          "cpus",          "memory",        "HMAT read bw",
        "HMAT write bw", "HMAT read lat", "HMAT write lat"};
    table t;
    table_init(&t, 7, headers);
    for (size_t c = 2; c < 7; c++)
        table_align_right(&t, c);
    for (size_t i = 0; i < view->node_count; i++) {
        const numa_node_view *node = &view->nodes[i];
        char memory[32];
        format_bytes(node->info.memory_bytes, memory, sizeof memory);
        table_add_row(&t);
        table_set(&t, 0, "%d", node->info.os_index);
        table_set(&t, 1, "%s", node->info.cpus[0] ? node->info.cpus : "-");
        table_set(&t, 2, "%s", memory);
        const long values[] = {
            node->hmat.read_bandwidth_mbps, node->hmat.write_bandwidth_mbps,
            node->hmat.read_latency_ns, node->hmat.write_latency_ns};
        for (size_t k = 0; k < 4; k++) {
            if (!node->hmat.present || values[k] < 0)
                table_set(&t, 3 + k, "-");
            else
                table_set(&t, 3 + k, k < 2 ? "%ld MB/s" : "%ld ns", values[k]);
        }
    }
    printf("NUMA nodes\n");
    table_print(&t, stdout, 2);
    table_free(&t);
    bool any = false;
    for (size_t i = 0; i < view->node_count; i++)
        any |= view->nodes[i].hmat.present;
    if (!view->this_system)
        printf("  HMAT: not read: %s\n", view->not_measured);
    else if (!any)
        printf("  HMAT: the firmware gives no attributes (no "
               "/sys/devices/system/node/node*/access0)\n");
    else
        printf("  HMAT: each memory node as its nearest initiators see it\n");
}

static void print_measured(const numa_view *view)
{
    if (!view->this_system) {
        printf("\nbandwidth: not measured: %s\n", view->not_measured);
        printf("latency: not measured: %s\n", view->not_measured);
        return;
    }
    if (!view->bandwidth_gbps) {
        printf("\nbandwidth, latency: not measured (--no-measure)\n");
        return;
    }
    char size[32], chase[32];
    format_bytes(view->bandwidth_bytes, size, sizeof size);
    format_bytes(view->latency_bytes, chase, sizeof chase);
    char title[256];
    snprintf(title, sizeof title,
             "measured read bandwidth, GB/s (every worker of the row's node "
             "reading %s bound to the column's node)",
             size);
    print_matrix(view, title, bandwidth_cell);
    snprintf(title, sizeof title,
             "measured latency, ns per dependent load (one thread on the "
             "row's node, a random cycle through %s on the column's node)",
             chase);
    print_matrix(view, title, latency_cell);
    printf("  each cell: the median of %d run%s after a warm-up, in brackets "
           "their spread,\n  (greatest - least) / median\n",
           view->repeats, view->repeats == 1 ? "" : "s");
    if (view->measure_error[0])
        printf("  some pairs failed: %s\n", view->measure_error);
}

static void print_kernel_state(const numa_view *view)
{
    if (!view->this_system) {
        printf("\nNUMA balancing, numastat, pages: not read: %s\n",
               view->not_measured);
        return;
    }
    printf("\nNUMA balancing: ");
    if (view->balancing < 0)
        printf("unknown (no /proc/sys/kernel/numa_balancing)\n");
    else
        printf("%s (mode %d)\n", view->balancing ? "on" : "off",
               view->balancing);
    if (view->has_vmstat)
        printf(
            "  pages migrated by it while this ran (%.1f s): %llu\n",
            view->window_seconds,
            (unsigned long long)(view->migrated_after - view->migrated_before));
    static const char *const headers[] = {
        "node",           "numa_hit",   "numa_miss", "numa_foreign",
        "interleave_hit", "local_node", "other_node"};
    table t;
    table_init(&t, 7, headers);
    for (size_t c = 0; c < 7; c++)
        table_align_right(&t, c);
    for (size_t i = 0; i < view->node_count; i++) {
        const numa_node_view *node = &view->nodes[i];
        table_add_row(&t);
        table_set(&t, 0, "%d", node->info.os_index);
        for (size_t k = 0; k < NUMASTAT_FIELDS; k++)
            node->has_numastat
                ? table_set(&t, k + 1, "%llu",
                            (unsigned long long)node->numastat[k])
                : table_set(&t, k + 1, "-");
    }
    printf("\nnumastat (pages allocated since boot)\n");
    table_print(&t, stdout, 2);
    table_free(&t);
    printf("\ncpus allowed: %s of %s; memory nodes allowed: %s of %s\n",
           view->cpus_allowed[0] ? view->cpus_allowed : "?",
           view->cpus_online[0] ? view->cpus_online : "?",
           view->mems_allowed[0] ? view->mems_allowed : "?",
           view->nodes_online[0] ? view->nodes_online : "?");
    printf("hardware counters for local/remote bytes: %s (%s)\n",
           view->counters_available ? "available" : "unavailable",
           view->counters_reason);
}

static void print_devices(const numa_view *view)
{
    printf("\ndefault placement (LOCUS_NUMA): %s\n", view->default_placement);
    static const char *const headers[] = {"device", "kind", "nearest nodes",
                                          "staging node", "name"};
    table t;
    table_init(&t, 5, headers);
    for (size_t i = 0; i < view->device_count; i++) {
        const numa_device_view *device = &view->devices[i];
        char nodes[96];
        format_node_mask(device->info.nearest_numa_mask, nodes, sizeof nodes);
        table_add_row(&t);
        table_set(&t, 0, "%s", device->info.selector);
        table_set(&t, 1, "%s", locus_device_kind_str(device->info.kind));
        table_set(&t, 2, "%s", nodes);
        device->staging_node >= 0 ? table_set(&t, 3, "%d", device->staging_node)
                                  : table_set(&t, 3, "-");
        table_set(&t, 4, "%s", device->info.name);
    }
    printf("devices\n");
    table_print(&t, stdout, 2);
    table_free(&t);
}

/* Its Locus buffers, by the "migrate" lines of its LOCUS_RECORD. */
static void print_buffers(const numa_process *process)
{
    if (!process->record_path[0])
        return;
    printf("\nprocess %d: Locus buffers in %s (\"migrate\" lines)\n",
           process->pid, process->record_path);
    if (process->buffer_count == 0)
        printf("  none moved yet\n");
    for (size_t i = 0; i < process->buffer_count; i++) {
        const struct numa_buffer_view *b = &process->buffers[i];
        char bytes[32];
        format_bytes(b->bytes, bytes, sizeof bytes);
        printf("  buffer %llu at 0x%llx, %s:", (unsigned long long)b->id,
               (unsigned long long)b->address, bytes);
        for (int n = 0; n < LOCUS_MAX_NUMA_NODES; n++)
            if (b->bytes_by_node[n]) {
                char on[32];
                format_bytes(b->bytes_by_node[n], on, sizeof on);
                printf(" node %d %s", n, on);
            }
        printf(" (%s)\n", b->queried ? "pages now" : "as recorded");
    }
}

static void print_process(const numa_process *process)
{
    if (!process->ok) {
        printf("\nprocess %d: %s\n", process->pid, process->error);
        return;
    }
    static const char *const headers[] = {"node", "threads", "anon", "file",
                                          "total"};
    table t;
    table_init(&t, 5, headers);
    for (size_t c = 0; c < 5; c++)
        table_align_right(&t, c);
    for (int n = 0; n < LOCUS_MAX_NUMA_NODES; n++) {
        if (!process->bytes_by_node[n] && !process->threads_by_node[n])
            continue;
        char anon[32], file[32], total[32];
        format_bytes(process->anon_bytes_by_node[n], anon, sizeof anon);
        format_bytes(process->file_bytes_by_node[n], file, sizeof file);
        format_bytes(process->bytes_by_node[n], total, sizeof total);
        table_add_row(&t);
        table_set(&t, 0, "%d", n);
        table_set(&t, 1, "%d", process->threads_by_node[n]);
        table_set(&t, 2, "%s", anon);
        table_set(&t, 3, "%s", file);
        table_set(&t, 4, "%s", total);
    }
    printf("\nprocess %d (%s): pages by node (numa_maps), threads by the "
           "node they last ran on\n",
           process->pid, process->command);
    table_print(&t, stdout, 2);
    table_free(&t);
    print_buffers(process);
}

void numa_write_text(const numa_view *view)
{
    printf("topology: %s\n", view->topology_source);
    printf("binding: %s\n\n",
           view->this_system
               ? "real (the topology is this machine's)"
               : "simulated (the topology is not this machine's: nothing "
                 "is bound, measured or verified)");
    print_nodes(view);
    print_matrix(view, "NUMA distances (10 = local)", distance_cell);
    print_measured(view);
    print_kernel_state(view);
    if (view->process)
        print_process(view->process);
    print_devices(view);
    printf("\nfindings\n");
    if (view->finding_count == 0)
        printf("  none: no common NUMA problem seen\n");
    if (!view->this_system)
        printf("  (only the topology's own shape is judged: %s)\n",
               view->not_measured);
    for (size_t i = 0; i < view->finding_count; i++) {
        printf("  - [%s] %s\n", view->findings[i].kind,
               view->findings[i].message);
        if (view->findings[i].fix[0])
            printf("    fix: %s\n", view->findings[i].fix);
    }
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_node_mask(json_writer *json, uint64_t mask)
{
    json_begin_inline_array(json);
    for (int n = 0; n < 64; n++)
        if (mask >> n & 1u)
            json_int(json, n);
    json_end_array(json);
}

static void json_long_or_null(json_writer *json, const char *key, long value)
{
    json_key(json, key);
    value < 0 ? json_null(json) : json_int(json, value);
}

static void json_matrix(json_writer *json, const numa_view *view,
                        const double *values)
{
    json_begin_array(json);
    for (size_t i = 0; i < view->node_count; i++) {
        json_begin_inline_array(json);
        for (size_t j = 0; j < view->node_count; j++)
            json_double(json, values[i * view->node_count + j]);
        json_end_array(json);
    }
    json_end_array(json);
}

/* A measured figure's matrices: "matrix" the median of the runs (the
 * figure to quote), "min" and "max" the least and the greatest run. */
static void json_spread(json_writer *json, const numa_view *view,
                        const double *median, const double *least,
                        const double *greatest)
{
    json_key(json, "repeats");
    json_int(json, view->repeats);
    json_key(json, "statistic");
    json_string(json, "median");
    json_key(json, "matrix");
    json_matrix(json, view, median);
    json_key(json, "min");
    json_matrix(json, view, least);
    json_key(json, "max");
    json_matrix(json, view, greatest);
}

static void json_nodes(json_writer *json, const numa_view *view)
{
    json_key(json, "nodes");
    json_begin_array(json);
    for (size_t i = 0; i < view->node_count; i++) {
        const numa_node_view *node = &view->nodes[i];
        json_begin_object(json);
        json_key(json, "id");
        json_int(json, node->info.os_index);
        json_key(json, "cpu_list");
        json_string(json, node->info.cpus);
        json_key(json, "cpu_count");
        json_int(json, node->info.cpu_count);
        json_key(json, "memory_bytes");
        json_uint(json, node->info.memory_bytes);
        json_key(json, "hmat");
        if (node->hmat.present) {
            json_begin_object(json);
            json_long_or_null(json, "read_bandwidth_mbps",
                              node->hmat.read_bandwidth_mbps);
            json_long_or_null(json, "write_bandwidth_mbps",
                              node->hmat.write_bandwidth_mbps);
            json_long_or_null(json, "read_latency_ns",
                              node->hmat.read_latency_ns);
            json_long_or_null(json, "write_latency_ns",
                              node->hmat.write_latency_ns);
            json_key(json, "initiators");
            json_node_mask(json, node->hmat.initiators);
            json_end_object(json);
        } else {
            json_null(json);
        }
        json_key(json, "numastat");
        if (node->has_numastat) {
            json_begin_object(json);
            for (size_t k = 0; k < NUMASTAT_FIELDS; k++) {
                json_key(json, numastat_names[k]);
                json_uint(json, node->numastat[k]);
            }
            json_end_object(json);
        } else {
            json_null(json);
        }
        json_end_object(json);
    }
    json_end_array(json);
    json_key(json, "distances");
    json_begin_array(json);
    for (size_t i = 0; i < view->node_count; i++) {
        json_begin_inline_array(json);
        for (size_t j = 0; j < view->node_count; j++)
            json_uint(json, view->distances[i * view->node_count + j]);
        json_end_array(json);
    }
    json_end_array(json);
}

static void json_measured(json_writer *json, const numa_view *view)
{
    json_key(json, "bandwidth");
    if (view->bandwidth_gbps) {
        json_begin_object(json);
        json_key(json, "unit");
        json_string(json, "GB/s");
        json_key(json, "bytes_per_pair");
        json_uint(json, view->bandwidth_bytes);
        json_key(json, "threads_per_node");
        json_begin_inline_array(json);
        for (size_t i = 0; i < view->node_count; i++)
            json_int(json, view->threads_per_node[i]);
        json_end_array(json);
        json_spread(json, view, view->bandwidth_gbps, view->bandwidth_min_gbps,
                    view->bandwidth_max_gbps);
        json_end_object(json);
    } else {
        json_null(json);
    }
    json_key(json, "latency");
    if (view->latency_ns) {
        json_begin_object(json);
        json_key(json, "unit");
        json_string(json, "ns");
        json_key(json, "bytes");
        json_uint(json, view->latency_bytes);
        json_spread(json, view, view->latency_ns, view->latency_min_ns,
                    view->latency_max_ns);
        json_end_object(json);
    } else {
        json_null(json);
    }
    json_key(json, "measure_error");
    json_string_or_null(json,
                        view->measure_error[0] ? view->measure_error : NULL);
}

static void json_kernel_state(json_writer *json, const numa_view *view)
{
    json_key(json, "numa_balancing");
    if (view->this_system && view->balancing >= 0) {
        json_begin_object(json);
        json_key(json, "mode");
        json_int(json, view->balancing);
        json_key(json, "enabled");
        json_bool(json, view->balancing != 0);
        json_key(json, "pages_migrated_during_run");
        view->has_vmstat
            ? json_uint(json, view->migrated_after - view->migrated_before)
            : json_null(json);
        json_key(json, "window_seconds");
        json_double(json, view->window_seconds);
        json_end_object(json);
    } else {
        json_null(json);
    }
    json_key(json, "cpuset");
    if (view->this_system) {
        json_begin_object(json);
        json_key(json, "cpus_allowed");
        json_string(json, view->cpus_allowed);
        json_key(json, "cpus_online");
        json_string(json, view->cpus_online);
        json_key(json, "mems_allowed");
        json_string(json, view->mems_allowed);
        json_key(json, "nodes_online");
        json_string(json, view->nodes_online);
        json_end_object(json);
    } else {
        json_null(json);
    }
    json_key(json, "counters");
    if (view->this_system) {
        json_begin_object(json);
        json_key(json, "available");
        json_bool(json, view->counters_available);
        json_key(json, "detail");
        json_string(json, view->counters_reason);
        json_end_object(json);
    } else {
        json_null(json);
    }
}

static void json_process(json_writer *json, const numa_process *process)
{
    json_key(json, "process");
    if (!process) {
        json_null(json);
        return;
    }
    json_begin_object(json);
    json_key(json, "pid");
    json_int(json, process->pid);
    json_key(json, "error");
    json_string_or_null(json, process->ok ? NULL : process->error);
    json_key(json, "command");
    json_string(json, process->command);
    json_key(json, "threads");
    json_int(json, process->thread_count);
    json_key(json, "by_node");
    json_begin_array(json);
    for (int n = 0; n < LOCUS_MAX_NUMA_NODES; n++) {
        if (!process->bytes_by_node[n] && !process->threads_by_node[n])
            continue;
        json_begin_object(json);
        json_key(json, "node");
        json_int(json, n);
        json_key(json, "threads");
        json_int(json, process->threads_by_node[n]);
        json_key(json, "bytes");
        json_uint(json, process->bytes_by_node[n]);
        json_key(json, "anon_bytes");
        json_uint(json, process->anon_bytes_by_node[n]);
        json_key(json, "file_bytes");
        json_uint(json, process->file_bytes_by_node[n]);
        json_end_object(json);
    }
    json_end_array(json);
    json_key(json, "record_path");
    json_string_or_null(json,
                        process->record_path[0] ? process->record_path : NULL);
    json_key(json, "buffers");
    json_begin_array(json);
    for (size_t i = 0; i < process->buffer_count; i++) {
        const struct numa_buffer_view *b = &process->buffers[i];
        json_begin_object(json);
        json_key(json, "id");
        json_uint(json, b->id);
        json_key(json, "address");
        json_uint(json, b->address);
        json_key(json, "bytes");
        json_uint(json, b->bytes);
        json_key(json, "source");
        json_string(json, b->queried ? "move_pages" : "record");
        json_key(json, "by_node");
        json_begin_array(json);
        for (int n = 0; n < LOCUS_MAX_NUMA_NODES; n++) {
            if (!b->bytes_by_node[n])
                continue;
            json_begin_object(json);
            json_key(json, "node");
            json_int(json, n);
            json_key(json, "bytes");
            json_uint(json, b->bytes_by_node[n]);
            json_end_object(json);
        }
        json_end_array(json);
        json_end_object(json);
    }
    json_end_array(json);
    json_end_object(json);
}

void numa_write_json(const numa_view *view, FILE *out)
{
    json_writer json;
    json_document_begin(&json, out, "numa");
    json_key(&json, "version");
    json_string(&json, locus_version_string());
    json_key(&json, "topology");
    json_begin_object(&json);
    json_key(&json, "source");
    json_string(&json, view->topology_source);
    json_key(&json, "this_system");
    json_bool(&json, view->this_system);
    json_end_object(&json);
    json_key(&json, "not_measured");
    json_string_or_null(&json,
                        view->not_measured[0] ? view->not_measured : NULL);
    json_nodes(&json, view);
    json_measured(&json, view);
    json_kernel_state(&json, view);
    json_process(&json, view->process);
    json_key(&json, "default_placement");
    json_string(&json, view->default_placement);
    json_key(&json, "devices");
    json_begin_array(&json);
    for (size_t i = 0; i < view->device_count; i++) {
        const numa_device_view *device = &view->devices[i];
        json_begin_object(&json);
        json_key(&json, "selector");
        json_string(&json, device->info.selector);
        json_key(&json, "kind");
        json_string(&json, locus_device_kind_str(device->info.kind));
        json_key(&json, "name");
        json_string(&json, device->info.name);
        json_key(&json, "nearest_numa_nodes");
        json_node_mask(&json, device->info.nearest_numa_mask);
        json_key(&json, "staging_node");
        device->staging_node >= 0 ? json_int(&json, device->staging_node)
                                  : json_null(&json);
        json_end_object(&json);
    }
    json_end_array(&json);
    json_key(&json, "findings");
    json_begin_array(&json);
    for (size_t i = 0; i < view->finding_count; i++) {
        json_begin_object(&json);
        json_key(&json, "kind");
        json_string(&json, view->findings[i].kind);
        json_key(&json, "message");
        json_string(&json, view->findings[i].message);
        json_key(&json, "fix");
        json_string_or_null(
            &json, view->findings[i].fix[0] ? view->findings[i].fix : NULL);
        json_end_object(&json);
    }
    json_end_array(&json);
    json_end_object(&json);
    json_finish(&json);
}
