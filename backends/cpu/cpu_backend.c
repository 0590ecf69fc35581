/* The CPU backend's table and its devices: device 0 is the whole worker
 * pool; on machines of two or more NUMA nodes, device i is the workers of
 * the node at position i - 1, so an application can keep work and data on
 * one node. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"
#include "conv_layer.h"
#include "cpu_internal.h"

/* The value of the first "key : value" line of /proc/cpuinfo whose key is
 * `key`; on another OS or architecture the line may be missing, and the
 * caller keeps its fallback. */
static void cpuinfo_field(const char *key, char *value, size_t capacity)
{
    FILE *file = fopen("/proc/cpuinfo", "r");
    if (!file)
        return;
    char line[512];
    size_t key_length = strlen(key);
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, key, key_length) != 0)
            continue;
        const char *rest = line + key_length;
        while (*rest == ' ' || *rest == '\t')
            rest++;
        if (*rest != ':')
            continue;
        rest++;
        while (*rest == ' ' || *rest == '\t')
            rest++;
        size_t length = strcspn(rest, "\r\n");
        if (length == 0)
            continue;
        snprintf(value, capacity, "%.*s", (int)length, rest);
        break;
    }
    fclose(file);
}

static void cpu_fini(void *state)
{
    locus__cpu_state *s = state;
    if (!s)
        return;
    locus__gemm_workspace_destroy(s->gemm_workspace);
    locus__filter_cache_destroy(s->filter_cache);
    free(s->nodes);
    free(s);
}

static locus_status cpu_init(const locus_services *services, void *runtime,
                             void **state, size_t *device_count, char *reason,
                             size_t reason_size)
{
    locus_status status;
    *state = NULL;
    *device_count = 0;

    locus__cpu_state *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(reason, reason_size, "cannot allocate the cpu state");
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate the cpu state (%zu bytes)",
                              sizeof *s);
    }
    s->services = services;
    s->runtime = runtime;

    const char *forced = services->forced_cpu_isa(runtime);
    if (!locus__cpu_isa_supported(forced)) {
        snprintf(reason, reason_size,
                 "LOCUS_CPU_ISA='%s' is not supported "
                 "by this cpu",
                 forced);
        status = services->fail(LOCUS_ERROR_UNUSABLE_ENVIRONMENT,
                                "LOCUS_CPU_ISA='%s' is not supported by this "
                                "cpu",
                                forced);
        goto free_state;
    }

    long page = sysconf(_SC_PAGESIZE);
    s->page_size = page > 0 ? (size_t)page : 4096;

    int nodes = services->numa_node_count(runtime);
    if (nodes < 0)
        nodes = 0;
    s->node_count = nodes;
    s->nodes = calloc(nodes > 0 ? (size_t)nodes : 1, sizeof *s->nodes);
    if (!s->nodes) {
        snprintf(reason, reason_size, "cannot allocate the cpu node table");
        status = services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                "cannot allocate the cpu node table "
                                "(%d nodes)",
                                nodes);
        goto free_state;
    }
    for (int i = 0; i < nodes; i++) {
        locus_numa_node_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        status = services->numa_node(runtime, i, &info);
        if (status != LOCUS_SUCCESS) {
            snprintf(reason, reason_size,
                     "numa node at position %d could not be described", i);
            goto free_state;
        }
        s->nodes[i].os_index = info.os_index;
        s->nodes[i].memory_bytes = info.memory_bytes;
    }

    locus__cpu_isa_init(&s->isa, forced);
    s->gemm_workspace = locus__gemm_workspace_create(services, runtime);
    s->filter_cache = locus__filter_cache_create(services, runtime);

    snprintf(s->model, sizeof s->model, "cpu");
    cpuinfo_field("model name", s->model, sizeof s->model);
    snprintf(s->vendor, sizeof s->vendor, "unknown");
    cpuinfo_field("vendor_id", s->vendor, sizeof s->vendor);

    /* A per-node device on a one-node machine would only duplicate
     * device 0. */
    s->device_count = nodes < 2 ? 1 : 1 + (size_t)nodes;
    *state = s;
    *device_count = s->device_count;
    return LOCUS_SUCCESS;

free_state:
    cpu_fini(s);
    return status;
}

static uint64_t node_bit(int os_index)
{
    if (os_index < 0 || os_index >= LOCUS_MAX_NUMA_NODES)
        return 0;
    return UINT64_C(1) << os_index;
}

