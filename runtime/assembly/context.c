#include "context_types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibration_measure.h"
#include "device.h"
#include "services.h"
#include "fault.h"
#include "safe_file.h"
#include "status.h"

void locus_context_options_init(locus_context_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
}

/* A name LOCUS_BACKENDS or LOCUS_DEVICE gives that no backend has, and a
 * selector part its backend does not take, are refused as values that do
 * not parse are, now that the backends' names and tables are known. */
static locus_status check_backend_names(const locus_context *context)
{
    const locus__config *config = &context->config;
    const locus__backend_list *asked = &config->backends;
    for (size_t i = 0; i < asked->count; i++) {
        if (locus__backend_find(context, asked->names[i]))
            continue;
        locus__selector item = {.index = -1, .want_kind = -1};
        snprintf(item.backend, sizeof item.backend, "%s", asked->names[i]);
        char why[512];
        locus__selector_valid(context, &item, why, sizeof why);
        return locus__setting_refuse(config, LOCUS__SET_BACKENDS, "%s", why);
    }
    const locus__selector_list *list = &config->device;
    for (size_t i = 0; i < list->count; i++) {
        char why[512], text[LOCUS__SELECTOR_MAX];
        if (locus__selector_valid(context, &list->items[i], why, sizeof why))
            continue;
        locus__format_selector(&list->items[i], text, sizeof text);
        return locus__setting_refuse(config, LOCUS__SET_DEVICE, "'%s': %s",
                                     text, why);
    }
    return LOCUS_SUCCESS;
}

/* The backend list: every backend there is (plugin.h), each loaded when
 * LOCUS_BACKENDS asks for it, and the settings that name backends checked
 * against it. Nothing is started yet. */
static locus_status find_backends(locus_context *context)
{
    char names[LOCUS__MAX_BACKENDS][LOCUS__BACKEND_NAME_MAX];
    size_t count = locus__plugin_names(context->config.plugin_path, names,
                                       LOCUS__MAX_BACKENDS);
    for (size_t i = 0; i < count; i++) {
        locus__backend_slot *slot = &context->backends[i];
        if (locus__backend_list_has(&context->config.backends, names[i])) {
            locus__plugin_load(slot, names[i], context->config.plugin_path);
        } else {
            memset(slot, 0, sizeof *slot);
            snprintf(slot->name, sizeof slot->name, "%s", names[i]);
            snprintf(slot->reason, sizeof slot->reason,
                     "not in LOCUS_BACKENDS");
        }
        context->backend_count = i + 1;
    }
    return check_backend_names(context);
}

/* Starts every loaded backend: each probes its devices. */
static locus_status start_backends(locus_context *context)
{
    for (size_t i = 0; i < context->backend_count; i++) {
        locus__backend_slot *slot = &context->backends[i];
        locus_status status =
            locus__plugin_init(slot, &context->services, context);
        if (status != LOCUS_SUCCESS)
            return status;
        if (!slot->available && slot->table)
            locus__log(context, LOCUS_LOG_INFO, "backend %s is absent: %s",
                       slot->name, slot->reason);
    }
    return LOCUS_SUCCESS;
}

/* The OS numbers of the topology's nodes, "0" or "0,1,2,3". */
static void node_list(const locus__topology *topology, char *text,
                      size_t capacity)
{
    size_t used = 0;
    text[0] = '\0';
    for (int n = 0; n < topology->node_count && used < capacity; n++) {
        int written = snprintf(text + used, capacity - used, "%s%d",
                               n ? "," : "", topology->nodes[n].os_index);
        if (written < 0)
            break;
        used += (size_t)written;
    }
}

/* Why one selector item matches no device, in what Locus knows: the
 * backend absent and its reason, a number past its devices, no device of
 * the kind asked for, or the backend's own word on its part (the cpu's
 * "no NUMA node 7: this machine has nodes 0,1"). */
