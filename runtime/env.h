/* The LOCUS_* variables: parsing, the device-selector grammar, and the
 * resolved configuration of a context. */
#ifndef LOCUS_RUNTIME_ENV_H
#define LOCUS_RUNTIME_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include <locus/locus.h>

typedef enum locus__selector_kind {
    LOCUS__SELECT_AUTO,
    LOCUS__SELECT_CPU,
    LOCUS__SELECT_CUDA,
    LOCUS__SELECT_OPENCL,
} locus__selector_kind;

/* One item of a selector: "cpu", "cpu:numa=1", "cuda:1", "opencl:gpu"... */
typedef struct locus__selector {
    locus__selector_kind kind;
    int index;     /* -1: any; else the backend's device number */
    int numa_node; /* -1: any; else the OS node (cpu only) */
    int want_kind; /* -1: any; else a locus_device_kind (opencl only) */
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

enum {
    LOCUS__BACKEND_CPU = 1u << 0,
    LOCUS__BACKEND_CUDA = 1u << 1,
    LOCUS__BACKEND_OPENCL = 1u << 2,
    LOCUS__BACKEND_ALL = 7u,
};

typedef enum locus__isa {
    LOCUS__ISA_NOT_FORCED = 0,
    LOCUS__ISA_GENERIC,
    LOCUS__ISA_AVX2,
    LOCUS__ISA_AVX512,
} locus__isa;

const char *locus__isa_name(locus__isa isa);

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
    unsigned backends;    /* LOCUS__BACKEND_* bits */
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

#endif
