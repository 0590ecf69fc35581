/*
 * Locus: a NUMA-aware heterogeneous compute runtime.
 *
 * One header an application includes. Conventions:
 *  - every action returns a locus_status (0 success, negative errors); the
 *    detail of the last failure on this thread is in locus_last_error();
 *  - results come back through out-parameters;
 *  - every _create has a _destroy, and _destroy(NULL) does nothing;
 *  - option and descriptor structs carry struct_size and have an _init()
 *    function, so they can grow without breaking the ABI: always call the
 *    _init() function before filling one in.
 *
 * Matrices are row-major. Element counts, shapes and offsets are size_t.
 */
#ifndef LOCUS_LOCUS_H
#define LOCUS_LOCUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOCUS_BUILDING_LIBRARY) && defined(__GNUC__)
#define LOCUS_API __attribute__((visibility("default")))
#else
#define LOCUS_API
#endif

/* The version of this header, which is the project's version: meson
 * refuses to configure when they differ, and docs/CHANGELOG.md says what
 * each version added. A field or function noted "appended in 0.N" or "new
 * in 0.N" below exists from that version on; the rest are 0.1's. */
#define LOCUS_VERSION_MAJOR 0
#define LOCUS_VERSION_MINOR 3
#define LOCUS_VERSION_PATCH 0
/* One comparable number: 10000 * major + 100 * minor + patch (0.2.0 is
 * 200). */
#define LOCUS_VERSION                                                          \
    (LOCUS_VERSION_MAJOR * 10000 + LOCUS_VERSION_MINOR * 100 +                 \
     LOCUS_VERSION_PATCH)
/* For code that must also build against older headers:
 * #if LOCUS_VERSION_AT_LEAST(0, 2, 0) ... info.pci_bus_id ... #endif */
#define LOCUS_VERSION_AT_LEAST(major, minor, patch)                            \
    (LOCUS_VERSION >= (major)*10000 + (minor)*100 + (patch))

/* The version of the library actually loaded (LOCUS_VERSION's encoding).
 * It may differ from the header's: liblocus.so.0 is every 0.x. A program
 * that may meet a library older than its header reads a field appended in
 * 0.N only when locus_version() >= that version (an older library neither
 * fills nor clears it). */
LOCUS_API int locus_version(void);
/* The same as "major.minor.patch". */
LOCUS_API const char *locus_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/* X(name, value, message): the one list that status codes, their names and
 * their messages are generated from. Codes are appended, never renumbered.
 * The environment's three kinds of failure (docs/ENVIRONMENT.md):
 * LOCUS_ERROR_BAD_ENVIRONMENT, a value that does not parse (or, under
 * LOCUS_STRICT=1, a LOCUS_* name that is no Locus variable);
 * LOCUS_ERROR_UNUSABLE_ENVIRONMENT (new in 0.2), a value that parses
 * but this machine cannot honour (more threads than cpus, a NUMA node it
 * lacks, an instruction set its cpu lacks, a record path that is no regular
 * file); LOCUS_ERROR_SYSTEM, a file named by a variable that the system
 * would not open, with strerror's text. */
#define LOCUS_STATUS_LIST(X)                                                   \
    X(LOCUS_SUCCESS, 0, "success")                                             \
    X(LOCUS_ERROR_NULL_ARGUMENT, -1, "a required argument is NULL")            \
    X(LOCUS_ERROR_INVALID_ARGUMENT, -2, "invalid argument")                    \
    X(LOCUS_ERROR_SIZE_OVERFLOW, -3, "size overflows")                         \
    X(LOCUS_ERROR_BUFFER_TOO_SMALL, -4, "buffer too small for the shape")      \
    X(LOCUS_ERROR_OUT_OF_MEMORY, -5, "out of host memory")                     \
    X(LOCUS_ERROR_DEVICE_OUT_OF_MEMORY, -6, "out of device memory")            \
    X(LOCUS_ERROR_DEVICE_NOT_FOUND, -7, "no such device")                      \
    X(LOCUS_ERROR_NOT_SUPPORTED, -8, "operation not supported on the device")  \
    X(LOCUS_ERROR_BAD_ENVIRONMENT, -9, "environment setting not understood")   \
    X(LOCUS_ERROR_PLACEMENT, -10, "memory placement failed")                   \
    X(LOCUS_ERROR_TOPOLOGY, -11, "topology could not be loaded")               \
    X(LOCUS_ERROR_PLUGIN, -12, "backend module could not be loaded")           \
    X(LOCUS_ERROR_BACKEND, -13, "backend failure")                             \
    X(LOCUS_ERROR_BUSY, -14, "resource busy")                                  \
    X(LOCUS_ERROR_SYSTEM, -15, "system call failed")                           \
    X(LOCUS_ERROR_DEVICE_UNAVAILABLE, -16, "requested device unavailable")     \
    X(LOCUS_ERROR_UNUSABLE_ENVIRONMENT, -17,                                   \
      "environment value not usable on this machine")

typedef enum locus_status {
#define LOCUS_STATUS_ENUM_(name, value, message) name = value,
    LOCUS_STATUS_LIST(LOCUS_STATUS_ENUM_)
#undef LOCUS_STATUS_ENUM_
} locus_status;

/* The fixed message of a status ("unknown status" for other values). */
LOCUS_API const char *locus_status_str(locus_status status);
/* The enumerator's name, e.g. "LOCUS_ERROR_SIZE_OVERFLOW". */
LOCUS_API const char *locus_status_name(locus_status status);
/* The detail of the last failure on the calling thread: the status message
 * plus the offending value or the backend's own message. Valid until the
 * thread's next Locus call; "" when the last call succeeded. */
LOCUS_API const char *locus_last_error(void);

/* What this library was built with, for `locus --version` and bug
 * reports. New in 0.2. */
typedef struct locus_build_info {
    size_t struct_size;
    char hwloc_built[32]; /* the hwloc release compiled against */
    /* hwloc_get_api_version() of the hwloc loaded: 0x20800 is API 2.8,
     * which hwloc releases share until their API changes. */
    unsigned hwloc_api_loaded;
    /* The CPU kernel tables compiled in, lowest first ("generic avx2
     * avx512" on x86-64, "generic" elsewhere), and the best of them this
     * cpu can run (LOCUS_CPU_ISA may force a lower one per context). */
    char cpu_isa_tables[64];
    char cpu_isa_best[16];
} locus_build_info;

LOCUS_API void locus_build_info_init(locus_build_info *info);
/* Needs no context. Fails with LOCUS_ERROR_INVALID_ARGUMENT when
 * info->struct_size is smaller than 0.2's struct. */
LOCUS_API locus_status locus_build_info_get(locus_build_info *info);

/* ------------------------------------------------------------------------ */
/* Context                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct locus_context locus_context;
typedef struct locus_device locus_device;
typedef struct locus_buffer locus_buffer;

typedef enum locus_log_level {
    LOCUS_LOG_ERROR = 0,
    LOCUS_LOG_WARN = 1,
    LOCUS_LOG_INFO = 2,
    LOCUS_LOG_DEBUG = 3,
} locus_log_level;

/* Each string field, when non-NULL, takes precedence over the LOCUS_*
 * variable of the same meaning and uses the same grammar (docs/ENV.md). */
typedef struct locus_context_options {
    size_t struct_size;
    const char *device;      /* LOCUS_DEVICE */
    const char *backends;    /* LOCUS_BACKENDS */
    const char *threads;     /* LOCUS_THREADS */
    const char *numa;        /* LOCUS_NUMA */
    const char *strict;      /* LOCUS_STRICT */
    const char *log;         /* LOCUS_LOG */
    const char *record;      /* LOCUS_RECORD */
    const char *topology;    /* LOCUS_TOPOLOGY */
    const char *plugin_path; /* LOCUS_PLUGIN_PATH */
    const char *cpu_isa;     /* LOCUS_CPU_ISA */
    int ignore_environment;  /* nonzero: read no LOCUS_* variable */
    /* Appended in 0.2; callers built against 0.1 pass the smaller
     * struct_size and get the default. */
    const char *calibration; /* LOCUS_CALIBRATION */
} locus_context_options;

