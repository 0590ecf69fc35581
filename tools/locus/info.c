/* `locus info`: the machine as Locus sees it. Everything is gathered first
 * into a machine_view, then written as tables or as JSON, so both forms
 * always show the same facts. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "args.h"
#include "cli.h"
#include "format.h"
#include "json.h"
#include "table.h"

void info_usage(FILE *out)
{
    fputs("usage: locus info [--json]\n"
          "\n"
          "Shows the machine as Locus sees it: where the topology came from\n"
          "and whether memory binding is real, the NUMA nodes with their\n"
          "cpus and memory, the distance matrix, every backend (or why it\n"
          "is absent), every device with its nearest NUMA nodes, under an\n"
          "MPI launcher the local rank and the cpus its workers got, and\n"
          "how each LOCUS_* variable resolved, with the device that ops\n"
          "given none run on (as LOCUS_DEVICE selects it, or the cost\n"
          "model).\n"
          "\n"
          "Where creating a context fails only because of LOCUS_STRICT=1\n"
          "(a LOCUS_DEVICE that matches no device), the report is made\n"
          "without strictness and names the failure under \"problems\";\n"
          "the exit status is then 1.\n"
          "\n"
          "options:\n"
          "  --json       the same as JSON on stdout: nodes, distances,\n"
          "               backends (each with its devices), default_device,\n"
          "               mpi (null outside a launcher), env and problems\n"
          "  -h, --help   this text\n"
          "\n"
          "Exit status: 0 the report, no problem; 1 a problem (the report\n"
          "is still printed when a context could be made); 2 a bad command\n"
          "line.\n",
          out);
}

typedef struct machine_view {
    const char *topology_source;
    bool topology_is_this_system;
    size_t node_count;
    locus_numa_node_info *nodes;
    unsigned *distances; /* node_count x node_count, by node order */
    size_t backend_count;
    locus_backend_info *backends;
    size_t device_count;
    locus_device_info *devices;
    /* Where an op given no device runs (locus_default_device), or why
     * there is none. */
    bool has_default_device;
    char default_device[32];
    locus_default_choice default_choice;
    char default_device_error[512];
    /* Under LOCUS_DEFAULT_FALLBACK: why LOCUS_DEVICE's backends are absent,
     * " (cuda: ...)", or "". */
    char absent_backends[1024];
    /* LOCUS_STRICT=1 made locus_context_create fail; the view is of a
     * context made without it, and this is the failure. */
    bool strictness_relaxed;
    char strict_failure[1024];
    size_t setting_count;
    locus_setting *settings; /* strings owned by the context */
    /* Under an MPI launcher: the local rank and its workers' cpus. */
    locus_local_rank_info local_rank;
} machine_view;

static void free_view(machine_view *view)
{
    free(view->nodes);
    free(view->distances);
    free(view->backends);
    free(view->devices);
    free(view->settings);
}

static bool gather_topology(locus_context *context, machine_view *view)
{
    const char *source = locus_topology_source(context);
    view->topology_source = source != NULL ? source : "unknown";
    view->topology_is_this_system = locus_topology_is_this_system(context);
    if (locus_numa_node_count(context, &view->node_count) != LOCUS_SUCCESS) {
        report_locus_failure("counting NUMA nodes");
        return false;
    }
    view->nodes = xmalloc(view->node_count * sizeof(*view->nodes));
    for (size_t i = 0; i < view->node_count; ++i) {
        locus_numa_node_info_init(&view->nodes[i]);
        if (locus_numa_node_get(context, i, &view->nodes[i]) != LOCUS_SUCCESS) {
            report_locus_failure("describing NUMA node %zu", i);
            return false;
        }
    }
    view->distances =
        xmalloc(view->node_count * view->node_count * sizeof(unsigned));
    for (size_t from = 0; from < view->node_count; ++from) {
        for (size_t to = 0; to < view->node_count; ++to) {
            unsigned *distance = &view->distances[from * view->node_count + to];
            if (locus_numa_distance(context, from, to, distance) !=
                LOCUS_SUCCESS) {
                report_locus_failure("reading the distance from node %zu "
                                     "to node %zu",
                                     from, to);
                return false;
            }
        }
    }
    return true;
}

