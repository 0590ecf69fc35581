/*
 * The backend plugin ABI.
 *
 * A backend is a table of function pointers that describes itself: its
 * name, its part of the device-selector grammar, its nominal figures for
 * the cost model, whether its ops run on the runtime's worker pool, and
 * which ops, algorithms and dtypes it offers. The runtime names no backend:
 * its list is the built-in CPU table plus every module locus-<name>.so it
 * finds (docs/ARCHITECTURE.md, "Adding a backend"). A module exports one
 * function, LOCUS_BACKEND_ENTRY_SYMBOL, returning its table; it calls into
 * the runtime only through the locus_services table handed to init(), and
 * links no liblocus symbol, so it works with the shared and the static
 * library.
 *
 * The runtime checks abi_version before calling anything else; a table of
 * another version makes the backend absent, with the versions in the reason.
 * Bump LOCUS_BACKEND_ABI_VERSION on any change to these structs that is not
 * an append at the end. Version 2: the self-description (the fields after
 * unpin) and services->topology_is_this_system. Version 3: conv2d's
 * features (conv2d_features, conv2d_layer), and the conv2d descriptor's
 * fields appended in 0.3.
 */
#ifndef LOCUS_BACKEND_H
#define LOCUS_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "locus.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOCUS_BACKEND_ABI_VERSION 3u
#define LOCUS_BACKEND_ENTRY_SYMBOL "locus_backend_entry"

/* Per-op state the runtime hands a backend's op: the record to fill in
 * (algorithm, workspace_bytes; the runtime fills the rest) and the runtime's
 * bookkeeping for the local/remote accounting. */
typedef struct locus_op_context {
    locus_record *record;
    void *runtime_private;
} locus_op_context;

/* A bounded copy that always terminates, for the record's names: they are
 * set on every op's path, where snprintf's formatting machinery cost a
 * tenth of a small op. */
static inline void locus_copy_name(char *to, size_t capacity, const char *from)
{
    size_t length = 0;
    while (length + 1 < capacity && from[length] != '\0')
        length++;
    for (size_t i = 0; i < length; i++)
        to[i] = from[i];
    to[length] = '\0';
}

/* Sets info->pci_bus_id to the canonical "dddd:bb:dd.f" (lowercase hex,
 * the domain at least 4 digits) that every backend must use: the runtime
 * compares the strings as they are, to find devices that are views of one
 * piece of hardware. An address out of PCI's ranges leaves the field empty
 * (unknown) rather than risk a false match; so does an info struct from a
 * runtime older than the field. */
static inline void locus_device_info_set_pci(locus_device_info *info,
                                             unsigned domain, unsigned bus,
                                             unsigned device, unsigned function)
{
    size_t end =
        offsetof(locus_device_info, pci_bus_id) + sizeof info->pci_bus_id;
    if (info->struct_size < end)
        return;
    info->pci_bus_id[0] = '\0';
    if (bus > 0xff || device > 0x1f || function > 7)
        return;
    int n = snprintf(info->pci_bus_id, sizeof info->pci_bus_id,
                     "%04x:%02x:%02x.%x", domain, bus, device, function);
    if (n < 0 || (size_t)n >= sizeof info->pci_bus_id)
        info->pci_bus_id[0] = '\0';
}

/* The op's algorithm name in its record, if it has one. */
static inline void locus_op_set_algorithm(locus_op_context *op,
                                          const char *name)
{
    if (op && op->record)
        locus_copy_name(op->record->algorithm, sizeof op->record->algorithm,
                        name);
}

/* The record's name of the conv algorithm that ran, auto resolved (a
 * module cannot call liblocus's locus_conv_algorithm_str). */
static inline const char *
locus_conv_algorithm_ran(locus_conv_algorithm algorithm)
{
    switch (algorithm) {
    case LOCUS_CONV_MEC:
        return "mec";
    case LOCUS_CONV_IMPLICIT_GEMM:
        return "implicit";
    case LOCUS_CONV_WINOGRAD:
        return "winograd";
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    }
    return "im2col";
}

typedef void (*locus_worker_fn)(void *arg, int worker, int workers);