LOCUS_API void locus_context_options_init(locus_context_options *options);

/* options may be NULL (defaults plus environment). A variable or option
 * that does not parse fails with LOCUS_ERROR_BAD_ENVIRONMENT; one that
 * parses but this machine cannot honour (LOCUS_THREADS above the allowed
 * cpus, LOCUS_NUMA=node:N for a node the topology lacks, a LOCUS_CPU_ISA
 * the cpu lacks, a LOCUS_RECORD that is no regular file) with
 * LOCUS_ERROR_UNUSABLE_ENVIRONMENT; a LOCUS_RECORD the system will not open
 * with LOCUS_ERROR_SYSTEM and strerror's text. Warned about at
 * LOCUS_LOG=warn, errors under LOCUS_STRICT=1: a LOCUS_* name that is no
 * Locus variable (named with the nearest one, see locus_unknown_variables;
 * LOCUS_ERROR_BAD_ENVIRONMENT), and a LOCUS_DEVICE that matches no device,
 * with the reason Locus knows (the backend absent and why, a device number
 * out of range; LOCUS_ERROR_DEVICE_UNAVAILABLE). With
 * options.ignore_environment no name is checked. LOCUS_ERROR_OUT_OF_MEMORY
 * when memory or a worker thread cannot be had (ulimit -v included). Safe
 * to call from several threads at once: the backends' process-wide set-up
 * is serialized. Under an address-space limit too small for a driver's
 * set-up (PoCL's threads), that backend is absent with the figures in its
 * reason, never an abort; a buffer that would not fit on an OpenCL CPU
 * device is LOCUS_ERROR_DEVICE_OUT_OF_MEMORY there (docs/RELIABILITY.md,
 * "Start-up and limits"). */
LOCUS_API locus_status
locus_context_create(const locus_context_options *options, locus_context **out);
/* Destroys the context and its devices. Destroy its buffers and queues
 * first: while any of them is alive the context is left intact and the
 * call fails with LOCUS_ERROR_BUSY, its detail counting what is alive
 * ("2 buffers and 1 queue still alive"), also logged at warn level; destroy
 * them and call again (as libuv's uv_loop_close). Events may outlive the
 * context (only locus_event_* calls may use them then). NULL: nothing to
 * do, LOCUS_SUCCESS. Before 0.2 this returned void; callers that ignore
 * the result still compile. */
LOCUS_API locus_status locus_context_destroy(locus_context *context);

/* How one LOCUS_* variable resolved in this context. */
typedef struct locus_setting {
    const char *name;     /* "LOCUS_DEVICE" */
    const char *raw;      /* what was given, NULL when unset */
    const char *source;   /* "option", "environment" or "default" */
    const char *resolved; /* the value in effect, spelled out */
} locus_setting;

LOCUS_API locus_status locus_setting_count(const locus_context *context,
                                           size_t *count);
LOCUS_API locus_status locus_setting_get(const locus_context *context,
                                         size_t index, locus_setting *out);

/* A LOCUS_* name in the process's environment that no part of Locus reads:
 * most often a misspelling ("LOCUS_DEVIC"), which would otherwise be
 * silently ignored. New in 0.2. */
typedef struct locus_unknown_variable {
    char name[64];       /* the name as set, cut at 63 bytes */
    char suggestion[32]; /* the nearest Locus variable, "" when none is near */
} locus_unknown_variable;

/* Lists the unknown LOCUS_* names of the environment in its order: fills
 * the first min(capacity, *count) entries of out (out may be NULL when
 * capacity is 0) and sets *count to how many there are in all. Names under
 * LOCUS_TEST_ are reserved for test harnesses and never listed; the known
 * names are those of docs/ENVIRONMENT.md. Reads the environment as getenv
 * does: not while another thread calls setenv. Needs no context, so that a
 * tool can report them when locus_context_create fails. */
LOCUS_API locus_status locus_unknown_variables(locus_unknown_variable *out,
                                               size_t capacity, size_t *count);

/* ------------------------------------------------------------------------ */
/* Topology                                                                   */
/* ------------------------------------------------------------------------ */

/* Bits of a node mask are OS NUMA node numbers (as numactl shows them). */
#define LOCUS_MAX_NUMA_NODES 64

typedef struct locus_numa_node_info {
    size_t struct_size;
    int os_index;
    uint64_t memory_bytes;
    int cpu_count;  /* allowed cpus of this node */
    char cpus[256]; /* OS cpu list, e.g. "0-7,16-23" */
} locus_numa_node_info;

LOCUS_API void locus_numa_node_info_init(locus_numa_node_info *info);
LOCUS_API locus_status locus_numa_node_count(const locus_context *context,
                                             size_t *count);
/* index is the position in node order (0 .. count-1), not the OS number. */
LOCUS_API locus_status locus_numa_node_get(const locus_context *context,
                                           size_t index,
                                           locus_numa_node_info *info);
/* Relative distance (10 = local) between the nodes at two positions; 0
 * when the topology gives none. */
LOCUS_API locus_status locus_numa_distance(const locus_context *context,
                                           size_t from, size_t to,
                                           unsigned *distance);
/* Nonzero when binding is real: the topology is this machine's. A synthetic
 * or XML topology binds nothing, and Locus never reports placement as
 * verified under one. */
LOCUS_API int locus_topology_is_this_system(const locus_context *context);
/* A short description of where the topology came from. */
LOCUS_API const char *locus_topology_source(const locus_context *context);

/* Under an MPI launcher (docs/MPI.md): this process's place among the ranks
 * the launcher started on this machine, and the cpus its workers got. When
 * there are several local ranks, the pool size is not set and the launcher
 * did not bind the process, the pool takes this rank's share of the
 * machine: ranks spread over the NUMA nodes, a node's cores split among its
 * ranks. New in 0.2. */
typedef struct locus_local_rank_info {
    size_t struct_size;
    int local_rank;     /* -1: not started by an MPI launcher Locus knows */
    int local_size;     /* ranks on this machine; 0 when local_rank is -1 */
    char variable[32];  /* the launcher variable read, e.g. SLURM_LOCALID */
    int narrowed;       /* nonzero: the pool took this rank's share */
    char reason[192];   /* why it did or did not */
    int workers;        /* the context's CPU workers */
    char cpus[256];     /* their OS cpu list, e.g. "8-15" */
    uint64_t numa_mask; /* OS nodes of those cpus */
} locus_local_rank_info;

LOCUS_API void locus_local_rank_info_init(locus_local_rank_info *info);
LOCUS_API locus_status locus_local_rank_get(const locus_context *context,
                                            locus_local_rank_info *info);

/* ------------------------------------------------------------------------ */
/* Devices and backends                                                       */
/* ------------------------------------------------------------------------ */

typedef enum locus_device_kind {
    LOCUS_DEVICE_CPU = 0,
    LOCUS_DEVICE_GPU = 1,
    LOCUS_DEVICE_ACCELERATOR = 2,
} locus_device_kind;

