/* The LOCUS_* variables: parsing, the device-selector grammar, and the
 * resolved configuration of a context. */
#ifndef LOCUS_RUNTIME_ENV_H
#define LOCUS_RUNTIME_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <locus/locus.h>

/* Backend names as the settings hold them (with the NUL; the length of
 * locus_backend_info.name), and how many backends a context knows. */
#define LOCUS__BACKEND_NAME_MAX 16
#define LOCUS__MAX_BACKENDS 16
/* One selector item, with the NUL: locus_device_info.selector's length. */
#define LOCUS__SELECTOR_MAX 32

/* One item of a selector, "auto" or name[:rest]: "cpu", "cpu:numa=1",
 * "cuda:1", "opencl:gpu". The grammar is the same for every backend: rest
 * is a device number, a device kind (cpu, gpu, accelerator) or key=value,
 * the backend's own part, which only the backend reads. Whether the name
 * is a backend's, and whether the backend takes that part, is checked
 * once the backends are known (context.c). */
typedef struct locus__selector {
    bool is_auto;
    char backend[LOCUS__BACKEND_NAME_MAX]; /* "" for auto */
    int index;                             /* -1: any; else a device number */
    int want_kind;                  /* -1: any; else a locus_device_kind */
    char part[LOCUS__SELECTOR_MAX]; /* the backend's own part; "" none */
} locus__selector;

#define LOCUS__MAX_SELECTORS 16

typedef struct locus__selector_list {
    size_t count;
    locus__selector items[LOCUS__MAX_SELECTORS];
} locus__selector_list;

/* Parses a comma list of selectors; fails with LOCUS_ERROR_INVALID_ARGUMENT
 * and a message quoting the text (the caller decides whether that is an
 * environment error). */
locus_status locus__parse_selector_list(const char *text,
                                        locus__selector_list *out);
/* Writes one selector back in canonical spelling. */
void locus__format_selector(const locus__selector *selector, char *text,
                            size_t capacity);

/* Whether [text, text + length) can name a backend: 1 to 15 lowercase
 * letters, digits or '_', a letter first, and neither "auto" nor "all",
 * which the settings use as words of their own. */
bool locus__backend_name_ok(const char *text, size_t length);

/* LOCUS_BACKENDS: the names asked for, or all of them. */
typedef struct locus__backend_list {
    bool all;
    size_t count;
    char names[LOCUS__MAX_BACKENDS][LOCUS__BACKEND_NAME_MAX];
} locus__backend_list;

/* Whether the list asks for the backend of that name. */
bool locus__backend_list_has(const locus__backend_list *list, const char *name);

typedef enum locus__isa {
    LOCUS__ISA_NOT_FORCED = 0,
    LOCUS__ISA_GENERIC,
    LOCUS__ISA_AVX2,
    LOCUS__ISA_AVX512,
} locus__isa;

const char *locus__isa_name(locus__isa isa);

/* Whether [text, text + length) is exactly word, or starts with prefix. */
static inline bool locus__token_is(const char *text, size_t length,
                                   const char *word)
{
    return strlen(word) == length && strncmp(text, word, length) == 0;
}

static inline bool locus__token_starts(const char *text, size_t length,
                                       const char *prefix)
{
    size_t n = strlen(prefix);
    return length >= n && strncmp(text, prefix, n) == 0;
}

/* A non-negative decimal integer of at most 9 digits, filling all of
 * [text, text + length), nothing else (no sign, no space). */
bool locus__parse_small_uint(const char *text, size_t length, int *value);

/* The order of the settings reported by locus_setting_get. */
typedef enum locus__setting_id {
    LOCUS__SET_DEVICE,
    LOCUS__SET_BACKENDS,
    LOCUS__SET_THREADS,
    LOCUS__SET_NUMA,
    LOCUS__SET_STRICT,
    LOCUS__SET_LOG,
    LOCUS__SET_RECORD,
    LOCUS__SET_TOPOLOGY,
    LOCUS__SET_PLUGIN_PATH,
    LOCUS__SET_CPU_ISA,
    LOCUS__SET_CALIBRATION,
    LOCUS__SETTING_COUNT
} locus__setting_id;

typedef struct locus__setting_text {
    char *raw; /* NULL when unset */
    const char *source;
    char resolved[256];
} locus__setting_text;

/* LOCUS_CALIBRATION: where the cost model's figures come from. */
typedef enum locus__calibration_mode {
    LOCUS__CALIBRATION_AUTO = 0,  /* the cache, else nominal or a probe */
    LOCUS__CALIBRATION_NOMINAL,   /* built-in figures, nothing measured */
    LOCUS__CALIBRATION_REMEASURE, /* measured at first use, cache rewritten */
} locus__calibration_mode;

typedef struct locus__config {
    locus__selector_list device;
    locus__backend_list backends;
    int threads;          /* 0: one per allowed core */
    locus_placement numa; /* default host placement */
    bool strict;
    locus_log_level log_level;
    char *record_path;       /* NULL: no record file */
    char *topology;          /* NULL: this machine */
    bool topology_synthetic; /* topology holds a synthetic description */
    char *plugin_path;       /* NULL: only the install dir */
    locus__isa cpu_isa;
    locus__calibration_mode calibration;
    bool out_of_memory; /* a value could not be copied while loading */
    locus__setting_text settings[LOCUS__SETTING_COUNT];
} locus__config;

/* Reads options (may be NULL) and, unless they say not to, the environment.
 * Any value that does not parse fails with LOCUS_ERROR_BAD_ENVIRONMENT and a
 * message that names the variable and quotes the value. */
locus_status locus__config_load(locus__config *config,
                                const locus_context_options *options);
void locus__config_release(locus__config *config);
const char *locus__setting_name(locus__setting_id id);

/* Refuses a setting that parsed but names what is not there (a backend
 * no module provides, a part its backend does not take), as a value that
 * does not parse is refused: LOCUS_ERROR_BAD_ENVIRONMENT, "NAME='value'
 * (source) is not GRAMMAR: " and the detail. */
locus_status locus__setting_refuse(const locus__config *config,
                                   locus__setting_id id, const char *format,
                                   ...) __attribute__((format(printf, 3, 4)));

#endif