/* What the runtime offers a backend. `runtime` is the opaque handle given to
 * init(); pass it back unchanged. */
typedef struct locus_services {
    size_t struct_size;
    uint32_t abi_version;

    /* Logging at a level, filtered by LOCUS_LOG. */
    void (*log)(void *runtime, locus_log_level level, const char *format, ...);
    /* Sets this thread's error detail and returns status, so a backend can
     * write `return services->fail(LOCUS_ERROR_BACKEND, "...", ...)`. */
    locus_status (*fail)(locus_status status, const char *format, ...);

    /* The worker pool: one thread per allowed core, pinned, ordered by NUMA
     * node. A worker set is the whole pool (node -1) or the workers of one
     * OS node. run() calls fn(arg, rank, ranks) on every worker of the set,
     * rank 0 .. ranks-1 in pool order, and returns when all are done; jobs
     * from several application threads are serialized. */
    int (*worker_count)(void *runtime, int node);
    locus_status (*run)(void *runtime, int node, locus_worker_fn fn, void *arg);
    /* The canonical split of [0, total) into `ranks` contiguous ranges in
     * rank order, each a multiple of `align` except the last. Buffers placed
     * `local` were first-touched by the whole pool with this split of their
     * bytes (align = page size), so kernels that follow it read locally. */
    void (*split)(size_t total, size_t align, int rank, int ranks,
                  size_t *begin, size_t *end);

    /* Records that the calling worker read [memory, memory + bytes) of host
     * memory, for the op's local/remote accounting. Call once per range, not
     * per element; the runtime resolves page placement after the op. */
    void (*account_read)(locus_op_context *op, const void *memory,
                         size_t bytes);

    /* NUMA nodes, by position 0 .. count-1 (OS numbers in the info). */
    int (*numa_node_count)(void *runtime);
    locus_status (*numa_node)(void *runtime, int position,
                              locus_numa_node_info *info);

    /* Host memory bound to an OS node (-1: no binding), for staging and
     * workspace; NULL on failure with the error detail set. */
    void *(*host_alloc)(void *runtime, size_t bytes, int node);
    void (*host_free)(void *runtime, void *memory, size_t bytes);

    /* The NUMA nodes nearest a PCI device, from the topology (0: unknown). */
    uint64_t (*pci_numa_mask)(void *runtime, unsigned domain, unsigned bus,
                              unsigned device, unsigned function);
    /* The OS nodes holding these OS cpus' cores (0: unknown). */
    uint64_t (*cpuset_numa_mask)(void *runtime, const char *cpu_list);

    /* LOCUS_CPU_ISA as resolved: "generic", "avx2", "avx512", or NULL when
     * not forced. */
    const char *(*forced_cpu_isa)(void *runtime);

    /* Size in bytes of the level-1, 2 or 3 data (or unified) cache, as hwloc
     * reports the first one; 0 when the topology has none at that level.
     * CPU kernels size their blocks from it. */
    size_t (*cache_bytes)(void *runtime, int level);
    /* How many workers share one cache of that level (1 for private). */
    int (*cache_sharing)(void *runtime, int level);

    /* run(), but every rank in turn on the calling thread: the same split
     * and so the same result, without waking the workers, whose wake-up
     * (tens of microseconds) is more than a tiny job takes. */
    locus_status (*run_here)(void *runtime, int node, locus_worker_fn fn,
                             void *arg);

    /* A key for the content of the op's operand whose memory the backend
     * was handed at `memory`: key[0] names the buffer (never reused in the
     * process), key[1] changes whenever its content may have changed (a
     * write, a write mapping, an op writing it). Returns 0 (no key) for a
     * buffer wrapped from caller memory, which the caller may change
     * without telling Locus, and for memory that is no operand's start. A
     * backend may keep data derived from an input (a packed filter) under
     * its key, across ops. */
    int (*content_key)(locus_op_context *op, const void *memory,
                       uint64_t key[2]);

    /* account_read for `rows` rows of row_bytes each, the first at memory
     * and each `stride` bytes after the one before (one row of every
     * channel of an image): one record, not one per row. The span's
     * local/remote split is scaled to the rows' bytes, exact whenever the
     * span's pages are all local or all remote. (A record per row cost
     * ~40 ns at the op's end: 20 us an op for the 4096 channel rows of a
     * 16-worker convolution.) Appended: a backend built against this
     * header checks struct_size before calling it. */
    void (*account_read_rows)(locus_op_context *op, const void *memory,
                              size_t row_bytes, size_t stride, size_t rows);

    /* Nonzero when the topology is this machine's, 0 for a described one
     * (LOCUS_TOPOLOGY): a backend's messages then say "the topology". */
    int (*topology_is_this_system)(void *runtime);
} locus_services;