static bool gather_backends_and_devices(locus_context *context,
                                        machine_view *view)
{
    if (locus_backend_count(context, &view->backend_count) != LOCUS_SUCCESS) {
        report_locus_failure("counting backends");
        return false;
    }
    view->backends = xmalloc(view->backend_count * sizeof(*view->backends));
    for (size_t i = 0; i < view->backend_count; ++i) {
        locus_backend_info_init(&view->backends[i]);
        if (locus_backend_get(context, i, &view->backends[i]) !=
            LOCUS_SUCCESS) {
            report_locus_failure("describing backend %zu", i);
            return false;
        }
    }
    if (locus_device_count(context, &view->device_count) != LOCUS_SUCCESS) {
        report_locus_failure("counting devices");
        return false;
    }
    view->devices = xmalloc(view->device_count * sizeof(*view->devices));
    for (size_t i = 0; i < view->device_count; ++i) {
        locus_device *device = NULL;
        locus_device_info_init(&view->devices[i]);
        if (locus_device_get(context, i, &device) != LOCUS_SUCCESS ||
            locus_device_get_info(device, &view->devices[i]) != LOCUS_SUCCESS) {
            report_locus_failure("describing device %zu", i);
            return false;
        }
    }
    /* Having no default device is a fact worth showing, not a failure of
     * `info`. Asked as the runtime decides an op's device, so that the
     * report is where ops given none really run. */
    locus_device *default_device = NULL;
    if (locus_default_device(context, &default_device, &view->default_choice) ==
        LOCUS_SUCCESS) {
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get_info(default_device, &info) == LOCUS_SUCCESS) {
            view->has_default_device = true;
            snprintf(view->default_device, sizeof(view->default_device), "%s",
                     info.selector);
        }
    }
    if (!view->has_default_device) {
        snprintf(view->default_device_error, sizeof(view->default_device_error),
                 "%s", locus_last_error());
    }
    const char *wanted = getenv("LOCUS_DEVICE");
    describe_absent_backends(context, wanted != NULL ? wanted : "",
                             view->absent_backends,
                             sizeof(view->absent_backends));
    return true;
}

static bool gather_local_rank(locus_context *context, machine_view *view)
{
    locus_local_rank_info_init(&view->local_rank);
    if (locus_local_rank_get(context, &view->local_rank) != LOCUS_SUCCESS) {
        report_locus_failure("reading the MPI local rank");
        return false;
    }
    return true;
}

static bool gather_settings(locus_context *context, machine_view *view)
{
    if (locus_setting_count(context, &view->setting_count) != LOCUS_SUCCESS) {
        report_locus_failure("counting settings");
        return false;
    }
    view->settings = xmalloc(view->setting_count * sizeof(*view->settings));
    for (size_t i = 0; i < view->setting_count; ++i) {
        locus_setting *setting = &view->settings[i];
        if (locus_setting_get(context, i, setting) != LOCUS_SUCCESS) {
            report_locus_failure("reading setting %zu", i);
            return false;
        }
        /* The context was made with strict "0" as an option; the user's
         * setting is the environment's, and it is what failed. */
        if (view->strictness_relaxed && setting->name != NULL &&
            strcmp(setting->name, "LOCUS_STRICT") == 0) {
            setting->raw = getenv("LOCUS_STRICT");
            setting->source = "environment";
            setting->resolved = "as set; this report was made without it "
                                "(see problems)";
        }
    }
    return true;
}

static const char *setting_raw(const machine_view *view, const char *name)
{
    for (size_t i = 0; i < view->setting_count; ++i) {
        const locus_setting *setting = &view->settings[i];
        if (setting->name != NULL && strcmp(setting->name, name) == 0) {
            return setting->raw;
        }
    }
    return NULL;
}

/* The record's vocabulary (locus_record.chosen_by). */
static const char *default_choice_name(locus_default_choice choice)
{
    switch (choice) {
    case LOCUS_DEFAULT_SELECTED:
        return "LOCUS_DEVICE";
    case LOCUS_DEFAULT_AUTO:
        return "auto";
    case LOCUS_DEFAULT_FALLBACK:
        return "fallback";
    }
    return "unknown";
}

/* A node's cpu list may be cut short by its fixed-size field on very large
 * machines; then the last item may be partial and is dropped. */
static bool cpu_list_may_be_truncated(const locus_numa_node_info *node)
{
    return strlen(node->cpus) + 1 >= sizeof(node->cpus);
}