static locus_status cpu_device_info(void *state, size_t device,
                                    locus_device_info *info)
{
    const locus__cpu_state *s = state;
    if (device >= s->device_count)
        return s->services->fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                                 "cpu device %zu does not exist (%zu devices)",
                                 device, s->device_count);

    snprintf(info->backend, sizeof info->backend, "cpu");
    snprintf(info->name, sizeof info->name, "%s", s->model);
    snprintf(info->vendor, sizeof info->vendor, "%s", s->vendor);
    info->version[0] = '\0';
    info->kind = LOCUS_DEVICE_CPU;
    info->index_in_backend = (int)device;

    uint64_t mask = 0, memory = 0;
    int node = -1;
    if (device == 0) {
        for (int i = 0; i < s->node_count; i++) {
            mask |= node_bit(s->nodes[i].os_index);
            memory += s->nodes[i].memory_bytes;
        }
    } else {
        const locus__cpu_node *n = &s->nodes[device - 1];
        node = n->os_index;
        mask = node_bit(n->os_index);
        memory = n->memory_bytes;
    }
    info->nearest_numa_mask = mask;
    info->memory_bytes = memory;
    int workers = s->services->worker_count(s->runtime, node);
    info->compute_units = workers > 0 ? workers : 0;
    return LOCUS_SUCCESS;
}

locus_status locus__cpu_device_workers(const locus__cpu_state *state,
                                       size_t device, int *node, int *workers)
{
    if (device >= state->device_count)
        return state->services->fail(
            LOCUS_ERROR_DEVICE_NOT_FOUND,
            "cpu device %zu does not exist (%zu devices)", device,
            state->device_count);
    *node = device == 0 ? -1 : state->nodes[device - 1].os_index;
    *workers = state->services->worker_count(state->runtime, *node);
    if (*workers < 1) {
        if (*node < 0)
            return state->services->fail(LOCUS_ERROR_BACKEND,
                                         "the cpu worker pool is empty");
        return state->services->fail(LOCUS_ERROR_BACKEND,
                                     "numa node %d has no cpu workers", *node);
    }
    return LOCUS_SUCCESS;
}

void locus__cpu_set_algorithm(locus_op_context *op, const char *algorithm)
{
    locus_op_set_algorithm(op, algorithm);
}

locus_status locus__cpu_check_dtype(const locus__cpu_state *state,
                                    const char *op, locus_dtype dtype)
{
    if (dtype == LOCUS_DTYPE_F32)
        return LOCUS_SUCCESS;
    if (dtype == LOCUS_DTYPE_F64)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "%s dtype f64 is not implemented on cpu "
                                     "yet",
                                     op);
    return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                 "%s dtype %d is not supported on cpu", op,
                                 (int)dtype);
}

/* ---- what the backend says of itself ------------------------------------ */

/* "numa=N": the device of the NUMA node whose OS number is N. */
static bool parse_numa_part(const char *part, int *node)
{
    if (strncmp(part, "numa=", 5) != 0)
        return false;
    const char *digits = part + 5;
    size_t length = strlen(digits);
    if (length == 0 || length > 9)
        return false;
    int value = 0;
    for (size_t i = 0; i < length; i++) {
        if (digits[i] < '0' || digits[i] > '9')
            return false;
        value = value * 10 + (digits[i] - '0');
    }
    *node = value;
    return true;
}

/* The OS numbers of the nodes, "0" or "0,1,2,3". */
static void node_list(const locus__cpu_state *s, char *text, size_t capacity)
{
    size_t used = 0;
    text[0] = '\0';
    for (int n = 0; n < s->node_count && used < capacity; n++) {
        int written = snprintf(text + used, capacity - used, "%s%d",
                               n ? "," : "", s->nodes[n].os_index);
        if (written < 0)
            break;
        used += (size_t)written;
    }
}

static int cpu_selector_part(void *state, size_t device, const char *part,
                             char *why, size_t why_size)
{
    int node;
    if (!parse_numa_part(part, &node)) {
        snprintf(why, why_size,
                 "'%s' is not numa=N (N the OS number of a NUMA node)", part);
        return -1;
    }
    const locus__cpu_state *s = state;
    if (!s)
        return 0;
    /* One node: the whole-machine device is that node's device. */
    bool match = s->device_count == 1
                     ? s->node_count == 1 && s->nodes[0].os_index == node
                     : device > 0 && device < s->device_count &&
                           s->nodes[device - 1].os_index == node;
    if (match)
        return 1;
    char nodes[256];
    node_list(s, nodes, sizeof nodes);
    snprintf(why, why_size, "no NUMA node %d: %s has node%s %s", node,
             s->services->topology_is_this_system(s->runtime) ? "this machine"
                                                              : "the topology",
             s->node_count == 1 ? "" : "s", nodes);
    return 0;
}