static void explain_no_match(const locus_context *context,
                             const locus__selector *item, char *text,
                             size_t capacity)
{
    if (item->is_auto) {
        snprintf(text, capacity, "auto always matches");
        return;
    }
    const char *name = item->backend;
    const locus__backend_slot *slot = locus__backend_find(context, name);
    if (!slot || !slot->available) {
        snprintf(text, capacity, "the %s backend is absent: %s", name,
                 slot ? slot->reason : "no such backend");
        return;
    }
    size_t devices = 0, of_kind = 0;
    for (size_t d = 0; d < context->device_count; d++) {
        const locus_device *device = &context->devices[d];
        if (device->backend != slot)
            continue;
        devices++;
        of_kind += item->want_kind >= 0 &&
                   device->info.kind == (locus_device_kind)item->want_kind;
    }
    if (item->part[0] && devices > 0) {
        locus__selector_explain_part(context, item, text, capacity);
    } else if (item->want_kind >= 0 && of_kind == 0) {
        snprintf(text, capacity, "%s has no %s device among its %zu", name,
                 locus_device_kind_str((locus_device_kind)item->want_kind),
                 devices);
    } else if (devices == 0) {
        snprintf(text, capacity, "%s found no usable device", name);
    } else if (devices == 1) {
        snprintf(text, capacity, "%s has 1 device (%s:0)", name, name);
    } else {
        snprintf(text, capacity, "%s has %zu devices (%s:0 to %s:%zu)", name,
                 devices, name, name, devices - 1);
    }
}

/* Every item's reason, "cuda: the cuda backend is absent: ...; opencl:gpu:
 * opencl has no gpu device among its 1". */
static void explain_no_match_list(const locus_context *context, char *text,
                                  size_t capacity)
{
    const locus__selector_list *list = &context->config.device;
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < list->count && used < capacity; i++) {
        char item[32], reason[384];
        locus__format_selector(&list->items[i], item, sizeof item);
        explain_no_match(context, &list->items[i], reason, sizeof reason);
        int written = list->count == 1
                          ? snprintf(text + used, capacity - used, "%s", reason)
                          : snprintf(text + used, capacity - used, "%s%s: %s",
                                     i ? "; " : "", item, reason);
        if (written < 0)
            break;
        used += (size_t)written;
    }
}

/* A requested device that does not exist: an error under LOCUS_STRICT=1,
 * a warning otherwise (ops then choose automatically); either way with
 * the reason, since "matches no device" alone leaves the user guessing
 * between a missing driver, a typo and a number past the last device. */
static locus_status check_requested_devices(locus_context *context)
{
    const locus__selector_list *list = &context->config.device;
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].is_auto ||
            locus__device_match(context, &list->items[i]))
            return LOCUS_SUCCESS;
    }
    const char *raw = context->config.settings[LOCUS__SET_DEVICE].raw;
    char why[1024];
    explain_no_match_list(context, why, sizeof why);
    if (context->config.strict)
        return locus__fail(LOCUS_ERROR_DEVICE_UNAVAILABLE,
                           "LOCUS_DEVICE='%s' matches no available device "
                           "(%s), and LOCUS_STRICT=1 forbids a fallback",
                           raw ? raw : "", why);
    locus__log(context, LOCUS_LOG_WARN,
               "LOCUS_DEVICE='%s' matches no available device (%s); ops "
               "will choose automatically",
               raw ? raw : "", why);
    return LOCUS_SUCCESS;
}

/* LOCUS_NUMA=node:N for a node the topology lacks would pass here and
 * fail every allocation later; refused now, naming the nodes there are. */
static locus_status check_numa_node(const locus_context *context)
{
    const locus__config *config = &context->config;
    if (config->numa.policy != LOCUS_PLACE_NODE ||
        locus__topology_node_position(&context->topology, config->numa.node) >=
            0)
        return LOCUS_SUCCESS;
    const locus__setting_text *setting = &config->settings[LOCUS__SET_NUMA];
    char nodes[256];
    node_list(&context->topology, nodes, sizeof nodes);
    return locus__fail(
        LOCUS_ERROR_UNUSABLE_ENVIRONMENT,
        "LOCUS_NUMA='%s' (%s) names NUMA node %d, but %s has "
        "node%s %s",
        setting->raw ? setting->raw : "", setting->source, config->numa.node,
        context->topology.is_this_system ? "this machine" : "the topology",
        context->topology.node_count == 1 ? "" : "s", nodes);
}

/* LOCUS_* names no part of Locus reads: a misspelled variable would
 * otherwise be ignored without a word. */