static void write_cpu_to_json(long cpu, void *state)
{
    json_int(state, cpu);
}

static void write_cpus_json(json_writer *json, const locus_numa_node_info *node)
{
    char list[sizeof(node->cpus)];
    snprintf(list, sizeof(list), "%s", node->cpus);
    if (cpu_list_may_be_truncated(node)) {
        char *last_comma = strrchr(list, ',');
        *(last_comma != NULL ? last_comma : list) = '\0';
    }
    json_begin_inline_array(json);
    cpu_list_for_each(list, write_cpu_to_json, json);
    json_end_array(json);
}

static void write_node_mask_json(json_writer *json, uint64_t mask)
{
    json_begin_inline_array(json);
    for (int node = 0; node < 64; ++node) {
        if (mask >> node & 1u) {
            json_int(json, node);
        }
    }
    json_end_array(json);
}

static void write_device_json(json_writer *json, const locus_device_info *info)
{
    json_begin_object(json);
    json_key(json, "selector");
    json_string(json, info->selector);
    json_key(json, "backend");
    json_string(json, info->backend);
    json_key(json, "index");
    json_int(json, info->index_in_backend);
    json_key(json, "name");
    json_string(json, info->name);
    json_key(json, "vendor");
    json_string(json, info->vendor);
    json_key(json, "version");
    json_string(json, info->version);
    json_key(json, "kind");
    json_string(json, locus_device_kind_str(info->kind));
    json_key(json, "nearest_numa_nodes");
    write_node_mask_json(json, info->nearest_numa_mask);
    json_key(json, "memory_bytes");
    json_uint(json, info->memory_bytes);
    json_key(json, "compute_units");
    json_int(json, info->compute_units);
    /* null when unknown (CPU devices, OpenCL without a PCI extension). */
    json_key(json, "pci_bus_id");
    if (info->pci_bus_id[0] != '\0') {
        json_string(json, info->pci_bus_id);
    } else {
        json_null(json);
    }
    json_end_object(json);
}

/* "mpi": null outside an MPI launcher (docs/MPI.md). */
static void write_local_rank_json(json_writer *json,
                                  const locus_local_rank_info *info)
{
    json_key(json, "mpi");
    if (info->local_rank < 0) {
        json_null(json);
        return;
    }
    json_begin_object(json);
    json_key(json, "local_rank");
    json_int(json, info->local_rank);
    json_key(json, "local_size");
    json_int(json, info->local_size);
    json_key(json, "variable");
    json_string(json, info->variable);
    json_key(json, "cpus");
    json_begin_inline_array(json);
    cpu_list_for_each(info->cpus, write_cpu_to_json, json);
    json_end_array(json);
    json_key(json, "cpu_list");
    json_string(json, info->cpus);
    json_key(json, "nodes");
    write_node_mask_json(json, info->numa_mask);
    json_key(json, "workers");
    json_int(json, info->workers);
    json_key(json, "narrowed");
    json_bool(json, info->narrowed != 0);
    json_key(json, "reason");
    json_string(json, info->reason);
    json_end_object(json);
}