typedef struct locus_device_info {
    size_t struct_size;
    char selector[32]; /* canonical selector: "cpu", "cuda:0", "opencl:1" */
    char backend[16];  /* "cpu", "cuda", "opencl" */
    char name[128];
    char vendor[64];
    char version[64]; /* driver or platform version */
    locus_device_kind kind;
    uint64_t nearest_numa_mask; /* OS node numbers; 0 when unknown */
    uint64_t memory_bytes;
    int compute_units; /* cores, SMs or compute units */
    int index_in_backend;
    /* Appended in 0.2 (a smaller struct_size gets the fields above only):
     * the PCI address of the hardware, "dddd:bb:dd.f" (domain, bus, device,
     * function; lowercase hex), or "" when unknown (CPU devices, OpenCL
     * devices with no PCI extension). Two devices with the same non-empty
     * address are views of one piece of hardware, e.g. cuda:0 and NVIDIA's
     * OpenCL device for the same GPU. */
    char pci_bus_id[16];
} locus_device_info;

LOCUS_API void locus_device_info_init(locus_device_info *info);
LOCUS_API const char *locus_device_kind_str(locus_device_kind kind);

LOCUS_API locus_status locus_device_count(const locus_context *context,
                                          size_t *count);
/* Devices are owned by the context and live as long as it does. */
LOCUS_API locus_status locus_device_get(locus_context *context, size_t index,
                                        locus_device **out);
/* The first device matching a selector of the LOCUS_DEVICE grammar:
 * "cpu", "cpu:numa=1", "cuda", "cuda:1", "opencl", "opencl:gpu",
 * "opencl:cpu", "opencl:0", "auto", or a comma list in order of preference
 * (a backend name, then a device number, a device kind or the backend's
 * own part). "auto" picks the scheduler's default device. A selector that
 * does not parse, or names no backend of the context, is
 * LOCUS_ERROR_INVALID_ARGUMENT; one that matches no device,
 * LOCUS_ERROR_DEVICE_NOT_FOUND. */
LOCUS_API locus_status locus_device_find(locus_context *context,
                                         const char *selector,
                                         locus_device **out);

/* How the device of an op given none (device NULL) is chosen. */
typedef enum locus_default_choice {
    /* The device option or LOCUS_DEVICE names it: the first item of its
     * list that matches a device of the context. */
    LOCUS_DEFAULT_SELECTED = 0,
    /* "auto" (the default, or an item of the list reached before any that
     * matches): the cost model places each op by its size and where its
     * data is. */
    LOCUS_DEFAULT_AUTO = 1,
    /* The list names no device of the context (LOCUS_DEVICE=cuda without
     * a GPU): ops choose as under "auto", after a warning at context
     * creation; under LOCUS_STRICT=1 that creation fails instead. */
    LOCUS_DEFAULT_FALLBACK = 2,
} locus_default_choice;

/* The device an op given none runs on, as `locus info` shows it, and how
 * it is chosen (how may be NULL). Under LOCUS_DEFAULT_AUTO and _FALLBACK,
 * *out is the cost model's choice for a large gemm with its inputs on the
 * host (locus_device_find's "auto", by nominal figures, so the call never
 * starts a calibration); a smaller op or data already on a device may go
 * elsewhere. Under LOCUS_DEFAULT_SELECTED, an op the device does not offer
 * goes to the next item of the list, then to the cost model. New in 0.2. */
LOCUS_API locus_status locus_default_device(locus_context *context,
                                            locus_device **out,
                                            locus_default_choice *how);
LOCUS_API locus_status locus_device_get_info(const locus_device *device,
                                             locus_device_info *info);

/* What the scheduler's cost model knows of a device: an op of w flops is
 * modelled as fixed + w / rate, the two fitted over a sweep of sizes; data
 * moves at the transfer rates (0: the device computes on host memory).
 * New in 0.2, with locus_device_calibration. */
typedef struct locus_calibration {
    size_t struct_size;
    /* "nominal", "derived", "probed", "cached" or "measured": built in,
     * scaled from the whole CPU's, a short probe, or the full calibration
     * read from its file or measured by this process (docs/SCHEDULER.md,
     * "Calibration"). */
    char source[16];
    double launch_seconds;
    double gemm_fixed_seconds, gemm_flops_per_second;
    double conv_fixed_seconds, conv_flops_per_second;
    double reduce_bytes_per_second;
    double upload_pageable_bytes_per_second;
    double upload_pinned_bytes_per_second; /* 0: the backend cannot pin */
    double download_bytes_per_second;
    double copy_latency_seconds; /* one small copy; 0 on host memory */
    double download_pinned_bytes_per_second; /* 0: the backend cannot pin */
    /* What an op adds when the worker pool it runs on is asleep, idle past
     * its spin; 0 for a device whose ops do not run on the pool. Added
     * during 0.2, after the fields above: a struct_size that ends before
     * it is still accepted and gets the fields above only. */
    double wake_seconds;
} locus_calibration;

LOCUS_API void locus_calibration_init(locus_calibration *calibration);
/* The device's full figures, which the scheduler then uses: from the
 * cache file ($XDG_CACHE_HOME/locus/) or measured now when the device has
 * none yet (an op never waits for this: it decides on nominal figures or
 * a short probe of the CPU), or nominal under LOCUS_CALIBRATION=nominal.
 * remeasure nonzero measures again and
 * rewrites the cache (`locus calibrate`); when the figures were measured
 * but could not be cached (no cache directory, a read-only or full one),
 * out is filled with them, they are in use, and the call returns
 * LOCUS_ERROR_SYSTEM with the reason. */
LOCUS_API locus_status locus_device_calibration(locus_device *device,
                                                int remeasure,
                                                locus_calibration *out);

typedef struct locus_backend_info {
    size_t struct_size;
    char name[16];
    int available;    /* loaded and found at least one device */
    char reason[256]; /* why not available, or where it came from */
    size_t device_count;
} locus_backend_info;

LOCUS_API void locus_backend_info_init(locus_backend_info *info);
/* Every backend Locus knows of, loaded or not: the built-in cpu, the
 * modules this build has (cuda, opencl), and any other module
 * locus-<name>.so found in LOCUS_PLUGIN_PATH or the install dir. */
LOCUS_API locus_status locus_backend_count(const locus_context *context,
                                           size_t *count);
LOCUS_API locus_status locus_backend_get(const locus_context *context,
                                         size_t index,
                                         locus_backend_info *info);

/* ------------------------------------------------------------------------ */
/* Buffers                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum locus_placement_policy {
    LOCUS_PLACE_DEFAULT = 0,    /* the context's LOCUS_NUMA policy */
    LOCUS_PLACE_LOCAL = 1,      /* first touch by the workers that use it */
    LOCUS_PLACE_NODE = 2,       /* bound to one node (node field) */
    LOCUS_PLACE_INTERLEAVE = 3, /* pages spread round-robin over nodes */
    LOCUS_PLACE_OFF = 4,        /* plain allocation, no policy */
    /* New in 0.3: first touch by the creating thread, then, once, the pages
     * move (locus_buffer_migrate's way) to the node of the workers of the
     * first op that uses the buffer: a CPU device's node (a device of
     * several nodes: each page to the node of the worker the canonical
     * split gives it, as LOCUS_PLACE_LOCAL would), another device's nearest
     * node. That op's record shows the move (migrated_bytes). */
    LOCUS_PLACE_NEXT_TOUCH = 5,
} locus_placement_policy;

typedef struct locus_placement {
    size_t struct_size;
    locus_placement_policy policy;
    int node; /* OS node number for LOCUS_PLACE_NODE */
} locus_placement;

LOCUS_API void locus_placement_init(locus_placement *placement);

/* Host memory of `bytes` bytes placed by `placement` (NULL: the default).
 * Node placement is verified with a page query where binding is real;
 * a node that does not exist, or a binding the kernel refused, fails with
 * LOCUS_ERROR_PLACEMENT. */
LOCUS_API locus_status locus_buffer_create(locus_context *context, size_t bytes,
                                           const locus_placement *placement,
                                           locus_buffer **out);