static locus_status check_variable_names(const locus_context *context)
{
    enum { SHOWN = 8 };
    locus_unknown_variable unknown[SHOWN];
    size_t count = 0;
    locus_status status = locus_unknown_variables(unknown, SHOWN, &count);
    if (status != LOCUS_SUCCESS || count == 0)
        return status;
    if (context->config.strict && count == 1)
        return locus__fail(
            LOCUS_ERROR_BAD_ENVIRONMENT,
            "LOCUS_STRICT=1 makes an unknown LOCUS_* name an "
            "error: %s is not a Locus variable%s%s%s",
            unknown[0].name, unknown[0].suggestion[0] ? "; did you mean " : "",
            unknown[0].suggestion, unknown[0].suggestion[0] ? "?" : "");
    if (context->config.strict) {
        char names[1024];
        size_t used = 0;
        for (size_t i = 0; i < count && i < SHOWN && used < sizeof names; i++) {
            int written = snprintf(
                names + used, sizeof names - used, "%s%s%s%s%s", i ? ", " : "",
                unknown[i].name,
                unknown[i].suggestion[0] ? " (did you mean " : "",
                unknown[i].suggestion, unknown[i].suggestion[0] ? "?)" : "");
            if (written < 0)
                break;
            used += (size_t)written;
        }
        return locus__fail(LOCUS_ERROR_BAD_ENVIRONMENT,
                           "LOCUS_STRICT=1 makes an unknown LOCUS_* name an "
                           "error, and %zu are set: %s%s",
                           count, names, count > SHOWN ? ", ..." : "");
    }
    for (size_t i = 0; i < count && i < SHOWN; i++) {
        if (unknown[i].suggestion[0])
            locus__log(context, LOCUS_LOG_WARN,
                       "%s is not a Locus variable; did you mean %s?",
                       unknown[i].name, unknown[i].suggestion);
        else
            locus__log(context, LOCUS_LOG_WARN,
                       "%s is not a Locus variable and is ignored "
                       "(docs/ENVIRONMENT.md lists them)",
                       unknown[i].name);
    }
    if (count > SHOWN)
        locus__log(context, LOCUS_LOG_WARN,
                   "and %zu more unknown LOCUS_* names", count - SHOWN);
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status
locus_context_create(const locus_context_options *options, locus_context **out)
{
    locus__clear_error();
    if (!out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (options &&
        options->struct_size < offsetof(locus_context_options, calibration))
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "options struct_size %zu: call "
                           "locus_context_options_init first",
                           options->struct_size);
    locus_context *context = locus__calloc(1, sizeof *context);
    if (!context)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "context");
    context->record_fd = -1;
    atomic_init(&context->live_buffers, 0);
    atomic_init(&context->live_queues, 0);
    pthread_mutex_init(&context->record_lock, NULL);
    pthread_mutex_init(&context->calibration_lock, NULL);
    pthread_mutex_init(&context->memo_lock, NULL);
    locus_status status = locus__config_load(&context->config, options);
    if (status != LOCUS_SUCCESS)
        goto free_context;
    if (!(options && options->ignore_environment))
        status = check_variable_names(context);
    if (status == LOCUS_SUCCESS)
        status = find_backends(context);
    if (status != LOCUS_SUCCESS)
        goto unload_modules;
    status = locus__topology_load(&context->topology, context->config.topology,
                                  context->config.topology_synthetic);
    if (status != LOCUS_SUCCESS)
        goto unload_modules;
    status = check_numa_node(context);
    if (status != LOCUS_SUCCESS)
        goto release_topology;
    if (!context->topology.is_this_system)
        locus__log(context, LOCUS_LOG_WARN,
                   "topology from %s: nothing is bound, and placement is "
                   "not verified",
                   context->topology.source);
    /* One of several MPI ranks on this machine gets its share of the cores
     * (local_rank.h, docs/MPI.md); any other process every allowed core. */
    status = locus__local_rank_pool_create(
        context, options && options->ignore_environment);
    if (status != LOCUS_SUCCESS)
        goto release_topology;
    if (context->config.record_path) {
        /* Never blocking (a FIFO would hang fopen), a regular file only. */
        const char *why = "";
        context->record_fd =
            locus__open_regular(context->config.record_path,
                                O_WRONLY | O_APPEND | O_CREAT, 0644, &why);
        if (context->record_fd < 0) {
            /* The path parses whatever it is: a FIFO or a device is a
             * value unusable here, anything else the system's refusal. */
            bool irregular = strcmp(why, "not a regular file") == 0;
            status = locus__fail(irregular ? LOCUS_ERROR_UNUSABLE_ENVIRONMENT
                                           : LOCUS_ERROR_SYSTEM,
                                 "LOCUS_RECORD='%s' cannot be opened for "
                                 "appending: %s",
                                 context->config.record_path, why);
            goto destroy_pool;
        }
    }
    locus__services_fill(&context->services);
    /* The scheduler's figures are measured by running ops, which sit
     * above it: the op layer's measurement is handed to it here. */
    locus__calibration_measure_with(locus__measure);
    status = start_backends(context);
    if (status == LOCUS_SUCCESS)
        status = locus__devices_collect(context);
    if (status == LOCUS_SUCCESS)
        status = check_requested_devices(context);
    if (status != LOCUS_SUCCESS)
        goto stop_backends;
    *out = context;
    return LOCUS_SUCCESS;

stop_backends:
    /* Before the pool and topology their fini may still use. */
    for (size_t i = 0; i < context->backend_count; i++)
        locus__plugin_unload(&context->backends[i]);
    if (context->record_fd >= 0)
        close(context->record_fd);
destroy_pool:
    locus__pool_destroy(context->pool);
release_topology:
    locus__topology_release(&context->topology);
unload_modules:
    /* Loaded but never started (those stopped above are left alone). */
    for (size_t i = 0; i < context->backend_count; i++)
        locus__plugin_unload(&context->backends[i]);
    locus__config_release(&context->config);
free_context:
    pthread_mutex_destroy(&context->record_lock);
    pthread_mutex_destroy(&context->calibration_lock);
    pthread_mutex_destroy(&context->memo_lock);
    free(context);
    return status;
}