static void write_view_json(const machine_view *view)
{
    json_writer json;
    json_document_begin(&json, stdout, "info");
    json_key(&json, "version");
    json_string(&json, locus_version_string());
    json_key(&json, "topology");
    json_begin_object(&json);
    json_key(&json, "source");
    json_string(&json, view->topology_source);
    json_key(&json, "this_system");
    json_bool(&json, view->topology_is_this_system);
    json_end_object(&json);

    json_key(&json, "nodes");
    json_begin_array(&json);
    for (size_t i = 0; i < view->node_count; ++i) {
        const locus_numa_node_info *node = &view->nodes[i];
        json_begin_object(&json);
        json_key(&json, "id");
        json_int(&json, node->os_index);
        json_key(&json, "cpus");
        write_cpus_json(&json, node);
        json_key(&json, "cpu_list");
        json_string(&json, node->cpus);
        json_key(&json, "cpu_count");
        json_int(&json, node->cpu_count);
        json_key(&json, "memory_bytes");
        json_uint(&json, node->memory_bytes);
        json_end_object(&json);
    }
    json_end_array(&json);

    json_key(&json, "distances");
    json_begin_array(&json);
    for (size_t from = 0; from < view->node_count; ++from) {
        json_begin_inline_array(&json);
        for (size_t to = 0; to < view->node_count; ++to) {
            json_uint(&json, view->distances[from * view->node_count + to]);
        }
        json_end_array(&json);
    }
    json_end_array(&json);

    json_key(&json, "backends");
    json_begin_array(&json);
    for (size_t b = 0; b < view->backend_count; ++b) {
        const locus_backend_info *backend = &view->backends[b];
        json_begin_object(&json);
        json_key(&json, "name");
        json_string(&json, backend->name);
        json_key(&json, "available");
        json_bool(&json, backend->available != 0);
        json_key(&json, "reason");
        json_string(&json, backend->reason);
        json_key(&json, "device_count");
        json_uint(&json, backend->device_count);
        json_key(&json, "devices");
        json_begin_array(&json);
        for (size_t d = 0; d < view->device_count; ++d) {
            if (strcmp(view->devices[d].backend, backend->name) == 0) {
                write_device_json(&json, &view->devices[d]);
            }
        }
        json_end_array(&json);
        json_end_object(&json);
    }
    json_end_array(&json);

    json_key(&json, "default_device");
    json_string_or_null(&json,
                        view->has_default_device ? view->default_device : NULL);
    /* "LOCUS_DEVICE": it names the device; "auto": the cost model places
     * each op (default_device is its pick for a large gemm); "fallback":
     * LOCUS_DEVICE names no device here, ops choose as under auto. */
    json_key(&json, "default_device_chosen_by");
    json_string(&json, default_choice_name(view->default_choice));
    if (!view->has_default_device) {
        json_key(&json, "default_device_error");
        json_string(&json, view->default_device_error);
    }

    write_local_rank_json(&json, &view->local_rank);

    json_key(&json, "env");
    json_begin_array(&json);
    for (size_t i = 0; i < view->setting_count; ++i) {
        const locus_setting *setting = &view->settings[i];
        json_begin_object(&json);
        json_key(&json, "name");
        json_string_or_null(&json, setting->name);
        json_key(&json, "raw");
        json_string_or_null(&json, setting->raw);
        json_key(&json, "source");
        json_string_or_null(&json, setting->source);
        json_key(&json, "resolved");
        json_string_or_null(&json, setting->resolved);
        json_end_object(&json);
    }
    json_end_array(&json);

    /* What makes the exit status 1 although the report was written. */
    json_key(&json, "problems");
    json_begin_array(&json);
    if (view->strictness_relaxed) {
        char problem[sizeof(view->strict_failure) + 128];
        snprintf(problem, sizeof(problem),
                 "with LOCUS_STRICT as set, creating a context fails: %s; "
                 "this report was made without it",
                 view->strict_failure);
        json_string(&json, problem);
    }
    json_end_array(&json);
    json_end_object(&json);
    json_finish(&json);
}

static void print_nodes(const machine_view *view)
{
    static const char *const headers[] = {"node", "cpus", "cpu count",
                                          "memory"};
    table nodes;
    table_init(&nodes, 4, headers);
    table_align_right(&nodes, 0);
    table_align_right(&nodes, 2);
    table_align_right(&nodes, 3);
    for (size_t i = 0; i < view->node_count; ++i) {
        const locus_numa_node_info *node = &view->nodes[i];
        char memory[32];
        format_bytes(node->memory_bytes, memory, sizeof(memory));
        table_add_row(&nodes);
        table_set(&nodes, 0, "%d", node->os_index);
        table_set(&nodes, 1, "%s%s", node->cpus[0] != '\0' ? node->cpus : "-",
                  cpu_list_may_be_truncated(node) ? "..." : "");
        table_set(&nodes, 2, "%d", node->cpu_count);
        table_set(&nodes, 3, "%s", memory);
    }
    printf("NUMA nodes\n");
    table_print(&nodes, stdout, 2);
    table_free(&nodes);
}