/* Adopt caller memory; Locus never frees it. The memory must outlive the
 * buffer. Alignment of 64 bytes gives the fastest kernels. The CPU reads
 * it in place at every op, so between ops the caller may change it
 * directly; Locus keeps nothing derived from it on the CPU (a buffer from
 * locus_buffer_create used as a conv2d filter keeps its packing between
 * calls, until written). A GPU's copy of it, though, is refreshed only
 * after locus_buffer_write or a write mapping says it changed.
 * Results: when a synchronous op that writes a wrapped buffer returns
 * LOCUS_SUCCESS, the caller's memory holds the result, wherever it was
 * computed (a device with its own memory copies it back before returning;
 * the copy shows in the record's bytes_from_device, and the device's copy
 * stays current for the next op there). A queued op's result is there
 * when its event or locus_queue_finish says it completed. Should that
 * copy fail, the op returns the failure, the result stays on the device,
 * and locus_buffer_read, a mapping or locus_buffer_destroy copies it
 * (destroy logs a failure at warn level): nothing an op wrote is lost. A
 * buffer from locus_buffer_create keeps results where they were computed
 * until locus_buffer_read or locus_buffer_map asks for them.
 * Two buffers whose host memory overlaps (two wraps of one array, or of
 * parts of it) are one array to the ops: an output that overlaps an input
 * is refused like the same buffer passed twice. */
LOCUS_API locus_status locus_buffer_wrap(locus_context *context, void *memory,
                                         size_t bytes, locus_buffer **out);
/* New in 0.3: adopt device memory the caller allocated on `device` (a
 * cudaMalloc pointer, a PyTorch CUDA tensor's or a CuPy array's data);
 * Locus never frees it, and it must outlive the buffer. That memory is
 * the buffer's home, as the caller's array is a locus_buffer_wrap
 * buffer's: ops on `device` use it in place, with no copy (the record's
 * bytes_to_device and bytes_from_device stay 0), so between calls the
 * caller may change it directly (its kernels, cudaMemcpy) for ops there.
 * Everything else goes through the buffer's coherence rules: an op on
 * another device, locus_buffer_read or a mapping copies it to a host copy
 * Locus allocates at the first such need (and to the other device),
 * refreshed only after Locus sees the content change (an op writing it,
 * locus_buffer_write, a write mapping); to have them see a change made
 * behind Locus's back, destroy the buffer and wrap the memory again.
 * Ordering (CUDA): Locus's stream does not synchronize with the legacy
 * default stream, so the wrap makes it wait for the work queued there
 * (and on the streams that synchronize with it) before the call; work the
 * caller queues on other streams, or after the wrap, it completes itself
 * (cudaStreamSynchronize) before the op. Every op has finished with the
 * memory when it returns.
 * Results: the caller's device memory holds them when a call returns
 * LOCUS_SUCCESS, wherever they were computed: an op that writes the
 * buffer on another device (the CPU) copies its result there before it
 * returns (counted in its record's bytes_to_device), locus_buffer_write
 * copies the written data there, and locus_buffer_unmap a write
 * mapping's. Should such a copy fail, the call returns the failure and
 * the newest data stays where it is; a later op on the device, unmap or
 * locus_buffer_destroy copies it (destroy logs a failure at warn level).
 * Two wraps of overlapping memory of one device are one array to the ops
 * (an output that overlaps an input is refused), as with
 * locus_buffer_wrap. locus_buffer_query_pages and locus_buffer_migrate
 * refuse such a buffer (LOCUS_ERROR_NOT_SUPPORTED): it has no NUMA pages.
 * Errors: out, context, device or memory NULL (LOCUS_ERROR_NULL_ARGUMENT);
 * bytes 0, a device of another context, or memory the device's backend
 * says is not memory of that device (host memory, another device's,
 * managed memory, a pointer unknown to the driver; the detail says which)
 * LOCUS_ERROR_INVALID_ARGUMENT; a device whose backend cannot adopt memory
 * it did not allocate (the CPU, which computes on host memory: use
 * locus_buffer_wrap; OpenCL, whose buffers are objects, not pointers)
 * LOCUS_ERROR_NOT_SUPPORTED. */
LOCUS_API locus_status locus_buffer_wrap_device(locus_context *context,
                                                locus_device *device,
                                                void *memory, size_t bytes,
                                                locus_buffer **out);
/* Waits for ops on the buffer, copies a wrapped buffer's newest data to the
 * caller's memory if a device holds it alone (see locus_buffer_wrap),
 * frees device copies, and the host memory if Locus allocated it. */
LOCUS_API void locus_buffer_destroy(locus_buffer *buffer);

LOCUS_API locus_status locus_buffer_size(const locus_buffer *buffer,
                                         size_t *bytes);
/* Copies bytes between the caller's memory and [offset, offset + bytes)
 * of the buffer, after the ops that use it (read: its newest copy,
 * wherever that is). Errors: buffer or memory NULL
 * (LOCUS_ERROR_NULL_ARGUMENT); bytes 0 (LOCUS_ERROR_INVALID_ARGUMENT: an
 * empty transfer is refused, not a no-op, since it is usually a size
 * computed wrong); a range past the buffer's end
 * (LOCUS_ERROR_BUFFER_TOO_SMALL). Nothing is copied when they fail. */
LOCUS_API locus_status locus_buffer_write(locus_buffer *buffer, size_t offset,
                                          const void *source, size_t bytes);
LOCUS_API locus_status locus_buffer_read(locus_buffer *buffer, size_t offset,
                                         void *destination, size_t bytes);

typedef enum locus_map_mode {
    LOCUS_MAP_READ = 1,
    LOCUS_MAP_WRITE = 2,
    LOCUS_MAP_READ_WRITE = 3,
} locus_map_mode;

/* The host copy, made current first. Until unmap, ops on the buffer fail
 * with LOCUS_ERROR_BUSY. LOCUS_MAP_WRITE marks device copies stale. */
LOCUS_API locus_status locus_buffer_map(locus_buffer *buffer,
                                        locus_map_mode mode, void **host);
LOCUS_API locus_status locus_buffer_unmap(locus_buffer *buffer);

/* Where pages live: the answer of move_pages(2) with no target nodes. */
typedef struct locus_page_report {
    size_t struct_size;
    size_t page_size;
    size_t pages_total;
    size_t pages_queried; /* pages_total, or a sample of large ranges */
    size_t pages_on_node[LOCUS_MAX_NUMA_NODES]; /* by OS node number */
    size_t pages_untouched;                     /* never faulted in (ENOENT) */
    size_t pages_unmapped; /* not mappable, e.g. the zero page (EFAULT) */
    size_t pages_other;    /* any other per-page error */
} locus_page_report;

LOCUS_API void locus_page_report_init(locus_page_report *report);
/* Page location of any host range (max_samples 0: every page). */
LOCUS_API locus_status locus_query_pages(const void *memory, size_t bytes,
                                         size_t max_samples,
                                         locus_page_report *report);
/* Page location of a buffer's host copy. */
LOCUS_API locus_status locus_buffer_query_pages(locus_buffer *buffer,
                                                locus_page_report *report);
/* New in 0.3: moves the host copy's pages to NUMA node `node` (OS number,
 * one of the context's nodes) with move_pages(2), waiting for ops on the
 * buffer as a write does; later ops split their local/remote bytes by
 * the new placement. Wrapped buffers move too: migrating application
 * memory is what move_pages is for, and Locus still never frees it; every
 * page the range touches moves, including the parts of its first and
 * last page outside the buffer. Pages never touched have no home yet and
 * stay unplaced. A migration appends a "migrate" record to LOCUS_RECORD
 * (bytes moved, seconds, the buffer's address and the node).
 * Errors: a mapped buffer is LOCUS_ERROR_BUSY; a node that is not the
 * context's, LOCUS_ERROR_PLACEMENT; a simulated topology (LOCUS_TOPOLOGY),
 * LOCUS_ERROR_NOT_SUPPORTED; pages the kernel could not move (busy:
 * pinned or under I/O; no memory on the node) LOCUS_ERROR_PLACEMENT with
 * their counts; the pages that moved stay moved. */
