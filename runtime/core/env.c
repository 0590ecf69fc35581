#include "env.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "status.h"

static const char *const setting_names[LOCUS__SETTING_COUNT] = {
    [LOCUS__SET_DEVICE] = "LOCUS_DEVICE",
    [LOCUS__SET_BACKENDS] = "LOCUS_BACKENDS",
    [LOCUS__SET_THREADS] = "LOCUS_THREADS",
    [LOCUS__SET_NUMA] = "LOCUS_NUMA",
    [LOCUS__SET_STRICT] = "LOCUS_STRICT",
    [LOCUS__SET_LOG] = "LOCUS_LOG",
    [LOCUS__SET_RECORD] = "LOCUS_RECORD",
    [LOCUS__SET_TOPOLOGY] = "LOCUS_TOPOLOGY",
    [LOCUS__SET_PLUGIN_PATH] = "LOCUS_PLUGIN_PATH",
    [LOCUS__SET_CPU_ISA] = "LOCUS_CPU_ISA",
    [LOCUS__SET_CALIBRATION] = "LOCUS_CALIBRATION",
};

const char *locus__setting_name(locus__setting_id id)
{
    return id < LOCUS__SETTING_COUNT ? setting_names[id] : "?";
}

const char *locus__isa_name(locus__isa isa)
{
    switch (isa) {
    case LOCUS__ISA_GENERIC:
        return "generic";
    case LOCUS__ISA_AVX2:
        return "avx2";
    case LOCUS__ISA_AVX512:
        return "avx512";
    case LOCUS__ISA_NOT_FORCED:
        break;
    }
    return "auto";
}

bool locus__parse_small_uint(const char *text, size_t length, int *value)
{
    if (length == 0 || length > 9)
        return false;
    int result = 0;
    for (size_t i = 0; i < length; i++) {
        if (!isdigit((unsigned char)text[i]))
            return false;
        result = result * 10 + (text[i] - '0');
    }
    *value = result;
    return true;
}

bool locus__backend_name_ok(const char *text, size_t length)
{
    if (length == 0 || length >= LOCUS__BACKEND_NAME_MAX ||
        !islower((unsigned char)text[0]) ||
        locus__token_is(text, length, "auto") ||
        locus__token_is(text, length, "all"))
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!islower(c) && !isdigit(c) && c != '_')
            return false;
    }
    return true;
}

bool locus__backend_list_has(const locus__backend_list *list, const char *name)
{
    if (list->all)
        return true;
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->names[i], name) == 0)
            return true;
    return false;
}

/* A device kind by its locus_device_kind_str name, or -1. */
static int device_kind_named(const char *text, size_t length)
{
    static const locus_device_kind kinds[] = {
        LOCUS_DEVICE_CPU, LOCUS_DEVICE_GPU, LOCUS_DEVICE_ACCELERATOR};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (locus__token_is(text, length, locus_device_kind_str(kinds[i])))
            return (int)kinds[i];
    return -1;
}

/* key=value, the backend's own part: a lowercase key, and a value of
 * letters, digits and "_.+-" (a sign the backend may refuse, but no
 * separator of the grammar and no control byte). */
static bool is_own_part(const char *text, size_t length)
{
    const char *equals = memchr(text, '=', length);
    if (!equals || equals == text || equals == text + length - 1 ||
        !islower((unsigned char)text[0]))
        return false;
    for (const char *c = text; c < equals; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) &&
            *c != '_')
            return false;
    for (const char *c = equals + 1; c < text + length; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_.+-", *c))
            return false;
    return true;
}

static bool parse_selector_item(const char *text, size_t length,
                                locus__selector *out)
{
    /* Zeroed whole: items are compared as bytes (the fuzz target's round
     * trip). */
    memset(out, 0, sizeof *out);
    out->index = -1;
    out->want_kind = -1;
    if (locus__token_is(text, length, "auto")) {
        out->is_auto = true;
        return true;
    }
    if (length >= LOCUS__SELECTOR_MAX)
        return false;
    const char *colon = memchr(text, ':', length);
    size_t name_length = colon ? (size_t)(colon - text) : length;
    if (!locus__backend_name_ok(text, name_length))
        return false;
    memcpy(out->backend, text, name_length);
    if (!colon)
        return true;
    const char *rest = colon + 1;
    size_t rest_length = length - name_length - 1;
    if (locus__parse_small_uint(rest, rest_length, &out->index))
        return true;
    out->index = -1;
    out->want_kind = device_kind_named(rest, rest_length);
    if (out->want_kind >= 0)
        return true;
    if (!is_own_part(rest, rest_length))
        return false;
    memcpy(out->part, rest, rest_length);
    return true;
}

/* What a selector may be, for the messages (once, here). */
#define SELECTOR_GRAMMAR "auto or BACKEND[:N|:cpu|:gpu|:accelerator|:KEY=VALUE]"