static void print_distances(const machine_view *view)
{
    size_t shown = view->node_count;
    if (shown + 1 > TABLE_MAX_COLUMNS) {
        shown = TABLE_MAX_COLUMNS - 1;
    }
    const char *headers[TABLE_MAX_COLUMNS];
    char labels[TABLE_MAX_COLUMNS][16];
    headers[0] = "node";
    for (size_t i = 0; i < shown; ++i) {
        snprintf(labels[i], sizeof(labels[i]), "%d", view->nodes[i].os_index);
        headers[i + 1] = labels[i];
    }
    table distances;
    table_init(&distances, shown + 1, headers);
    for (size_t column = 0; column <= shown; ++column) {
        table_align_right(&distances, column);
    }
    for (size_t from = 0; from < shown; ++from) {
        table_add_row(&distances);
        table_set(&distances, 0, "%d", view->nodes[from].os_index);
        for (size_t to = 0; to < shown; ++to) {
            unsigned distance = view->distances[from * view->node_count + to];
            if (distance == 0) {
                table_set(&distances, to + 1, "-"); /* topology gave none */
            } else {
                table_set(&distances, to + 1, "%u", distance);
            }
        }
    }
    printf("\nNUMA distances (10 = local)\n");
    table_print(&distances, stdout, 2);
    table_free(&distances);
}

static void print_backends(const machine_view *view)
{
    static const char *const headers[] = {"backend", "available", "devices",
                                          "reason"};
    table backends;
    table_init(&backends, 4, headers);
    table_align_right(&backends, 2);
    for (size_t i = 0; i < view->backend_count; ++i) {
        const locus_backend_info *backend = &view->backends[i];
        table_add_row(&backends);
        table_set(&backends, 0, "%s", backend->name);
        table_set(&backends, 1, "%s", backend->available ? "yes" : "no");
        table_set(&backends, 2, "%zu", backend->device_count);
        table_set(&backends, 3, "%s", backend->reason);
    }
    printf("\nbackends\n");
    table_print(&backends, stdout, 2);
    table_free(&backends);
}

/* Where ops given no device run, in LOCUS_DEVICE's terms. */
static void print_default_device(const machine_view *view)
{
    if (!view->has_default_device) {
        printf("  ops given no device: none: %s\n", view->default_device_error);
        return;
    }
    const char *raw = setting_raw(view, "LOCUS_DEVICE");
    char selector[256];
    format_escaped(raw != NULL ? raw : "", selector, sizeof selector);
    switch (view->default_choice) {
    case LOCUS_DEFAULT_SELECTED:
        printf("  ops given no device run on %s (LOCUS_DEVICE='%s')\n",
               view->default_device, selector);
        return;
    case LOCUS_DEFAULT_AUTO:
        printf("  ops given no device: the cost model chooses per op "
               "(LOCUS_DEVICE=auto); a large gemm on host data goes to %s\n",
               view->default_device);
        return;
    case LOCUS_DEFAULT_FALLBACK:
        printf("  ops given no device: LOCUS_DEVICE='%s' matches no device "
               "here%s, so the cost model chooses per op; a large gemm on "
               "host data goes to %s\n",
               selector, view->absent_backends, view->default_device);
        return;
    }
}

static void print_devices(const machine_view *view)
{
    static const char *const headers[] = {"selector",      "kind",    "name",
                                          "vendor",        "NUMA",    "memory",
                                          "compute units", "version", "PCI"};
    table devices;
    table_init(&devices, 9, headers);
    table_align_right(&devices, 5);
    table_align_right(&devices, 6);
    for (size_t i = 0; i < view->device_count; ++i) {
        const locus_device_info *info = &view->devices[i];
        char nodes[96];
        char memory[32];
        format_node_mask(info->nearest_numa_mask, nodes, sizeof(nodes));
        format_bytes(info->memory_bytes, memory, sizeof(memory));
        table_add_row(&devices);
        table_set(&devices, 0, "%s", info->selector);
        table_set(&devices, 1, "%s", locus_device_kind_str(info->kind));
        table_set(&devices, 2, "%s", info->name);
        table_set(&devices, 3, "%s", info->vendor);
        table_set(&devices, 4, "%s", nodes);
        table_set(&devices, 5, "%s", memory);
        table_set(&devices, 6, "%d", info->compute_units);
        table_set(&devices, 7, "%s", info->version);
        table_set(&devices, 8, "%s",
                  info->pci_bus_id[0] != '\0' ? info->pci_bus_id : "-");
    }
    printf("\ndevices\n");
    if (view->device_count == 0) {
        printf("  none\n");
    } else {
        table_print(&devices, stdout, 2);
    }
    table_free(&devices);
    print_default_device(view);
}

