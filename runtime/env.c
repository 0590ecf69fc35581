#include "env.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* environ */

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

static bool token_is(const char *text, size_t length, const char *word)
{
    return strlen(word) == length && strncmp(text, word, length) == 0;
}

static bool token_starts(const char *text, size_t length, const char *prefix)
{
    size_t n = strlen(prefix);
    return length >= n && strncmp(text, prefix, n) == 0;
}

static bool parse_selector_item(const char *text, size_t length,
                                locus__selector *out)
{
    *out = (locus__selector){LOCUS__SELECT_AUTO, -1, -1, -1};
    if (token_is(text, length, "auto"))
        return true;
    if (token_is(text, length, "cpu")) {
        out->kind = LOCUS__SELECT_CPU;
        return true;
    }
    if (token_starts(text, length, "cpu:numa=")) {
        out->kind = LOCUS__SELECT_CPU;
        return locus__parse_small_uint(text + 9, length - 9, &out->numa_node);
    }
    if (token_is(text, length, "cuda")) {
        out->kind = LOCUS__SELECT_CUDA;
        return true;
    }
    if (token_starts(text, length, "cuda:")) {
        out->kind = LOCUS__SELECT_CUDA;
        return locus__parse_small_uint(text + 5, length - 5, &out->index);
    }
    if (token_is(text, length, "opencl")) {
        out->kind = LOCUS__SELECT_OPENCL;
        return true;
    }
    if (token_starts(text, length, "opencl:")) {
        out->kind = LOCUS__SELECT_OPENCL;
        const char *rest = text + 7;
        size_t rest_length = length - 7;
        if (token_is(rest, rest_length, "gpu")) {
            out->want_kind = LOCUS_DEVICE_GPU;
            return true;
        }
        if (token_is(rest, rest_length, "cpu")) {
            out->want_kind = LOCUS_DEVICE_CPU;
            return true;
        }
        return locus__parse_small_uint(rest, rest_length, &out->index);
    }
    return false;
}

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
                "device selector '%s': '%.*s' is not one of auto, cpu, "
                "cpu:numa=N, cuda, cuda:N, opencl, opencl:gpu, opencl:cpu, "
                "opencl:N",
                text, (int)(stop - start), start);
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
    switch (selector->kind) {
    case LOCUS__SELECT_AUTO:
        snprintf(text, capacity, "auto");
        return;
    case LOCUS__SELECT_CPU:
        if (selector->numa_node >= 0)
            snprintf(text, capacity, "cpu:numa=%d", selector->numa_node);
        else
            snprintf(text, capacity, "cpu");
        return;
    case LOCUS__SELECT_CUDA:
        if (selector->index >= 0)
            snprintf(text, capacity, "cuda:%d", selector->index);
        else
            snprintf(text, capacity, "cuda");
        return;
    case LOCUS__SELECT_OPENCL:
        if (selector->want_kind == LOCUS_DEVICE_GPU)
            snprintf(text, capacity, "opencl:gpu");
        else if (selector->want_kind == LOCUS_DEVICE_CPU)
            snprintf(text, capacity, "opencl:cpu");
        else if (selector->index >= 0)
            snprintf(text, capacity, "opencl:%d", selector->index);
        else
            snprintf(text, capacity, "opencl");
        return;
    }
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

