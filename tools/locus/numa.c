/* `locus numa`: the command line and the gathering of the facts. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "numa.h"
#include "progress.h"
#include "table.h"

void numa_usage(FILE *out)
{
    fputs(
        "usage: locus numa [--json] [--svg FILE] [--pid N] [--bytes SIZE]\n"
        "                  [--latency-bytes SIZE] [--repeat N] [--no-measure]\n"
        "\n"
        "Shows how this machine's NUMA memory behaves: the distance matrix,\n"
        "HMAT bandwidth and latency when the firmware gives them, a\n"
        "measured read bandwidth matrix (node i's workers reading memory\n"
        "bound to node j) and latency matrix (a dependent pointer chase),\n"
        "NUMA balancing and the per-node numastat counters, the devices\n"
        "with their nearest nodes, and findings: common problems in plain\n"
        "words. docs/NUMA.md explains how to read it.\n"
        "\n"
        "With LOCUS_TOPOLOGY (synthetic or XML) it describes that topology\n"
        "instead and measures nothing: bandwidth, latency and pages are\n"
        "this machine's, not the topology's.\n"
        "\n"
        "options:\n"
        "  --json              the same as JSON on stdout\n"
        "  --svg FILE          a heat map of the bandwidth and latency\n"
        "                      matrices (the distances when not measured)\n"
        "  --pid N             where process N's pages and threads are, by\n"
        "                      node (from /proc/N/numa_maps)\n"
        "  --bytes SIZE        bytes read per bandwidth pair, e.g. 64M\n"
        "                      (default: 64M, less on slow machines)\n"
        "  --latency-bytes SIZE  bytes of the pointer chase (default: the\n"
        "                      larger of --bytes and 4x the last-level cache)\n"
        "  --repeat N          runs per pair after a warm-up (default 5,\n"
        "                      at most 100): the median and the spread\n"
        "  --no-measure        skip the bandwidth and latency matrices\n"
        "  -h, --help          this text\n",
        out);
}

/* "64M", "4096", "1G", "512K". */
static bool parse_size(const char *text, size_t *bytes)
{
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (end == text || text[0] == '-')
        return false;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end != '\0' || value == 0 || value > (SIZE_MAX >> 1 >> shift))
        return false;
    *bytes = (size_t)value << shift;
    return *bytes >= 4096;
}

static int parse_arguments(int argc, char **argv, numa_options *options)
{
    memset(options, 0, sizeof *options);
    options->measure = true;
    for (int index = 1; index < argc; ++index) {
        const char *arg = argv[index];
        const char *value = NULL;
        arg_match match;
        if (arg_is_flag(arg, "--help", "-h")) {
            numa_usage(stdout);
            return EXIT_SUCCESS;
        } else if (arg_is_flag(arg, "--json", NULL)) {
            options->json = true;
        } else if (arg_is_flag(arg, "--no-measure", NULL)) {
            options->measure = false;
        } else if ((match = arg_value(argc, argv, &index, "--svg", &value))) {
            if (match == ARG_MISSING_VALUE || value[0] == '\0')
                return usage_error("numa", numa_usage, "--svg needs a file");
            options->svg_path = value;
        } else if ((match = arg_value(argc, argv, &index, "--pid", &value))) {
            unsigned long long pid;
            if (match == ARG_MISSING_VALUE ||
                !parse_unsigned(value, 1, 1u << 30, &pid))
                return usage_error("numa", numa_usage,
                                   "--pid \"%s\" is not a process id",
                                   match == ARG_MISSING_VALUE ? "" : value);
            options->pid = (int)pid;
        } else if ((match =
                        arg_value(argc, argv, &index, "--repeat", &value))) {
            unsigned long long repeat;
            if (match == ARG_MISSING_VALUE ||
                !parse_unsigned(value, 1, NUMA_MAX_REPEAT, &repeat))
                return usage_error("numa", numa_usage,
                                   "--repeat \"%s\" is not a count from 1 to "
                                   "%d",
                                   match == ARG_MISSING_VALUE ? "" : value,
                                   NUMA_MAX_REPEAT);
            options->repeat = (int)repeat;
        } else if ((match = arg_value(argc, argv, &index, "--bytes", &value))) {
            if (match == ARG_MISSING_VALUE ||
                !parse_size(value, &options->bytes))
                return usage_error("numa", numa_usage,
                                   "--bytes \"%s\" is not a size of at least "
                                   "4096 (e.g. 64M)",
                                   match == ARG_MISSING_VALUE ? "" : value);
        } else if ((match = arg_value(argc, argv, &index, "--latency-bytes",
                                      &value))) {
            if (match == ARG_MISSING_VALUE ||
                !parse_size(value, &options->latency_bytes))
                return usage_error("numa", numa_usage,
                                   "--latency-bytes \"%s\" is not a size of "
                                   "at least 4096 (e.g. 256M)",
                                   match == ARG_MISSING_VALUE ? "" : value);
        } else if (arg[0] == '-') {
            return usage_error("numa", numa_usage, "unknown option \"%s\"",
                               arg);
        } else {
            return usage_error("numa", numa_usage, "unexpected argument \"%s\"",
                               arg);
        }
    }
    return -1; /* go on */
}