static void print_settings(const machine_view *view)
{
    static const char *const headers[] = {"variable", "raw", "source",
                                          "resolved"};
    table settings;
    table_init(&settings, 4, headers);
    for (size_t i = 0; i < view->setting_count; ++i) {
        const locus_setting *setting = &view->settings[i];
        table_add_row(&settings);
        table_set(&settings, 0, "%s", setting->name ? setting->name : "?");
        char raw[512];
        format_escaped(setting->raw ? setting->raw : "(unset)", raw,
                       sizeof raw);
        table_set(&settings, 1, "%s", raw);
        table_set(&settings, 2, "%s", setting->source ? setting->source : "");
        table_set(&settings, 3, "%s",
                  setting->resolved ? setting->resolved : "");
    }
    printf("\nsettings\n");
    table_print(&settings, stdout, 2);
    table_free(&settings);
}

static void print_local_rank(const locus_local_rank_info *info)
{
    if (info->local_rank < 0) {
        return;
    }
    char nodes[96];
    format_node_mask(info->numa_mask, nodes, sizeof(nodes));
    printf("\nMPI: local rank %d of %d (%s): %d worker%s on cpus %s, NUMA "
           "node %s; %s%s\n",
           info->local_rank, info->local_size, info->variable, info->workers,
           info->workers == 1 ? "" : "s", info->cpus, nodes,
           info->narrowed ? "" : "not narrowed: ", info->reason);
}

static void print_view(const machine_view *view)
{
    printf("Locus %s\n", locus_version_string());
    printf("topology: %s\n", view->topology_source);
    printf("binding: %s\n\n",
           view->topology_is_this_system
               ? "real (the topology is this machine's)"
               : "simulated (the topology is not this machine's: nothing "
                 "is bound or verified)");
    print_nodes(view);
    print_distances(view);
    print_backends(view);
    print_devices(view);
    print_local_rank(&view->local_rank);
    print_settings(view);
    if (view->strictness_relaxed) {
        printf("\nproblems\n  with LOCUS_STRICT as set, creating a context "
               "fails: %s\n  this report was made without it\n",
               view->strict_failure);
    }
}

/* The diagnostic tool must explain the configuration that fails: when
 * LOCUS_STRICT=1 is what makes context creation fail (a LOCUS_DEVICE that
 * matches no device), the context is made again without it, and the
 * failure goes into the report. A failure without strictness too (a value
 * that does not parse) leaves nothing to report on. */
static bool create_context(machine_view *view, locus_context **context)
{
    if (locus_context_create(NULL, context) == LOCUS_SUCCESS) {
        return true;
    }
    const char *strict = getenv("LOCUS_STRICT");
    if (strict == NULL || strict[0] == '\0') {
        report_context_failure();
        return false;
    }
    snprintf(view->strict_failure, sizeof(view->strict_failure), "%s",
             locus_last_error());
    locus_context_options options;
    locus_context_options_init(&options);
    options.strict = "0";
    if (locus_context_create(&options, context) != LOCUS_SUCCESS) {
        report_context_failure();
        return false;
    }
    view->strictness_relaxed = true;
    fprintf(stderr,
            "locus: creating a context: %s\n"
            "locus info: reporting on a context made without LOCUS_STRICT\n",
            view->strict_failure);
    return true;
}

int info_command(int argc, char **argv)
{
    bool json = false;
    for (int index = 1; index < argc; ++index) {
        const char *arg = argv[index];
        if (arg_is_flag(arg, "--help", "-h")) {
            info_usage(stdout);
            return EXIT_SUCCESS;
        } else if (arg_is_flag(arg, "--json", NULL)) {
            json = true;
        } else if (arg[0] == '-') {
            return usage_error("info", info_usage, "unknown option \"%s\"",
                               arg);
        } else {
            return usage_error("info", info_usage, "unexpected argument \"%s\"",
                               arg);
        }
    }
    machine_view view;
    memset(&view, 0, sizeof(view));
    locus_context *context = NULL;
    if (!create_context(&view, &context)) {
        return EXIT_FAILURE;
    }
    int exit_status = EXIT_FAILURE;
    if (gather_topology(context, &view) &&
        gather_backends_and_devices(context, &view) &&
        gather_local_rank(context, &view) && gather_settings(context, &view)) {
        if (json) {
            write_view_json(&view);
        } else {
            print_view(&view);
        }
        exit_status = view.strictness_relaxed ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    free_view(&view);
    locus_context_destroy(context);
    return exit_status;
}