locus_status locus__parse_selector_list(const char *text,
                                        locus__selector_list *out)
{
    if (!text)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "selector is NULL");
    out->count = 0;
    const char *cursor = text;
    for (;;) {
        const char *comma = strchr(cursor, ',');
        const char *end = comma ? comma : cursor + strlen(cursor);
        const char *start = cursor;
        while (start < end && isspace((unsigned char)*start))
            start++;
        const char *stop = end;
        while (stop > start && isspace((unsigned char)stop[-1]))
            stop--;
        if (start == stop)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "empty item in device selector '%s'", text);
        if (out->count == LOCUS__MAX_SELECTORS)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "device selector '%s' has more than %d items",
                               text, LOCUS__MAX_SELECTORS);
        locus__selector *item = &out->items[out->count];
        if (!parse_selector_item(start, (size_t)(stop - start), item))
            return locus__fail(
                LOCUS_ERROR_INVALID_ARGUMENT,
                "device selector '%s': '%.*s' is not " SELECTOR_GRAMMAR
                " (at most %d characters)",
                text, (int)(stop - start), start, LOCUS__SELECTOR_MAX - 1);
        out->count++;
        if (!comma)
            break;
        cursor = comma + 1;
    }
    return LOCUS_SUCCESS;
}

void locus__format_selector(const locus__selector *selector, char *text,
                            size_t capacity)
{
    if (selector->is_auto)
        snprintf(text, capacity, "auto");
    else if (selector->index >= 0)
        snprintf(text, capacity, "%s:%d", selector->backend, selector->index);
    else if (selector->want_kind >= 0)
        snprintf(text, capacity, "%s:%s", selector->backend,
                 locus_device_kind_str((locus_device_kind)selector->want_kind));
    else if (selector->part[0])
        snprintf(text, capacity, "%s:%s", selector->backend, selector->part);
    else
        snprintf(text, capacity, "%s", selector->backend);
}

/* Each parser reads a non-empty value, fills config and writes what it
 * resolved to; false means the value does not parse. */
typedef bool (*setting_parser)(const char *value, locus__config *config,
                               char *resolved, size_t capacity);