LOCUS_API locus_status locus_buffer_migrate(locus_buffer *buffer, int node);

/* ------------------------------------------------------------------------ */
/* Operations                                                                 */
/* ------------------------------------------------------------------------ */

/* The element types. f32 and f64 hold every operand of an op in that
 * type. bf16 and f16 (new in 0.3) are input types: a gemm's A and B, a
 * conv2d's input and filter; the output (C, the conv2d output) is f32 and
 * the arithmetic accumulates in f32. Which device offers which dtype for
 * which op: locus_device_offers; the scheduler never sends an op to a
 * device that does not offer its dtype. */
typedef enum locus_dtype {
    LOCUS_DTYPE_F32 = 1,
    LOCUS_DTYPE_F64 = 2,
    LOCUS_DTYPE_BF16 = 3, /* new in 0.3: bfloat16, 8-bit exponent */
    LOCUS_DTYPE_F16 = 4,  /* new in 0.3: IEEE binary16 */
} locus_dtype;

/* Bytes of one element: 4, 8, 2, 2; 0 for a value that is no dtype
 * (new in 0.3). */
LOCUS_API size_t locus_dtype_size(locus_dtype dtype);
/* "f32", "f64", "bf16", "f16"; "unknown" otherwise (new in 0.3). */
LOCUS_API const char *locus_dtype_str(locus_dtype dtype);

/* Conversions between f32 and the 16-bit input types (new in 0.3), so a
 * program can fill bf16 and f16 buffers and read them back. A bf16 or f16
 * element is its bit pattern in a uint16_t.
 * - f32 to bf16 or f16: round to nearest, ties to even. A value past the
 *   largest finite one by half a unit or more becomes infinity of its sign
 *   (IEEE overflow: f16's largest is 65504, so 65520 and above round to
 *   inf; bf16 keeps f32's range, so only f32's top half-unit rounds up to
 *   inf). Subnormals of the smaller type are rounded exactly; f32 values
 *   below half of f16's smallest subnormal (2^-25) give zero of their sign.
 * - bf16 or f16 to f32: exact (every bf16 and f16 value is an f32).
 * - NaN stays NaN in both directions, of its sign, made quiet, the
 *   payload's top bits kept; infinities and signed zeros are kept.
 * The results are bits computed the same way on every CPU, whatever the
 * caller's floating-point modes (flush-to-zero, denormals-are-zero). */
LOCUS_API uint16_t locus_bf16_from_float(float value);
LOCUS_API float locus_bf16_to_float(uint16_t value);
LOCUS_API uint16_t locus_f16_from_float(float value);
LOCUS_API float locus_f16_to_float(uint16_t value);
/* n elements of src converted into dst, by the rules above (vectorised
 * where the CPU allows, the same bits). n == 0 does nothing (src and dst
 * may then be NULL); NULL with n > 0 is LOCUS_ERROR_NULL_ARGUMENT, and
 * ranges that overlap LOCUS_ERROR_INVALID_ARGUMENT (no in-place
 * conversion). */
LOCUS_API locus_status locus_f32_to_bf16(const float *src, uint16_t *dst,
                                         size_t n);
LOCUS_API locus_status locus_bf16_to_f32(const uint16_t *src, float *dst,
                                         size_t n);
LOCUS_API locus_status locus_f32_to_f16(const float *src, uint16_t *dst,
                                        size_t n);
LOCUS_API locus_status locus_f16_to_f32(const uint16_t *src, float *dst,
                                        size_t n);

/* The kinds of op, for locus_device_offers (new in 0.2). */
typedef enum locus_op_kind {
    LOCUS_OP_REDUCE = 0,
    LOCUS_OP_GEMM = 1,
    LOCUS_OP_CONV2D = 2,
} locus_op_kind;

typedef enum locus_provenance {
    LOCUS_PROVENANCE_NONE = 0,      /* not measured */
    LOCUS_PROVENANCE_ESTIMATED = 1, /* page placement x access partition */
    LOCUS_PROVENANCE_COUNTED = 2,   /* hardware counters */
} locus_provenance;

LOCUS_API const char *locus_provenance_str(locus_provenance provenance);

/* The cost model's estimate for one candidate device (new in 0.2, with
 * the record's fields that hold it). */
typedef struct locus_estimate {
    char device[32]; /* selector */
    double seconds;  /* estimated wall time of the op there */
} locus_estimate;

#define LOCUS_RECORD_MAX_ESTIMATES 8

/* What one operation did and cost. */
typedef struct locus_record {
    size_t struct_size;
    char op[16];                 /* "reduce", "gemm", "conv2d" */
    char device[32];             /* the device's selector */
    char algorithm[32];          /* e.g. "pairwise", "im2col" */
    double seconds;              /* wall time of the whole call */
    double flops;                /* floating-point operations counted */
    uint64_t bytes;              /* the fewest bytes the op must move */
    uint64_t bytes_to_device;    /* host -> device transfers */
    uint64_t bytes_from_device;  /* device -> host transfers */
    uint64_t workspace_bytes;    /* scratch memory the algorithm used */
    uint64_t local_bytes;        /* host bytes read on the reader's node */
    uint64_t remote_bytes;       /* host bytes read from another node */
    locus_provenance provenance; /* of local_bytes and remote_bytes */
    /* Appended in 0.2 (a smaller struct_size gets the fields above only).
     * How the device was chosen: "caller" (the op was given one),
     * "LOCUS_DEVICE" (the first item of the selector that offers the op),
     * "auto" (the cost model), "fallback" (another device failed first). */
    char chosen_by[16];
    double estimated_seconds; /* the model's estimate here; 0: none made */
    size_t estimate_count;    /* candidates the model weighed, cheapest first */
    locus_estimate estimates[LOCUS_RECORD_MAX_ESTIMATES];
    /* Appended in 0.3: the op's dtype as locus_dtype_str names it ("f32",
     * "f64", "bf16", "f16"). */
    char dtype[8];
    /* Appended in 0.3: host pages moved to another node for this record:
     * by locus_buffer_migrate (op "migrate") or by a next-touch buffer's
     * first op; migrate_seconds is part of seconds. migrate_node: where
     * they went when migrated_bytes is not 0 (-1: spread over several
     * nodes). buffer_id and
     * buffer_address (op "migrate" only, else 0): which buffer, for
     * `locus numa --pid`. */
    uint64_t migrated_bytes;
    double migrate_seconds;
    int migrate_node;
    uint64_t buffer_id;
    uint64_t buffer_address;
} locus_record;

LOCUS_API void locus_record_init(locus_record *record);
/* One JSON object, no newline, into text (truncated to capacity). Returns
 * the length it needed, like snprintf. */
LOCUS_API size_t locus_record_to_json(const locus_record *record, char *text,
                                      size_t capacity);

typedef enum locus_reduce_op {
    LOCUS_REDUCE_SUM = 0,
    LOCUS_REDUCE_MIN = 1,
    LOCUS_REDUCE_MAX = 2,
} locus_reduce_op;

typedef struct locus_reduce_desc {
    size_t struct_size;
    locus_dtype dtype;
    locus_reduce_op op;
    size_t count; /* elements, from the start of the buffer; at least 1 */
    /* 0 (default): deterministic, the same input on the same device gives
     * the same bits every run. Nonzero: a backend may combine partial
     * results with atomics (the CUDA backend does), which can be faster and
     * makes the order of a sum, so its last bits, vary from run to run.
     * In 0.1's layout already; a struct_size that ends at count is still
     * accepted and gets the deterministic reduction. */
    int allow_atomic;
} locus_reduce_desc;