static bool parse_backends(const char *value, locus__config *config,
                           char *resolved, size_t capacity)
{
    unsigned mask = 0;
    const char *cursor = value;
    for (;;) {
        const char *comma = strchr(cursor, ',');
        size_t length = comma ? (size_t)(comma - cursor) : strlen(cursor);
        if (token_is(cursor, length, "cpu"))
            mask |= LOCUS__BACKEND_CPU;
        else if (token_is(cursor, length, "cuda"))
            mask |= LOCUS__BACKEND_CUDA;
        else if (token_is(cursor, length, "opencl"))
            mask |= LOCUS__BACKEND_OPENCL;
        else if (token_is(cursor, length, "all"))
            mask |= LOCUS__BACKEND_ALL;
        else
            return false;
        if (!comma)
            break;
        cursor = comma + 1;
    }
    config->backends = mask;
    snprintf(resolved, capacity, "%s%s%s",
             mask & LOCUS__BACKEND_CPU ? "cpu " : "",
             mask & LOCUS__BACKEND_CUDA ? "cuda " : "",
             mask & LOCUS__BACKEND_OPENCL ? "opencl" : "");
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
                           "auto, cpu, cpu:numa=N, cuda, cuda:N, opencl, "
                           "opencl:gpu, opencl:cpu, opencl:N, or a comma list",
                           "auto"},
    [LOCUS__SET_BACKENDS] = {parse_backends,
                             "a comma list of cpu, cuda, opencl, all",
                             "cpu cuda opencl"},
    [LOCUS__SET_THREADS] = {parse_threads, "a positive integer",
                            "one per allowed core"},
    [LOCUS__SET_NUMA] = {parse_numa, "local, interleave, node:N or off",
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
    config->device.items[0] = (locus__selector){LOCUS__SELECT_AUTO, -1, -1, -1};
    config->backends = LOCUS__BACKEND_ALL;
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

void locus__config_release(locus__config *config)
{
    free(config->record_path);
    free(config->topology);
    free(config->plugin_path);
    for (int id = 0; id < LOCUS__SETTING_COUNT; id++)
        free(config->settings[id].raw);
    memset(config, 0, sizeof *config);
}

/* The LOCUS_* names read by parts of Locus other than the settings above
 * (docs/ENVIRONMENT.md lists them all), so that none is reported unknown:
 * `LOCUS_WERROR=1 ./test.sh` must not make every test warn. */
static const char *const other_names[] = {
    "LOCUS_FAULT",               /* runtime/fault.c, fault-injection builds */
    "LOCUS_OPENCL_CACHE_DIR",    /* the OpenCL module */
    "LOCUS_OPENCL_CACHE_REPORT", /* the OpenCL module, a test hook */
    "LOCUS_OPENCL_EXTRA_SOURCE", /* the OpenCL module, a test hook */
    "LOCUS_OPENCL_TUNING",       /* the OpenCL module */
    "LOCUS_BENCH_CUDA_PATH",     /* locus bench */
    "LOCUS_WERROR",              /* test.sh */
    "LOCUS_CUDNN_ROOT",          /* the build, scripts/device */
    "LOCUS_MPI_BUILD",           /* scripts/device/h200-mpi.sh */
    "LOCUS_MPI_MESON_ARGS",      /* scripts/device/h200-mpi.sh */
    "LOCUS_VM_KERNEL",           /* the numa suite's virtual machine */
    "LOCUS_VM_QEMU",             /* the numa suite's virtual machine */
};
#define OTHER_NAME_COUNT (sizeof other_names / sizeof other_names[0])
#define KNOWN_NAME_COUNT (LOCUS__SETTING_COUNT + OTHER_NAME_COUNT)

/* Test harnesses (CI, the suites' meson lines, the fake modules) set
 * LOCUS_TEST_* freely; the library never reads them. */
#define RESERVED_TEST_PREFIX "LOCUS_TEST_"

static const char *known_name(size_t i)
{
    return i < LOCUS__SETTING_COUNT ? setting_names[i]
                                    : other_names[i - LOCUS__SETTING_COUNT];
}

/* The optimal string alignment distance (edits, and swaps of neighbours)
 * between two names, case folded: "LOCUS_DEIVCE" is one swap from
 * LOCUS_DEVICE, "locus_device" no edit. Names are at most 63 bytes. */
static size_t name_distance(const char *a, size_t a_length, const char *b,
                            size_t b_length)
{
    size_t rows[3][64];
    size_t *before = rows[0], *previous = rows[1], *current = rows[2];
    for (size_t j = 0; j <= b_length; j++)
        previous[j] = j;
    for (size_t i = 1; i <= a_length; i++) {
        current[0] = i;
        for (size_t j = 1; j <= b_length; j++) {
            int ca = toupper((unsigned char)a[i - 1]);
            int cb = toupper((unsigned char)b[j - 1]);
            size_t best = previous[j - 1] + (ca != cb);
            if (previous[j] + 1 < best)
                best = previous[j] + 1;
            if (current[j - 1] + 1 < best)
                best = current[j - 1] + 1;
            if (i > 1 && j > 1 && ca == toupper((unsigned char)b[j - 2]) &&
                toupper((unsigned char)a[i - 2]) == cb &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            current[j] = best;
        }
        size_t *spare = before;
        before = previous;
        previous = current;
        current = spare;
    }
    return previous[b_length];
}

/* The known name nearest to `name` (after the LOCUS_ both share), or NULL
 * when even the nearest is too far to be a misspelling of it: one edit for
 * a short name such as LOG, two up to eight letters, three beyond. */
static const char *nearest_known_name(const char *name, size_t length)
{
    const char *best = NULL;
    size_t best_distance = (size_t)-1;
    for (size_t i = 0; i < KNOWN_NAME_COUNT; i++) {
        const char *known = known_name(i) + 6;
        size_t known_length = strlen(known);
        size_t limit = known_length <= 4 ? 1 : known_length <= 8 ? 2 : 3;
        size_t distance =
            name_distance(name + 6, length - 6, known, known_length);
        if (distance <= limit && distance < best_distance) {
            best = known_name(i);
            best_distance = distance;
        }
    }
    return best;
}

static bool is_known_name(const char *name, size_t length)
{
    for (size_t i = 0; i < KNOWN_NAME_COUNT; i++)
        if (token_is(name, length, known_name(i)))
            return true;
    return token_starts(name, length, RESERVED_TEST_PREFIX);
}

LOCUS_API locus_status locus_unknown_variables(locus_unknown_variable *out,
                                               size_t capacity, size_t *count)
{
    locus__clear_error();
    if (!count || (!out && capacity))
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           count ? "out" : "count");
    *count = 0;
    for (char **entry = environ; entry && *entry; entry++) {
        const char *equals = strchr(*entry, '=');
        if (!equals || strncmp(*entry, "LOCUS_", 6) != 0)
            continue;
        size_t length = (size_t)(equals - *entry);
        if (is_known_name(*entry, length))
            continue;
        if (*count < capacity) {
            locus_unknown_variable *item = &out[*count];
            size_t kept =
                length < sizeof item->name ? length : sizeof item->name - 1;
            memcpy(item->name, *entry, kept);
            item->name[kept] = '\0';
            const char *suggestion = nearest_known_name(item->name, kept);
            snprintf(item->suggestion, sizeof item->suggestion, "%s",
                     suggestion ? suggestion : "");
        }
        (*count)++;
    }
    return LOCUS_SUCCESS;
}