static bool parse_device(const char *value, locus__config *config,
                         char *resolved, size_t capacity)
{
    if (locus__parse_selector_list(value, &config->device) != LOCUS_SUCCESS)
        return false;
    size_t used = 0;
    resolved[0] = '\0';
    for (size_t i = 0; i < config->device.count && used < capacity; i++) {
        char item[32];
        locus__format_selector(&config->device.items[i], item, sizeof item);
        int n = snprintf(resolved + used, capacity - used, "%s%s", i ? "," : "",
                         item);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return true;
}

/* Names only: which of them a module provides is known once the modules
 * are found (context.c checks them then). */
static bool parse_backends(const char *value, locus__config *config,
                           char *resolved, size_t capacity)
{
    locus__backend_list *list = &config->backends;
    memset(list, 0, sizeof *list);
    const char *cursor = value;
    for (;;) {
        const char *comma = strchr(cursor, ',');
        size_t length = comma ? (size_t)(comma - cursor) : strlen(cursor);
        if (locus__token_is(cursor, length, "all")) {
            list->all = true;
        } else if (!locus__backend_name_ok(cursor, length)) {
            return false;
        } else {
            char name[LOCUS__BACKEND_NAME_MAX];
            memcpy(name, cursor, length);
            name[length] = '\0';
            if (!locus__backend_list_has(list, name)) {
                if (list->count == LOCUS__MAX_BACKENDS)
                    return false;
                memcpy(list->names[list->count++], name, length + 1);
            }
        }
        if (!comma)
            break;
        cursor = comma + 1;
    }
    size_t used = 0;
    resolved[0] = '\0';
    if (list->all)
        snprintf(resolved, capacity, "all");
    for (size_t i = 0; !list->all && i < list->count && used < capacity; i++) {
        int n = snprintf(resolved + used, capacity - used, "%s%s", i ? " " : "",
                         list->names[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return true;
}

static bool parse_threads(const char *value, locus__config *config,
                          char *resolved, size_t capacity)
{
    int threads;
    if (!locus__parse_small_uint(value, strlen(value), &threads) || threads < 1)
        return false;
    config->threads = threads;
    snprintf(resolved, capacity, "%d", threads);
    return true;
}

/* The placement descriptor LOCUS_NUMA is read into, and a client's: its
 * defaults are a setting's, so they live with the settings; carrying a
 * placement out is memory/placement.c's. */
void locus_placement_init(locus_placement *placement)
{
    if (!placement)
        return;
    memset(placement, 0, sizeof *placement);
    placement->struct_size = sizeof *placement;
    placement->policy = LOCUS_PLACE_DEFAULT;
    placement->node = -1;
}

static bool parse_numa(const char *value, locus__config *config, char *resolved,
                       size_t capacity)
{
    locus_placement_init(&config->numa);
    if (strcmp(value, "local") == 0) {
        config->numa.policy = LOCUS_PLACE_LOCAL;
    } else if (strcmp(value, "interleave") == 0) {
        config->numa.policy = LOCUS_PLACE_INTERLEAVE;
    } else if (strcmp(value, "off") == 0) {
        config->numa.policy = LOCUS_PLACE_OFF;
    } else if (strcmp(value, "next-touch") == 0) {
        config->numa.policy = LOCUS_PLACE_NEXT_TOUCH;
    } else if (strncmp(value, "node:", 5) == 0 &&
               locus__parse_small_uint(value + 5, strlen(value + 5),
                                       &config->numa.node)) {
        config->numa.policy = LOCUS_PLACE_NODE;
    } else {
        return false;
    }
    snprintf(resolved, capacity, "%s", value);
    return true;
}

static bool parse_strict(const char *value, locus__config *config,
                         char *resolved, size_t capacity)
{
    if (strcmp(value, "1") == 0)
        config->strict = true;
    else if (strcmp(value, "0") == 0)
        config->strict = false;
    else
        return false;
    snprintf(resolved, capacity, "%s", config->strict ? "1" : "0");
    return true;
}

static bool parse_log(const char *value, locus__config *config, char *resolved,
                      size_t capacity)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    for (int level = 0; level < 4; level++) {
        if (strcmp(value, levels[level]) == 0) {
            config->log_level = (locus_log_level)level;
            snprintf(resolved, capacity, "%s", levels[level]);
            return true;
        }
    }
    return false;
}

/* A failed copy is out of memory, not a value that does not parse: the
 * flag lets locus__config_load tell the two apart. */
static bool copy_string(const char *value, char **field, locus__config *config)
{
    free(*field);
    *field = locus__strdup(value);
    config->out_of_memory |= *field == NULL;
    return *field != NULL;
}

static bool parse_record(const char *value, locus__config *config,
                         char *resolved, size_t capacity)
{
    snprintf(resolved, capacity, "append JSON lines to %s", value);
    return copy_string(value, &config->record_path, config);
}

static bool parse_topology(const char *value, locus__config *config,
                           char *resolved, size_t capacity)
{
    if (strncmp(value, "synthetic:", 10) == 0) {
        if (value[10] == '\0')
            return false;
        config->topology_synthetic = true;
        snprintf(resolved, capacity, "synthetic %s", value + 10);
        return copy_string(value + 10, &config->topology, config);
    }
    config->topology_synthetic = false;
    snprintf(resolved, capacity, "hwloc XML %s", value);
    return copy_string(value, &config->topology, config);
}

static bool parse_plugin_path(const char *value, locus__config *config,
                              char *resolved, size_t capacity)
{
    snprintf(resolved, capacity, "%s, then %s", value, LOCUS_PLUGIN_DIR);
    return copy_string(value, &config->plugin_path, config);
}

static bool parse_cpu_isa(const char *value, locus__config *config,
                          char *resolved, size_t capacity)
{
    if (strcmp(value, "generic") == 0)
        config->cpu_isa = LOCUS__ISA_GENERIC;
    else if (strcmp(value, "avx2") == 0)
        config->cpu_isa = LOCUS__ISA_AVX2;
    else if (strcmp(value, "avx512") == 0)
        config->cpu_isa = LOCUS__ISA_AVX512;
    else
        return false;
    snprintf(resolved, capacity, "%s (forced)", value);
    return true;
}

static bool parse_calibration(const char *value, locus__config *config,
                              char *resolved, size_t capacity)
{
    if (strcmp(value, "auto") == 0)
        config->calibration = LOCUS__CALIBRATION_AUTO;
    else if (strcmp(value, "nominal") == 0)
        config->calibration = LOCUS__CALIBRATION_NOMINAL;
    else if (strcmp(value, "remeasure") == 0)
        config->calibration = LOCUS__CALIBRATION_REMEASURE;
    else
        return false;
    snprintf(resolved, capacity, "%s", value);
    return true;
}

static const struct {
    setting_parser parse;
    const char *grammar;
    const char *default_resolved;
} setting_rules[LOCUS__SETTING_COUNT] = {
    [LOCUS__SET_DEVICE] = {parse_device,
                           SELECTOR_GRAMMAR ", or a comma list of them",
                           "auto"},
    [LOCUS__SET_BACKENDS] = {parse_backends,
                             "a comma list of backend names, or all", "all"},
    [LOCUS__SET_THREADS] = {parse_threads, "a positive integer",
                            "one per allowed core"},
    [LOCUS__SET_NUMA] = {parse_numa,
                         "local, interleave, node:N, next-touch or off",
                         "local"},
    [LOCUS__SET_STRICT] = {parse_strict, "0 or 1", "0"},
    [LOCUS__SET_LOG] = {parse_log, "error, warn, info or debug", "warn"},
    [LOCUS__SET_RECORD] = {parse_record, "a file path", "no record file"},
    [LOCUS__SET_TOPOLOGY] = {parse_topology,
                             "an hwloc XML file or synthetic:<description>",
                             "this machine"},
    [LOCUS__SET_PLUGIN_PATH] = {parse_plugin_path, "a list of directories",
                                LOCUS_PLUGIN_DIR},
    [LOCUS__SET_CPU_ISA] = {parse_cpu_isa, "generic, avx2 or avx512",
                            "best this cpu supports"},
    [LOCUS__SET_CALIBRATION] = {parse_calibration, "auto, nominal or remeasure",
                                "auto (cached, else measured at first use)"},
};

static const char *option_value(const locus_context_options *options,
                                locus__setting_id id)
{
    if (!options)
        return NULL;
    switch (id) {
    case LOCUS__SET_DEVICE:
        return options->device;
    case LOCUS__SET_BACKENDS:
        return options->backends;
    case LOCUS__SET_THREADS:
        return options->threads;
    case LOCUS__SET_NUMA:
        return options->numa;
    case LOCUS__SET_STRICT:
        return options->strict;
    case LOCUS__SET_LOG:
        return options->log;
    case LOCUS__SET_RECORD:
        return options->record;
    case LOCUS__SET_TOPOLOGY:
        return options->topology;
    case LOCUS__SET_PLUGIN_PATH:
        return options->plugin_path;
    case LOCUS__SET_CPU_ISA:
        return options->cpu_isa;
    case LOCUS__SET_CALIBRATION:
        return options->struct_size >
                       offsetof(locus_context_options, calibration)
                   ? options->calibration
                   : NULL;
    case LOCUS__SETTING_COUNT:
        break;
    }
    return NULL;
}

static void config_defaults(locus__config *config)
{
    memset(config, 0, sizeof *config);
    config->device.count = 1;
    config->device.items[0] =
        (locus__selector){.is_auto = true, .index = -1, .want_kind = -1};
    config->backends.all = true;
    locus_placement_init(&config->numa);
    config->numa.policy = LOCUS_PLACE_LOCAL;
    config->log_level = LOCUS_LOG_WARN;
}

locus_status locus__config_load(locus__config *config,
                                const locus_context_options *options)
{
    config_defaults(config);
    bool use_environment = !(options && options->ignore_environment);
    for (int id = 0; id < LOCUS__SETTING_COUNT; id++) {
        locus__setting_text *setting = &config->settings[id];
        const char *value = option_value(options, (locus__setting_id)id);
        setting->source = "option";
        if (!value && use_environment) {
            value = getenv(setting_names[id]);
            setting->source = "environment";
        }
        /* An empty variable reads as unset, as `VAR= cmd` is the shell's way
         * of clearing one for a single command. */
        if (!value || value[0] == '\0') {
            setting->source = "default";
            snprintf(setting->resolved, sizeof setting->resolved, "%s",
                     setting_rules[id].default_resolved);
            continue;
        }
        setting->raw = locus__strdup(value);
        if (!setting->raw) {
            locus__config_release(config);
            return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "copying %s",
                               setting_names[id]);
        }
        if (!setting_rules[id].parse(value, config, setting->resolved,
                                     sizeof setting->resolved)) {
            if (config->out_of_memory) {
                locus__config_release(config);
                return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "copying %s",
                                   setting_names[id]);
            }
            locus_status status =
                locus__fail(LOCUS_ERROR_BAD_ENVIRONMENT,
                            "%s='%s' (%s) is not %s", setting_names[id], value,
                            setting->source, setting_rules[id].grammar);
            locus__config_release(config);
            return status;
        }
    }
    return LOCUS_SUCCESS;
}

locus_status locus__setting_refuse(const locus__config *config,
                                   locus__setting_id id, const char *format,
                                   ...)
{
    char detail[768];
    va_list args;
    va_start(args, format);
    vsnprintf(detail, sizeof detail, format, args);
    va_end(args);
    const locus__setting_text *setting = &config->settings[id];
    return locus__fail(LOCUS_ERROR_BAD_ENVIRONMENT,
                       "%s='%s' (%s) is not %s: %s", setting_names[id],
                       setting->raw ? setting->raw : "", setting->source,
                       setting_rules[id].grammar, detail);
}

void locus__config_release(locus__config *config)
{
    free(config->record_path);
    free(config->topology);
    free(config->plugin_path);
    for (int id = 0; id < LOCUS__SETTING_COUNT; id++)
        free(config->settings[id].raw);
    memset(config, 0, sizeof *config);
}