LOCUS_API void locus_reduce_desc_init(locus_reduce_desc *desc);

/* The same rules hold on every backend and device, so the scheduler's
 * choice never changes an answer:
 * - sum: the float64 sum of the f32 values, within 1e-6 of their sum of
 *   |x| (the backends add short f32 blocks into double, or compensate).
 *   Values whose f32 sum would overflow still give the finite float64
 *   result (4096 x 3e38 is 1.2288e42); the f32 inputs cannot overflow
 *   the float64 sum. Infinities of one sign give that infinity, +inf with
 *   -inf gives NaN, and any NaN gives NaN.
 * - min, max: any NaN in the input gives NaN; infinities are values like
 *   any other. Where the extreme is a zero, the CPU backend returns the
 *   first zero in index order (its sign); the GPU backends may return
 *   either sign.
 * - f64 (new in 0.3): the same rules on doubles. The sum is compensated
 *   (TwoSum into (sum, error) pairs, folded in a fixed order, so the same
 *   bits every run): with u = 2^-53, S the exact sum and n the count, it
 *   is within u sum|x| + 2u|S| + 4n u^2 sum|x| on the CPU and OpenCL and
 *   within 2u|S| + (n u)^2 sum|x| on CUDA; an overflowing partial sum
 *   whose total is finite still gives the finite total. min and max are
 *   exact. bf16 and f16 are not reduce types (LOCUS_ERROR_NOT_SUPPORTED).
 * Every op takes a device, or NULL for the scheduler's choice (LOCUS_DEVICE),
 * and an optional record to fill (NULL: none). Every op, reduce, gemm and
 * conv2d, refuses with LOCUS_ERROR_INVALID_ARGUMENT a device or a buffer
 * of another context (the detail names the operand), and an output that
 * overlaps an input in memory (locus_buffer_wrap). */
LOCUS_API locus_status locus_reduce(locus_context *context,
                                    locus_device *device,
                                    const locus_reduce_desc *desc,
                                    locus_buffer *x, double *result,
                                    locus_record *record);

typedef enum locus_transpose {
    LOCUS_NO_TRANS = 0,
    LOCUS_TRANS = 1,
} locus_transpose;

typedef enum locus_math_mode {
    LOCUS_MATH_FP32 = 0,   /* exact FP32 semantics (default) */
    LOCUS_MATH_TF32 = 1,   /* tensor cores, TF32 inputs */
    LOCUS_MATH_3XTF32 = 2, /* tensor cores, split operands */
} locus_math_mode;

/* C = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm with
 * CblasRowMajor: op(A) is m x k, op(B) is k x n, C is m x n; lda is at least
 * the row length of A as stored (k, or m when transposed), likewise ldb, and
 * ldc >= n (0: that tight value).
 *
 * dtype (new in 0.3 beyond f32): f64 is DGEMM, every matrix in doubles and
 * alpha and beta used as doubles; bf16 and f16 hold A and B, C is f32, the
 * products accumulate in f32 and alpha and beta are rounded to f32. The
 * math modes TF32 and 3xTF32 are f32's (any other dtype with them:
 * LOCUS_ERROR_NOT_SUPPORTED); locus_gemm_split takes f32 only. Error per
 * element of C against the exact product of the stored values, with
 * P = |alpha| sum_l |a_il b_lj| + |beta c_ij|:
 *  - f64, u = 2^-53: within 2(k+4) u P on every backend (the tests check
 *    2(k+3) u P on the CPU, 2(k+2) u P on OpenCL, (k+4) u |alpha| sum|ab|
 *    + 2u |beta c| on CUDA's FP64 tensor cores).
 *  - bf16, f16, u = 2^-24: within 2(k+3) u P + (k+1) 2^-126 on the CPU
 *    (the AVX512-BF16 dot product flushes tiny partial sums) and within
 *    (8 + 8 sqrt(k)) u P on CUDA's tensor cores.
 * The Reference BLAS rules hold on every backend, kernel, dtype and math
 * mode, for every transpose and leading dimension, and through
 * locus_enqueue_gemm and locus_gemm_split alike (alpha and beta as the op
 * rounds them: to f32 but for f64):
 *  - beta == 0: C is only written, never read; NaN or inf in C never
 *    survive.
 *  - alpha == 0 or k == 0: C = beta C, and A and B are not read (NaN or
 *    inf there never reach C): beta == 0 sets C to +0, beta == 1 leaves C
 *    as it was, bit for bit (its NaNs too), and runs nothing. The record
 *    counts 0 flops.
 *  - m == 0 or n == 0: a quick return: success, nothing read or written,
 *    nothing run; the record's algorithm is "quick return", its device the
 *    one given ("none" for device NULL), 0 flops and 0 bytes.
 * Zero sizes leave the other checks standing, each matrix judged by its
 * shape, read or not: ld below the row length as stored is refused
 * (LOCUS_ERROR_INVALID_ARGUMENT; with k == 0 and A transposed, lda >= m
 * still), a matrix that does not fit its buffer too (with k == 0, a C
 * smaller than m x n with ldc: LOCUS_ERROR_BUFFER_TOO_SMALL). A matrix of
 * no elements (A with m or k 0, B with k or n 0, C with m or n 0) needs no
 * bytes and may be passed as NULL, as cblas callers pass NULL for an empty
 * array; NULL for a matrix that has elements is LOCUS_ERROR_NULL_ARGUMENT
 * ("a is NULL but holds 7 x 3 elements"), whether or not it would be read
 * (alpha == 0 with A NULL and m, k > 0 is refused). */
typedef struct locus_gemm_desc {
    size_t struct_size;
    locus_dtype dtype;
    locus_transpose trans_a;
    locus_transpose trans_b;
    size_t m, n, k;
    size_t lda, ldb, ldc; /* 0: the tight value */
    double alpha;
    double beta;
    locus_math_mode math;
} locus_gemm_desc;

LOCUS_API void locus_gemm_desc_init(locus_gemm_desc *desc);
LOCUS_API locus_status locus_gemm(locus_context *context, locus_device *device,
                                  const locus_gemm_desc *desc, locus_buffer *a,
                                  locus_buffer *b, locus_buffer *c,
                                  locus_record *record);

typedef enum locus_conv_algorithm {
    LOCUS_CONV_AUTO = 0,
    LOCUS_CONV_IM2COL = 1, /* lower to columns, one GEMM */
    LOCUS_CONV_MEC = 2,    /* memory-efficient convolution */
    /* im2col fused into GEMM packing: no lowered matrix */
    LOCUS_CONV_IMPLICIT_GEMM = 3,
    /* New in 0.2. Winograd F(2x2, 3x3): 2.25x fewer multiplies than the
     * direct sum, at the cost of a workspace (the transformed filter, input
     * tiles and products). 3x3 filters with stride 1 only (any padding); CUDA
     * and OpenCL only: other shapes, and the CPU backend, return
     * LOCUS_ERROR_NOT_SUPPORTED when it is asked for by name. FP32
     * arithmetic (or the math mode's, in its 16 GEMMs), but not the direct
     * sum's rounding: the transforms add and subtract neighbouring inputs
     * and products, so an output's error scales with the terms of the 2x2
     * output tile it is computed with. On random data that error stayed
     * under 4 units of roundoff (2^-24 in fp32) times the largest sum of
     * |terms| among the tile's outputs, as the direct sum's stays under
     * about 4 units times its own output's; an output whose own terms are
     * much smaller than its neighbours' (mostly padding) can thus see tens
     * of units relative to its own (scripts/winograd-error.py). On CUDA,
     * and on OpenCL devices with the GPU kernels, LOCUS_CONV_AUTO takes it
     * for FP32 3x3 stride-1 layers with 16 or more input channels and 8
     * or more filters; ask for LOCUS_CONV_IMPLICIT_GEMM to keep the direct
     * sum's rounding. */
    LOCUS_CONV_WINOGRAD = 4,
} locus_conv_algorithm;