/* What the cost model assumes of a device until it is measured
 * (docs/SCHEDULER.md): an op of w flops takes fixed + w / rate, a reduce
 * launch + bytes / reduce_bytes, a copy transfer_seconds + bytes / rate.
 * Rates in flop/s or bytes/s; the host <-> device ones are 0 for a device
 * that computes on host memory, the pinned ones 0 where the backend cannot
 * pin. */
typedef struct locus_backend_rates {
    double launch_seconds; /* the smallest op, end to end */
    double gemm_fixed_seconds;
    double gemm_flops;
    double conv_fixed_seconds;
    double conv_flops;
    double reduce_bytes; /* bytes/s read by a large reduce */
    double upload_pageable_bytes;
    double upload_pinned_bytes;
    double download_bytes;
    double transfer_seconds; /* the latency of one small copy */
    double download_pinned_bytes;
    /* What an op on the worker pool pays on top when its workers are
     * asleep; 0 for a backend whose ops do not run on the pool. */
    double wake_seconds;
    /* Appended in 0.3: the gemm and conv2d rates in f64 and with bf16/f16
     * inputs. 0: not known, and the cost model takes half the f32 rate for
     * f64 (a vector holds half as many doubles) and the f32 rate for the
     * half types. */
    double gemm_flops_f64;
    double conv_flops_f64;
    double gemm_flops_half;
    double conv_flops_half;
    /* Appended in 0.3: bytes/s at which conv2d prepares a filter it has not
     * seen (the CPU packs it into its filter cache), paid on top of
     * conv_fixed_seconds, which is measured with the filter prepared. 0:
     * no such cost (the device prepares its filter in every call, and its
     * conv rate includes it). */
    double conv_filter_bytes;
    /* Appended in 0.3: what an op on the worker pool pays on top when its
     * workers have slept only briefly (past their spin, before their cores
     * reach deep idle states), where wake_seconds is the deep sleep's. 0:
     * not known, and the runtime takes a quarter of wake_seconds. */
    double shallow_wake_seconds;
} locus_backend_rates;

/* Nominal figures of the usual shape for a device whose data crosses a
 * link, for a backend's nominal_rates: gemm's and conv2d's fixed part two
 * launches, conv2d at half gemm's rate, copies both ways at copy_bytes
 * with copy_seconds of latency, pinned copies at pinned_bytes (0: the
 * backend cannot pin). */
static inline locus_backend_rates
locus_backend_rates_linked(double launch_seconds, double flops,
                           double reduce_bytes, double copy_bytes,
                           double copy_seconds, double pinned_bytes)
{
    locus_backend_rates rates = {0};
    rates.launch_seconds = launch_seconds;
    rates.gemm_fixed_seconds = 2 * launch_seconds;
    rates.gemm_flops = flops;
    rates.conv_fixed_seconds = 2 * launch_seconds;
    rates.conv_flops = flops / 2;
    rates.reduce_bytes = reduce_bytes;
    rates.upload_pageable_bytes = copy_bytes;
    rates.upload_pinned_bytes = pinned_bytes;
    rates.download_bytes = copy_bytes;
    rates.transfer_seconds = copy_seconds;
    rates.download_pinned_bytes = pinned_bytes;
    return rates;
}

/* The generic selector parts a backend's devices answer to, in
 * locus_backend.selector_parts: "name:N" (device N of the backend) and
 * "name:cpu", "name:gpu", "name:accelerator" (the first device of that
 * locus_device_kind). The runtime matches them itself. */
#define LOCUS_SELECTOR_INDEX 1u
#define LOCUS_SELECTOR_KIND 2u