/* Device 0 is "cpu", device i "cpu:numa=N" for the node at position
 * i - 1. */
static void cpu_device_selector(void *state, size_t device, char *part,
                                size_t capacity)
{
    const locus__cpu_state *s = state;
    if (device == 0 || device >= s->device_count) {
        if (capacity)
            part[0] = '\0';
    } else
        snprintf(part, capacity, "numa=%d", s->nodes[device - 1].os_index);
}

static int cpu_pool_node(void *state, size_t device)
{
    const locus__cpu_state *s = state;
    if (device == 0 || device >= s->device_count)
        return -1;
    return s->nodes[device - 1].os_index;
}

/* The nominal figures know the cores, not their vector width or clock
 * (a probe measures those at the first op that needs them). The wake-up
 * is about what waking a pool of workers from deep idle adds to an op;
 * leaving it out would have the nominal model keep every mid-size op on
 * the CPU after a pause (docs/PERFORMANCE.md). */
static void cpu_nominal_rates(void *state, size_t device,
                              const locus_device_info *info,
                              locus_backend_rates *rates)
{
    (void)state, (void)device;
    int units = info->compute_units > 0 ? info->compute_units : 1;
    *rates = (locus_backend_rates){.launch_seconds = 5e-6,
                                   .gemm_fixed_seconds = 20e-6,
                                   .gemm_flops = 8e9 * units,
                                   .conv_fixed_seconds = 20e-6,
                                   .conv_flops = 4e9 * units,
                                   .reduce_bytes = 10e9,
                                   .wake_seconds = 100e-6};
}

/* Every op in f32; conv2d by im2col, MEC and the implicit GEMM (auto
 * picks among them), not Winograd. In f64: gemm and reduce, and conv2d
 * by im2col (auto takes it; MEC and the implicit GEMM are f32-only). */
static int cpu_offers(void *state, size_t device, locus_op_kind op,
                      int algorithm, locus_dtype dtype)
{
    (void)state, (void)device;
    if (dtype == LOCUS_DTYPE_F64 &&
        (op == LOCUS_OP_GEMM || op == LOCUS_OP_REDUCE))
        return 1;
    if (dtype == LOCUS_DTYPE_F64 && op == LOCUS_OP_CONV2D)
        return algorithm == LOCUS_CONV_AUTO || algorithm == LOCUS_CONV_IM2COL;
    if ((dtype == LOCUS_DTYPE_BF16 || dtype == LOCUS_DTYPE_F16) &&
        op == LOCUS_OP_GEMM)
        return 1; /* A and B in the half type, C f32 (gemm_half.c) */
    if (dtype != LOCUS_DTYPE_F32)
        return 0;
    return op != LOCUS_OP_CONV2D || algorithm != LOCUS_CONV_WINOGRAD;
}

static const locus_backend cpu_backend = {
    .struct_size = sizeof(locus_backend),
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "cpu",
    .host_memory = 1,
    .init = cpu_init,
    .fini = cpu_fini,
    .device_info = cpu_device_info,
    .alloc = NULL,
    .free = NULL,
    .upload = NULL,
    .download = NULL,
    .reduce = locus__cpu_reduce,
    .gemm = locus__cpu_gemm,
    .conv2d = locus__cpu_conv2d,
    .selector_parts = 0, /* no cpu:N, no cpu:gpu: cpu and cpu:numa=N */
    .selector_part = cpu_selector_part,
    .device_selector = cpu_device_selector,
    .nominal_rates = cpu_nominal_rates,
    .pool_node = cpu_pool_node,
    .inline_flops = LOCUS__CPU_INLINE_FLOPS,
    .inline_bytes = (double)LOCUS__CPU_INLINE_BYTES,
    .offers = cpu_offers,
    .conv2d_features = LOCUS_CONV_FEATURES_ALL,
    .conv2d_layer = locus__cpu_conv2d_layer,
};

const locus_backend *locus__cpu_backend(void)
{
    return &cpu_backend;
}