LOCUS_API const char *locus_conv_algorithm_str(locus_conv_algorithm algorithm);

/* Whether the device offers an op of this kind with this algorithm
 * (conv2d's locus_conv_algorithm; 0 for reduce and gemm, which have one
 * each) and dtype, as its backend says: *offered is 1 or 0. An op given
 * no device is never sent to a device that does not offer it; one given a
 * device that does not is refused with LOCUS_ERROR_NOT_SUPPORTED. A device
 * that offers an op may still refuse a shape past its kernels' limits (the
 * op then moves on to another device, unless the caller named it). An
 * unknown op kind, algorithm or dtype is LOCUS_ERROR_INVALID_ARGUMENT. New
 * in 0.2. */
LOCUS_API locus_status locus_device_offers(const locus_device *device,
                                           locus_op_kind op, int algorithm,
                                           locus_dtype dtype, int *offered);

/* Input NCHW (batch x in_channels x in_height x in_width), filter KCRS
 * (out_channels x in_channels x kernel_height x kernel_width), output NKPQ
 * with P = (in_height + 2 pad_h - kernel_height) / stride_h + 1, likewise Q.
 * Zero padding; cross-correlation, as in every deep-learning library.
 * dtype (new in 0.3 beyond f32): f64 on every backend by im2col (auto
 * takes it; MEC, the implicit GEMM and Winograd are not offered in f64),
 * within 2(CRS+4) 2^-53 sum|x f| of the exact sum of each output (CRS:
 * in_channels x kernel_height x kernel_width); bf16 and f16 input and
 * filter with an f32 output on CUDA (im2col), within the half gemm's
 * bound with k = CRS. The TF32 math modes are f32's, as for gemm.
 *
 * Appended in 0.3 (docs/CONV.md): the layer as networks use it. A
 * struct_size that ends at `math` (a caller built against 0.2) is still
 * accepted, and the new fields then take their _init defaults, which give
 * 0.2's convolution.
 *  - groups: the channels cut into `groups` independent convolutions
 *    (in_channels and out_channels both divisible by it); the filter is
 *    out_channels x in_channels/groups x R x S, and output channel k reads
 *    input channels [g C/groups, (g+1) C/groups) with g = k / (K/groups).
 *    Depthwise: groups = in_channels, out_channels a multiple of it. 0
 *    reads as 1.
 *  - pad_bottom, pad_right: padding below and right of the image; pad_h and
 *    pad_w are then the top and left padding. LOCUS_CONV_PAD_SAME_AS_TOP
 *    (the _init value): pad_h, pad_w (symmetric padding, as in 0.2).
 *  - dilation_h, dilation_w: filter taps dilation apart, the kernel spans
 *    (R - 1) dilation_h + 1 rows (likewise columns). 0 reads as 1.
 *  - activation: applied to each output after the bias.
 *  - input_layout, output_layout: NCHW or NHWC, each on its own; the
 *    filter is KCRS for an NCHW input and KRSC for an NHWC one.
 * So P = (in_height + pad_h + pad_bottom - ((R - 1) dilation_h + 1)) /
 * stride_h + 1, likewise Q. Bias: locus_conv2d_layer. A device that lacks
 * a feature a request uses (groups > 1, dilation > 1, asymmetric padding,
 * a bias, an activation, NHWC) does not offer it: the scheduler passes it
 * by, and naming it is LOCUS_ERROR_NOT_SUPPORTED ("conv2d with groups is
 * not offered on cuda:0"). In 0.3 the CPU offers every feature; CUDA and
 * OpenCL run the 0.2 convolution only. On the CPU, `auto` runs a request
 * with features by a depthwise kernel (groups = C), a direct kernel (tiny
 * layers) or im2col (one GEMM per group); im2col may be asked for by
 * name; MEC and the implicit GEMM with any feature are
 * LOCUS_ERROR_NOT_SUPPORTED. The error bound is the f32 or f64 direct
 * sum's over the C/groups x R x S terms of each output, then the bias's
 * addition. */
#define LOCUS_CONV_PAD_SAME_AS_TOP SIZE_MAX

typedef enum locus_activation {
    LOCUS_ACTIVATION_NONE = 0,
    LOCUS_ACTIVATION_RELU = 1,  /* max(x, 0); NaN stays NaN */
    LOCUS_ACTIVATION_RELU6 = 2, /* min(max(x, 0), 6); NaN stays NaN */
} locus_activation;

typedef enum locus_tensor_layout {
    LOCUS_LAYOUT_NCHW = 0,
    LOCUS_LAYOUT_NHWC = 1,
} locus_tensor_layout;

typedef struct locus_conv2d_desc {
    size_t struct_size;
    locus_dtype dtype;
    size_t batch;
    size_t in_channels, in_height, in_width;
    size_t out_channels, kernel_height, kernel_width;
    size_t stride_h, stride_w; /* at least 1 */
    size_t pad_h, pad_w;       /* top and left (and, by default, bottom and
                                  right) */
    locus_conv_algorithm algorithm;
    locus_math_mode math;
    /* Appended in 0.3: */
    size_t groups;                 /* 1 (0 reads as 1) */
    size_t pad_bottom, pad_right;  /* LOCUS_CONV_PAD_SAME_AS_TOP */
    size_t dilation_h, dilation_w; /* 1 (0 reads as 1) */
    locus_activation activation;   /* LOCUS_ACTIVATION_NONE */
    locus_tensor_layout input_layout, output_layout; /* LOCUS_LAYOUT_NCHW */
} locus_conv2d_desc;

LOCUS_API void locus_conv2d_desc_init(locus_conv2d_desc *desc);
/* Output height and width; fails when the kernel does not fit, or a
 * field is out of its range (a stride of 0, an unknown activation or
 * layout, groups not dividing the channels). */
LOCUS_API locus_status locus_conv2d_output_shape(const locus_conv2d_desc *desc,
                                                 size_t *out_height,
                                                 size_t *out_width);
/* locus_conv2d_layer with no bias. */
LOCUS_API locus_status locus_conv2d(locus_context *context,
                                    locus_device *device,
                                    const locus_conv2d_desc *desc,
                                    locus_buffer *input, locus_buffer *filter,
                                    locus_buffer *output, locus_record *record);
/* New in 0.3: the convolution plus a bias: NULL (none), or a buffer of
 * out_channels elements of the output's dtype, added to every output of
 * its channel before the activation. A bias is a feature (see above): on
 * a device without it, LOCUS_ERROR_NOT_SUPPORTED. The bias may not alias
 * the output. */
LOCUS_API locus_status locus_conv2d_layer(
    locus_context *context, locus_device *device, const locus_conv2d_desc *desc,
    locus_buffer *input, locus_buffer *filter, locus_buffer *bias,
    locus_buffer *output, locus_record *record);

/* ------------------------------------------------------------------------ */
/* Queues, events and the multi-device split                                  */
/* ------------------------------------------------------------------------ */

typedef struct locus_queue locus_queue;
typedef struct locus_event locus_event;

/* New in 0.2: queues, events, locus_gemm_split and locus_gemm_split_rows.
 *
 * A queue runs the ops enqueued on it one at a time, in the order they were
 * enqueued, on a thread of its own, while the caller goes on. Ops in
 * different queues run at the same time, so work on the CPU and on GPUs
 * overlaps. The buffer rules of the synchronous ops still hold across
 * queues and threads: an op that writes a buffer waits for the ops using it
 * and is waited for by the later ones; order ops that depend on each other
 * by putting them in one queue or with locus_queue_wait_event.
 *
 * device: where every op of the queue runs, or NULL: each op's device is
 * chosen when it starts, as the synchronous call given NULL chooses it.
 * Several threads may enqueue on one queue; concurrent calls take their
 * places in the order they get to it. Destroy every queue of a context
 * before the context. Fails with LOCUS_ERROR_INVALID_ARGUMENT for a device
 * of another context, LOCUS_ERROR_SYSTEM when no thread can be started. */