typedef struct locus_backend {
    size_t struct_size;
    uint32_t abi_version; /* LOCUS_BACKEND_ABI_VERSION */
    /* The backend's name: what LOCUS_BACKENDS and selectors call it, and a
     * module's file name (locus-<name>.so), which it must equal: 1 to 15
     * lowercase letters, digits or '_', a letter first. */
    const char *name;
    /* Nonzero: the device computes on host memory; ops receive host pointers
     * and the memory functions below may be NULL. */
    int host_memory;

    /* Finds devices. On failure or when no device is found, returns a
     * negative status or sets *device_count to 0 and writes why into reason;
     * the backend is then absent. */
    locus_status (*init)(const locus_services *services, void *runtime,
                         void **state, size_t *device_count, char *reason,
                         size_t reason_size);
    void (*fini)(void *state);
    /* Fills everything but selector, which the runtime assigns; info
     * arrives zeroed by locus_device_info_init, so a field a backend does
     * not know stays empty (pci_bus_id: set it with
     * locus_device_info_set_pci where the device has a PCI address). The CPU
     * backend's device 0 is all workers; device i >= 1 is the workers of the
     * NUMA node at position i - 1, present only on machines of two or more
     * nodes. */
    locus_status (*device_info)(void *state, size_t device,
                                locus_device_info *info);

    /* Device memory. Handles are opaque to the runtime. */
    locus_status (*alloc)(void *state, size_t device, size_t bytes,
                          void **memory);
    void (*free)(void *state, size_t device, void *memory);
    locus_status (*upload)(void *state, size_t device, void *memory,
                           const void *host, size_t bytes,
                           locus_op_context *op);
    locus_status (*download)(void *state, size_t device, const void *memory,
                             void *host, size_t bytes, locus_op_context *op);

    /* Ops; NULL: not offered on this backend. Descriptors arrive validated
     * against the buffers, with leading dimensions made explicit. Each op
     * finishes before it returns. gemm never sees m or n 0, nor alpha or
     * k 0 with beta 1 (the runtime returns at once); for alpha or k 0 it
     * gets a and b NULL and must set C = beta C without reading C where
     * beta is 0 (C = 0, NaN or not), the BLAS rules of locus.h. alpha is
     * 0 as the op computes with it: an f32 or half op's alpha that rounds
     * to 0 in f32 (1e-300) is 0, so test a == NULL, not desc->alpha. */
    locus_status (*reduce)(void *state, size_t device,
                           const locus_reduce_desc *desc, const void *x,
                           double *result, locus_op_context *op);
    locus_status (*gemm)(void *state, size_t device,
                         const locus_gemm_desc *desc, const void *a,
                         const void *b, void *c, locus_op_context *op);
    locus_status (*conv2d)(void *state, size_t device,
                           const locus_conv2d_desc *desc, const void *input,
                           const void *filter, void *output,
                           locus_op_context *op);

    /* Optional (NULL: the backend has no such notion). Page-locks host
     * memory so that copies from it need no staging; calibration measures
     * the pinned host -> device rate with it. unpin undoes pin. */
    locus_status (*pin)(void *state, size_t device, void *host, size_t bytes);
    void (*unpin)(void *state, size_t device, void *host);

    /* ---- what the backend says of itself (ABI 2) ----------------------
     * Selectors are "name", "name:N", "name:KIND" or "name:PART". "name"
     * is the backend's first device; N and KIND are matched by the
     * runtime where selector_parts has LOCUS_SELECTOR_INDEX or
     * LOCUS_SELECTOR_KIND; anything else after the colon is the backend's
     * own part (key=value, such as the cpu's "numa=1"). */
    unsigned selector_parts;
    /* Optional (NULL: the backend has no part of its own, and a selector
     * with one is refused). With state NULL, before the backend starts:
     * 0 when `part` is one this backend takes, -1 when not, with why
     * written ("numa=x is not numa=N"). With state: 1 when device matches
     * it, 0 when not; when no device matches, the runtime quotes the last
     * why written (say what there is: "no NUMA node 7: this machine has
     * nodes 0,1"). A backend with a part keeps a non-NULL state, since
     * NULL means "parse only". */
    int (*selector_part)(void *state, size_t device, const char *part,
                         char *why, size_t why_size);
    /* Optional: the device's canonical selector after "name:" ("numa=1"),
     * or "" for the bare name. NULL: "name:N", N its index. */
    void (*device_selector)(void *state, size_t device, char *part,
                            size_t capacity);

    /* Optional: the nominal figures of a device (info as device_info
     * filled it; rates arrive zeroed). NULL: the runtime's generic ones
     * for a device of this kind and memory (docs/SCHEDULER.md). */
    void (*nominal_rates)(void *state, size_t device,
                          const locus_device_info *info,
                          locus_backend_rates *rates);

    /* Optional: for a host-memory backend whose ops run on the runtime's
     * worker pool (services->run), the OS NUMA node whose workers run
     * device's ops, or -1 for the whole pool. The cost model then adds the
     * pool's wake-up when those workers sleep, and calibration derives a
     * node's device's figures from the whole pool's. NULL: the backend's
     * ops do not run on the pool (they have threads of their own). */
    int (*pool_node)(void *state, size_t device);
    /* For a backend on the pool: a job below these, gemm and conv2d by
     * flops, reduce by the bytes it reads, runs on the calling thread
     * (services->run_here) and wakes no worker. 0: every job goes to the
     * pool. */
    double inline_flops;
    double inline_bytes;

    /* Optional: whether device offers an op of this kind (locus_op_kind)
     * with this algorithm (conv2d's locus_conv_algorithm; 0 for reduce
     * and gemm) and dtype: 1 yes, 0 no. The scheduler never sends an op
     * to a device that answers 0, and locus_device_offers reports it. A
     * limit of the shape is no part of this: an op refused for its shape
     * (LOCUS_ERROR_NOT_SUPPORTED) still moves on to another device. NULL:
     * every algorithm of the ops whose function is not NULL, in f32 only
     * (a module that computes in another dtype says so here; one that
     * does not is never handed bytes of a type it would read as floats). */
    int (*offers)(void *state, size_t device, locus_op_kind op, int algorithm,
                  locus_dtype dtype);

    /* ---- conv2d as layers use it (ABI 3) -------------------------------
     * The LOCUS_CONV_FEATURE_* bits this backend's conv2d_layer takes. A
     * conv2d request that uses none of them (locus.h, locus_conv2d_desc)
     * goes to conv2d as in ABI 2; one that uses any goes to conv2d_layer,
     * and only on a device whose backend has every feature it uses (the
     * scheduler passes the others by). conv2d_layer NULL or features 0:
     * conv2d as in 0.2 only. The descriptor arrives resolved: struct_size
     * the runtime's, groups and dilations at least 1, pad_bottom and
     * pad_right explicit, checked against the buffers; bias NULL (none) or
     * out_channels elements of the output's dtype. */
    unsigned conv2d_features;
    locus_status (*conv2d_layer)(void *state, size_t device,
                                 const locus_conv2d_desc *desc,
                                 const void *input, const void *filter,
                                 const void *bias, void *output,
                                 locus_op_context *op);

    /* ---- device memory the application owns (appended in 0.3) ---------
     * Optional (NULL: the backend cannot use memory it did not allocate,
     * and locus_buffer_wrap_device refuses its devices). Appended: the
     * runtime reads wrap and unwrap only from a table whose struct_size
     * covers them. wrap checks that the `bytes` at `memory` are memory of
     * `device` its ops can use, and returns LOCUS_ERROR_INVALID_ARGUMENT
     * with a message saying what they are otherwise (host memory, another
     * device's, unknown to the driver); on success *handle is a handle
     * that upload, download and the ops take as they take alloc's. The
     * runtime never passes a wrapped handle to free: it calls unwrap
     * (NULL: nothing to release) when the buffer is destroyed, and the
     * memory stays the caller's. */
    locus_status (*wrap)(void *state, size_t device, void *memory, size_t bytes,
                         void **handle);
    void (*unwrap)(void *state, size_t device, void *handle);

    /* ---- uploads beside compute (appended in 0.3) ---------------------
     * Optional, both or neither (NULL: a queue's inputs are uploaded by
     * the ops that read them, as before); the runtime reads them only
     * from a table whose struct_size covers them. For a queue's next op
     * (docs/SCHEDULER.md, "Overlapped uploads"): prefetch starts copying
     * `bytes` of host memory to `memory` (from alloc) on a copy engine
     * beside the one the device's ops compute on, and hands back a ticket
     * for it. The runtime calls it from a thread of its own while an op
     * may be running on the same device: it may block while it stages
     * pageable host memory, but must not wait for that op. Until the
     * ticket is waited for, the runtime leaves the host memory unchanged
     * and the device memory unused. prefetch_wait returns once the copy is
     * complete, with its status (after a failure the device memory's
     * content is undefined), and releases the ticket: every ticket is
     * waited for exactly once. A failed prefetch hands back no ticket. */
    locus_status (*prefetch)(void *state, size_t device, void *memory,
                             const void *host, size_t bytes, void **ticket);
    locus_status (*prefetch_wait)(void *state, size_t device, void *ticket);

    /* ---- write-backs beside compute (appended in 0.3) -----------------
     * Optional (NULL: a queued op's result stays on the device until it
     * is read, as before); read only from a table whose struct_size covers
     * it, and only with prefetch and prefetch_wait. For a queue's op that
     * has returned (docs/SCHEDULER.md, "Overlapped uploads"): starts
     * copying `bytes` of `memory` (from alloc, holding that op's result)
     * to `host` on a copy engine of the direction device to host, beside
     * the uploads and the ops, from a thread of the runtime's while the
     * next op may run; the same rules as prefetch (it may block while it
     * stages pageable memory, must not wait for a running op). The ticket
     * is waited for with prefetch_wait; until then the runtime leaves the
     * device memory unchanged and the host memory unread, and after a
     * failure the host memory's content is undefined. */
    locus_status (*prefetch_to_host)(void *state, size_t device, void *host,
                                     const void *memory, size_t bytes,
                                     void **ticket);
} locus_backend;