/* "2 buffers and 1 queue" */
static void describe_alive(size_t buffers, size_t queues, char *text,
                           size_t capacity)
{
    int used = 0;
    if (buffers)
        used = snprintf(text, capacity, "%zu buffer%s", buffers,
                        buffers == 1 ? "" : "s");
    if (buffers && queues && used >= 0 && (size_t)used < capacity)
        used += snprintf(text + used, capacity - (size_t)used, " and ");
    if (queues && used >= 0 && (size_t)used < capacity)
        snprintf(text + used, capacity - (size_t)used, "%zu queue%s", queues,
                 queues == 1 ? "" : "s");
}

/* As libuv's uv_loop_close: a context whose buffers or queues are still
 * alive is left intact, since their destroy calls need its devices and
 * backends; the caller destroys them and calls again. */
LOCUS_API locus_status locus_context_destroy(locus_context *context)
{
    /* The detail is left alone on success, as by every destroy call:
     * callers read a failure's detail after cleaning up. */
    if (!context)
        return LOCUS_SUCCESS;
    size_t buffers = atomic_load(&context->live_buffers);
    size_t queues = atomic_load(&context->live_queues);
    if (buffers || queues) {
        char alive[96];
        describe_alive(buffers, queues, alive, sizeof alive);
        /* Logged too: callers from before 0.2 ignore the result. */
        locus__log(context, LOCUS_LOG_WARN,
                   "locus_context_destroy refused: %s still alive; destroy "
                   "%s first, then the context",
                   alive, buffers + queues == 1 ? "it" : "them");
        return locus__fail(LOCUS_ERROR_BUSY,
                           "%s still alive; destroy them before the context",
                           alive);
    }
    for (size_t i = 0; i < context->backend_count; i++)
        locus__plugin_unload(&context->backends[i]);
    if (context->record_fd >= 0)
        close(context->record_fd);
    locus__pool_destroy(context->pool);
    locus__topology_release(&context->topology);
    locus__config_release(&context->config);
    pthread_mutex_destroy(&context->record_lock);
    pthread_mutex_destroy(&context->calibration_lock);
    pthread_mutex_destroy(&context->memo_lock);
    free(context);
    return LOCUS_SUCCESS;
}