static bool gather_nodes(locus_context *context, numa_view *view)
{
    if (locus_numa_node_count(context, &view->node_count) != LOCUS_SUCCESS) {
        report_locus_failure("counting NUMA nodes");
        return false;
    }
    size_t n = view->node_count;
    view->nodes = xmalloc(n * sizeof *view->nodes);
    memset(view->nodes, 0, n * sizeof *view->nodes);
    view->distances = xmalloc(n * n * sizeof(unsigned));
    for (size_t i = 0; i < n; i++) {
        numa_node_view *node = &view->nodes[i];
        locus_numa_node_info_init(&node->info);
        if (locus_numa_node_get(context, i, &node->info) != LOCUS_SUCCESS) {
            report_locus_failure("describing NUMA node %zu", i);
            return false;
        }
        for (size_t j = 0; j < n; j++)
            if (locus_numa_distance(context, i, j,
                                    &view->distances[i * n + j]) !=
                LOCUS_SUCCESS) {
                report_locus_failure("reading a NUMA distance");
                return false;
            }
        /* The kernel's files describe this machine, not a what-if one. */
        if (view->this_system) {
            numa_read_hmat(node->info.os_index, &node->hmat);
            node->has_numastat =
                numa_read_numastat(node->info.os_index, node->numastat);
        }
    }
    return true;
}

static bool gather_devices(locus_context *context, numa_view *view)
{
    if (locus_device_count(context, &view->device_count) != LOCUS_SUCCESS) {
        report_locus_failure("counting devices");
        return false;
    }
    view->devices = xmalloc((view->device_count + 1) * sizeof *view->devices);
    for (size_t i = 0; i < view->device_count; i++) {
        numa_device_view *device = &view->devices[i];
        locus_device *handle = NULL;
        locus_device_info_init(&device->info);
        if (locus_device_get(context, i, &handle) != LOCUS_SUCCESS ||
            locus_device_get_info(handle, &device->info) != LOCUS_SUCCESS) {
            report_locus_failure("describing device %zu", i);
            return false;
        }
        /* Staging goes to the first of the nearest nodes (services'
         * host_alloc with that node); none when the node is unknown. */
        device->staging_node = -1;
        for (int n = 0; n < 64 && device->info.kind != LOCUS_DEVICE_CPU; n++)
            if (device->info.nearest_numa_mask >> n & 1u) {
                device->staging_node = n;
                break;
            }
    }
    size_t settings = 0;
    locus_setting_count(context, &settings);
    for (size_t i = 0; i < settings; i++) {
        locus_setting setting;
        if (locus_setting_get(context, i, &setting) == LOCUS_SUCCESS &&
            setting.name && strcmp(setting.name, "LOCUS_NUMA") == 0)
            snprintf(view->default_placement, sizeof view->default_placement,
                     "%s", setting.resolved ? setting.resolved : "");
    }
    return true;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void free_view(numa_view *view)
{
    free(view->nodes);
    free(view->distances);
    free(view->bandwidth_gbps);
    free(view->bandwidth_min_gbps);
    free(view->bandwidth_max_gbps);
    free(view->latency_ns);
    free(view->latency_min_ns);
    free(view->latency_max_ns);
    free(view->devices);
    free(view->process);
}

int numa_command(int argc, char **argv)
{
    numa_options options;
    int parsed = parse_arguments(argc, argv, &options);
    if (parsed >= 0)
        return parsed;
    progress_init();
    double started = seconds_now();
    numa_view view;
    memset(&view, 0, sizeof view);
    view.balancing = -1;

    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        return EXIT_FAILURE;
    }
    const char *source = locus_topology_source(context);
    view.topology_source = source ? source : "unknown";
    view.this_system = locus_topology_is_this_system(context) != 0;
    if (!view.this_system)
        snprintf(view.not_measured, sizeof view.not_measured, "topology is %s",
                 strncmp(view.topology_source, "synthetic:", 10) == 0
                     ? "synthetic"
                     : "an XML file, not this machine");
    if (view.this_system)
        view.has_vmstat = numa_read_migrated(&view.migrated_before);

    int status = EXIT_FAILURE;
    if (!gather_nodes(context, &view) || !gather_devices(context, &view))
        goto done;
    if (view.this_system) {
        view.balancing = numa_read_balancing();
        numa_read_cpusets(&view);
        view.counters_available = numa_counters_available(
            view.counters_reason, sizeof view.counters_reason);
        if (options.measure)
            numa_measure(context, &options, &view);
        if (options.pid) {
            view.process = xmalloc(sizeof *view.process);
            numa_read_process(options.pid, view.process);
        }
    } else if (options.pid) {
        fprintf(stderr, "locus numa: --pid %d ignored: the %s\n", options.pid,
                view.not_measured);
    }
    if (view.has_vmstat && numa_read_migrated(&view.migrated_after))
        view.window_seconds = seconds_now() - started;
    else
        view.has_vmstat = false;
    numa_find(&view);

    if (options.json)
        numa_write_json(&view, stdout);
    else
        numa_write_text(&view);
    status = EXIT_SUCCESS;
    if (options.svg_path && !numa_write_svg(&view, options.svg_path))
        status = EXIT_FAILURE;
    if (view.process && !view.process->ok) {
        fprintf(stderr, "locus numa: %s\n", view.process->error);
        status = EXIT_FAILURE;
    }
done:
    free_view(&view);
    locus_context_destroy(context);
    return status;
}