LOCUS_API locus_status locus_queue_create(locus_context *context,
                                          locus_device *device,
                                          locus_queue **out);
/* Runs everything still queued, waits for it, then ends the queue's
 * thread. Events handed out stay valid until destroyed. No other call may
 * use the queue meanwhile. */
LOCUS_API void locus_queue_destroy(locus_queue *queue);

/* The enqueue calls take the synchronous op's arguments, less the context
 * and device (the queue's), plus an event:
 *  - they return at once; the op runs later on the queue's thread;
 *  - the descriptor is copied, so it may be reused at once; the buffers,
 *    and result and record when given, must stay valid until the op
 *    completes; result and record are written when it completes and must
 *    not be read before (wait on its event, or finish the queue);
 *  - event: where to store a new event that completes with the op; NULL
 *    when none is wanted;
 *  - NULL arguments (LOCUS_ERROR_NULL_ARGUMENT), a buffer of another
 *    context or an output that overlaps an input in memory
 *    (LOCUS_ERROR_INVALID_ARGUMENT) and a queue device that does not offer
 *    the op (LOCUS_ERROR_NOT_SUPPORTED) fail here, with nothing enqueued
 *    and *event set to NULL; LOCUS_ERROR_OUT_OF_MEMORY likewise;
 *  - everything the synchronous op checks of its descriptor (struct_size,
 *    dtype, shape, sizes against the buffers, the record's struct_size) is
 *    checked when the op runs; a failure then comes back through the event
 *    and locus_queue_finish; but a NULL buffer is judged at once (gemm:
 *    allowed for a matrix of no elements, as in locus_gemm);
 *  - a wrapped output holds the result once the op has completed (its
 *    event, or locus_queue_finish, says so), as after the synchronous op. */
LOCUS_API locus_status locus_enqueue_reduce(locus_queue *queue,
                                            const locus_reduce_desc *desc,
                                            locus_buffer *x, double *result,
                                            locus_record *record,
                                            locus_event **event);
LOCUS_API locus_status locus_enqueue_gemm(locus_queue *queue,
                                          const locus_gemm_desc *desc,
                                          locus_buffer *a, locus_buffer *b,
                                          locus_buffer *c, locus_record *record,
                                          locus_event **event);
LOCUS_API locus_status locus_enqueue_conv2d(
    locus_queue *queue, const locus_conv2d_desc *desc, locus_buffer *input,
    locus_buffer *filter, locus_buffer *output, locus_record *record,
    locus_event **event);
/* New in 0.3: locus_conv2d_layer's; bias may be NULL (none). */
LOCUS_API locus_status locus_enqueue_conv2d_layer(
    locus_queue *queue, const locus_conv2d_desc *desc, locus_buffer *input,
    locus_buffer *filter, locus_buffer *bias, locus_buffer *output,
    locus_record *record, locus_event **event);

/* Ops enqueued on queue after this call start after event has completed
 * (an op of another queue, or of this one). Ordering only: when event's op
 * failed, they still run, and this queue's next locus_queue_finish reports
 * that failure. The event may be destroyed right after the call. Fails with
 * LOCUS_ERROR_INVALID_ARGUMENT for an event of another context. */
LOCUS_API locus_status locus_queue_wait_event(locus_queue *queue,
                                              locus_event *event);
/* Waits for every op enqueued before the call. Returns the first failure
 * among the ops (and the waited-on events) that completed since the
 * previous finish, with its detail in locus_last_error(), which names the
 * op; LOCUS_SUCCESS when there was none. The failure is then forgotten. */
LOCUS_API locus_status locus_queue_finish(locus_queue *queue);

/* Waits until the op completes and returns its status; on failure, the
 * op's error detail becomes this thread's locus_last_error(). */
LOCUS_API locus_status locus_event_wait(locus_event *event);
/* *done = 1 when the op has completed, else 0; never waits. The op's own
 * status comes from locus_event_wait, which then returns at once. */
LOCUS_API locus_status locus_event_query(locus_event *event, int *done);
/* The op's error detail, as locus_last_error() read on the thread that ran
 * it: "" while it runs, after a success, and for NULL. Valid until the
 * event is destroyed. */
LOCUS_API const char *locus_event_error(locus_event *event);
/* Drops the caller's hold on the event; the op itself still runs. */
LOCUS_API void locus_event_destroy(locus_event *event);

/* C = alpha op(A) op(B) + beta C, as locus_gemm, computed by several
 * devices at once. C's rows are cut into one contiguous block per device,
 * in the order of devices, with sizes proportional to weights; NULL: to
 * each device's throughput for this call as the scheduler's cost model
 * expects it (its gemm rate, calibrated or nominal, with the transfers
 * the device would need for these buffers where they are). Without
 * weights, devices that are views of one piece of hardware (the same
 * non-empty pci_bus_id, e.g. cuda:0 and NVIDIA's OpenCL device for that
 * GPU) count as one: only the view the model expects to be fastest gets
 * rows. A device whose block has 0 rows does nothing. The blocks run at
 * the same time, one thread per device (the calling thread takes the
 * first host device's).
 * A, B and C are read from their host copies, made current first: a
 * device computing on host memory (the CPU) uses them in place, any other
 * gets device memory for its rows of A (columns when transposed), all of B
 * (unless it already holds a current copy of B) and its rows of C, freed
 * before the call returns. Afterwards C's only current copy is the
 * host's.
 *
 * Failure: the status of the first device (in the order of devices) that
 * failed, with a detail naming it and its rows. C keeps its previous
 * contents (no block is written into C until every device has computed
 * its own), except when copying a device's finished block back fails, or
 * when a host device given every row (which computes in place, as
 * locus_gemm does) fails midway: C's rows are then unspecified.
 *
 * Errors besides those of locus_gemm: devices or a device NULL
 * (LOCUS_ERROR_NULL_ARGUMENT); device_count 0, a device listed twice or of
 * another context, a buffer of another context, a weight negative, NaN or
 * infinite, or all weights 0 (LOCUS_ERROR_INVALID_ARGUMENT); a device that
 * does not offer gemm (LOCUS_ERROR_NOT_SUPPORTED). The record's device
 * reads "cuda:0+cpu": the devices given rows, joined by '+'; its algorithm
 * is "split".
 * A gemm that reads neither A nor B (alpha or k 0) or does nothing (m or n
 * 0) is not split: every row goes to one device, the first host device
 * among those of positive weight (C is on the host), else the first of
 * positive weight, and it runs as locus_gemm there; locus_gemm_split_rows
 * says so. */
LOCUS_API locus_status locus_gemm_split(
    locus_context *context, locus_device *const *devices, size_t device_count,
    const double *weights, const locus_gemm_desc *desc, locus_buffer *a,
    locus_buffer *b, locus_buffer *c, locus_record *record);
/* The rows of C that locus_gemm_split with these arguments would give each
 * device now: rows[i] (device_count entries) for devices[i], summing to m.
 * The same checks; nothing runs. */
LOCUS_API locus_status locus_gemm_split_rows(
    locus_context *context, locus_device *const *devices, size_t device_count,
    const double *weights, const locus_gemm_desc *desc, locus_buffer *a,
    locus_buffer *b, locus_buffer *c, size_t *rows);

#ifdef __cplusplus
}
#endif

#endif /* LOCUS_LOCUS_H */