/* What a conv2d request uses beyond 0.2's convolution. */
#define LOCUS_CONV_FEATURE_GROUPS 1u             /* groups > 1 */
#define LOCUS_CONV_FEATURE_DILATION 2u           /* a dilation > 1 */
#define LOCUS_CONV_FEATURE_ASYMMETRIC_PADDING 4u /* bottom != top, ... */
#define LOCUS_CONV_FEATURE_BIAS 8u               /* a bias buffer */
#define LOCUS_CONV_FEATURE_ACTIVATION 16u        /* not NONE */
#define LOCUS_CONV_FEATURE_NHWC 32u              /* either layout NHWC */
#define LOCUS_CONV_FEATURES_ALL 63u

/* The LOCUS_CONV_FEATURE_* bits a resolved conv2d request uses (bias the
 * bias buffer's memory, NULL for none): what a backend's conv2d_layer
 * checks its algorithms against. */
static inline unsigned locus_conv2d_features_used(const locus_conv2d_desc *d,
                                                  const void *bias)
{
    unsigned f = 0;
    f |= d->groups > 1 ? LOCUS_CONV_FEATURE_GROUPS : 0;
    f |= d->dilation_h > 1 || d->dilation_w > 1 ? LOCUS_CONV_FEATURE_DILATION
                                                : 0;
    f |= d->pad_bottom != d->pad_h || d->pad_right != d->pad_w
             ? LOCUS_CONV_FEATURE_ASYMMETRIC_PADDING
             : 0;
    f |= bias ? LOCUS_CONV_FEATURE_BIAS : 0;
    f |= d->activation != LOCUS_ACTIVATION_NONE ? LOCUS_CONV_FEATURE_ACTIVATION
                                                : 0;
    f |= d->input_layout == LOCUS_LAYOUT_NHWC ||
                 d->output_layout == LOCUS_LAYOUT_NHWC
             ? LOCUS_CONV_FEATURE_NHWC
             : 0;
    return f;
}

#if defined(__GNUC__)
#define LOCUS_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define LOCUS_BACKEND_EXPORT
#endif

/* The one symbol a backend module exports, as
 * LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void); */
typedef const locus_backend *(*locus_backend_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* LOCUS_BACKEND_H */
