/*
 * The OpenCL backend module: finds every device of every platform the ICD
 * loader offers (opencl_probe.c), describes it, and moves memory to and from
 * it. Ops come in later; until then the ops table leaves them NULL ("not
 * offered").
 *
 * Contexts and command queues are made at the first memory call on a device,
 * not at init: with NVIDIA's OpenCL each context is a CUDA context (device
 * memory, a fraction of a second), and `locus info` or a run that never
 * touches the device should not pay for one per GPU. They are then kept for
 * the life of the process (opencl_queues.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_errors.h"
#include "opencl_internal.h"
#include "opencl_queues.h"

/* Allocation failures are the caller's to handle (fall back to another
 * device); everything else is the backend failing. */
locus_status locus__opencl_status_of(cl_int code)
{
    switch (code) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
        return LOCUS_ERROR_DEVICE_OUT_OF_MEMORY;
    case CL_OUT_OF_HOST_MEMORY:
        return LOCUS_ERROR_OUT_OF_MEMORY;
    default:
        return LOCUS_ERROR_BACKEND;
    }
}

static int services_usable(const locus_services *services)
{
    size_t needed = offsetof(locus_services, cpuset_numa_mask) +
                    sizeof services->cpuset_numa_mask;
    return services != NULL && services->struct_size >= needed &&
           services->fail != NULL && services->log != NULL &&
           services->pci_numa_mask != NULL &&
           services->cpuset_numa_mask != NULL;
}

static void opencl_fini(void *opaque);

/* PoCL's CPU device starts one thread per online core at its platform
 * init, and Locus's pool has one worker per allowed core: a CPU op and a
 * PoCL op at once, or PoCL inside a `taskset` or `mpirun --bind-to` cpuset,
 * would put two or more threads on each core. So before the first
 * clGetPlatformIDs (which is when PoCL reads these), PoCL is limited to
 * the pool's core count, unless the user set a limit. Ops are synchronous,
 * so one application thread never runs both at once; two application
 * threads can (docs/ARCHITECTURE.md, "OpenCL and the CPU workers"). It has
 * no effect when OpenCL was initialized in the process before Locus. */
static void limit_cpu_threads(const locus_services *services, void *runtime)
{
    if (services->worker_count == NULL)
        return;
    int workers = services->worker_count(runtime, -1);
    if (workers <= 0)
        return;
    char value[16];
    snprintf(value, sizeof value, "%d", workers);
    const char *names[] = {"POCL_CPU_MAX_CU_COUNT", "POCL_MAX_PTHREAD_COUNT"};
    if (getenv(names[0]) != NULL || getenv(names[1]) != NULL)
        return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (setenv(names[i], value, 0) != 0)
            services->log(runtime, LOCUS_LOG_WARN,
                          "opencl: setenv(%s) failed; PoCL may start a "
                          "thread per online core",
                          names[i]);
    services->log(runtime, LOCUS_LOG_DEBUG,
                  "opencl: PoCL limited to %d threads (the worker pool's "
                  "cores)",
                  workers);
}

static locus_status opencl_init(const locus_services *services, void *runtime,
                                void **state_out, size_t *device_count,
                                char *reason, size_t reason_size)
{
    if (state_out == NULL || device_count == NULL ||
        (reason == NULL && reason_size > 0))
        return LOCUS_ERROR_NULL_ARGUMENT;
    *state_out = NULL;
    *device_count = 0;
    if (reason_size > 0)
        reason[0] = '\0';
    if (!services_usable(services)) {
        if (reason_size > 0)
            snprintf(reason, reason_size,
                     "the runtime's services table is too old for this "
                     "module");
        return LOCUS_ERROR_PLUGIN;
    }

    limit_cpu_threads(services, runtime);

    /* An ICD loader without any vendor file answers CL_PLATFORM_NOT_FOUND_KHR
     * rather than zero platforms; both mean the same to us. */
    cl_uint platform_count = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &platform_count);
    if (err != CL_SUCCESS || platform_count == 0) {
        if (reason_size > 0) {
            if (err == CL_SUCCESS)
                snprintf(reason, reason_size,
                         "no OpenCL platform found (clGetPlatformIDs: 0 "
                         "platforms)");
            else
                snprintf(reason, reason_size,
                         "no OpenCL platform found (clGetPlatformIDs: %s)",
                         locus__opencl_error_name(err));
        }
        return LOCUS_SUCCESS;
    }
    cl_platform_id *platforms = malloc(platform_count * sizeof *platforms);
    if (platforms == NULL)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "opencl: out of host memory listing %u "
                              "platforms",
                              (unsigned)platform_count);
    err = clGetPlatformIDs(platform_count, platforms, NULL);
    if (err != CL_SUCCESS) {
        free(platforms);
        if (reason_size > 0)
            snprintf(reason, reason_size,
                     "no OpenCL platform found (clGetPlatformIDs: %s)",
                     locus__opencl_error_name(err));
        return LOCUS_SUCCESS;
    }

    opencl_state *state = calloc(1, sizeof *state);
    if (state == NULL) {
        free(platforms);
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "opencl: out of host memory");
    }
    state->services = services;
    state->runtime = runtime;

    size_t capacity = 0;
    char note[256] = "";
    for (cl_uint p = 0; p < platform_count; p++)
        locus__opencl_add_platform(state, platforms[p], &capacity, note,
                                   sizeof note);
    free(platforms);

    if (state->count == 0) {
        if (reason_size > 0)
            snprintf(reason, reason_size,
                     "no OpenCL device found on %u platform%s (%s)",
                     (unsigned)platform_count, platform_count == 1 ? "" : "s",
                     note);
        opencl_fini(state);
        return LOCUS_SUCCESS;
    }
    if (reason_size > 0)
        snprintf(reason, reason_size, "%zu device%s on %u platform%s",
                 state->count, state->count == 1 ? "" : "s",
                 (unsigned)platform_count, platform_count == 1 ? "" : "s");
    *state_out = state;
    *device_count = state->count;
    return LOCUS_SUCCESS;
}

static void opencl_fini(void *opaque)
{
    opencl_state *state = opaque;
    if (state == NULL)
        return;
    for (size_t i = 0; i < state->count; i++) {
        opencl_device *device = &state->devices[i];
        /* The queue and context belong to the process (opencl_queues.c);
         * only this state's work is waited for. Every transfer blocks, so
         * this is a formality until kernels are enqueued. */
        if (device->queue != NULL)
            clFinish(device->queue);
        locus__opencl_program_release(device);
        pthread_mutex_destroy(&device->lock);
    }
    free(state->devices);
    free(state);
}

static locus_status check_device(const opencl_state *state, size_t device)
{
    if (state == NULL)
        return LOCUS_ERROR_NULL_ARGUMENT;
    if (device >= state->count)
        return state->services->fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                                     "no device opencl:%zu (%zu devices)",
                                     device, state->count);
    return LOCUS_SUCCESS;
}

static locus_status opencl_device_info(void *opaque, size_t index,
                                       locus_device_info *info)
{
    const opencl_state *state = opaque;
    locus_status status = check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    if (info == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "device info for opencl:%zu is NULL",
                                     index);
    const opencl_device *device = &state->devices[index];
    snprintf(info->backend, sizeof info->backend, "opencl");
    snprintf(info->name, sizeof info->name, "%s", device->name);
    snprintf(info->vendor, sizeof info->vendor, "%s", device->vendor);
    snprintf(info->version, sizeof info->version, "%s", device->version);
    info->kind = device->kind;
    info->nearest_numa_mask = device->numa_mask;
    info->memory_bytes = device->memory_bytes;
    info->compute_units = device->compute_units;
    info->index_in_backend = (int)index;
    if (device->has_pci_address)
        locus_device_info_set_pci(
            info, device->pci_address[0], device->pci_address[1],
            device->pci_address[2], device->pci_address[3]);
    return LOCUS_SUCCESS;
}

/* The device's context and queue (opencl_queues.c), looked up at the
 * state's first memory call on it. */
locus_status locus__opencl_device_ready(opencl_state *state, size_t index,
                                        opencl_device **out)
{
    locus_status status = check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    opencl_device *device = &state->devices[index];
    pthread_mutex_lock(&device->lock);
    if (device->queue == NULL) {
        const char *failed = "";
        cl_int err = locus__opencl_device_queue(device->platform, device->id,
                                                &device->context,
                                                &device->queue, &failed);
        if (err != CL_SUCCESS) {
            device->context = NULL;
            device->queue = NULL;
            status = state->services->fail(
                locus__opencl_status_of(err),
                "%s failed on opencl:%zu (%s): %s (%d)", failed, index,
                device->name, locus__opencl_error_name(err), (int)err);
        }
    }
    pthread_mutex_unlock(&device->lock);
    if (status == LOCUS_SUCCESS)
        *out = device;
    return status;
}

/* Room kept beyond a CPU device's buffer for the driver's own allocations
 * around it (its alignment, the command's bookkeeping). */
#define HOST_ALLOCATION_SLACK ((uint64_t)16 << 20)

static locus_status opencl_alloc(void *opaque, size_t index, size_t bytes,
                                 void **memory)
{
    opencl_state *state = opaque;
    opencl_device *device = NULL;
    locus_status status = check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    const locus_services *services = state->services;
    if (memory == NULL)
        return services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                              "alloc on opencl:%zu needs a place for the "
                              "handle",
                              index);
    *memory = NULL;
    if (bytes == 0)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "cannot allocate 0 bytes on opencl:%zu", index);
    /* A request over the device's largest single allocation (a quarter of
     * the memory on many GPUs) fails like an exhausted device, so the
     * runtime can place the work elsewhere. */
    if ((uint64_t)bytes > state->devices[index].max_alloc_bytes)
        return services->fail(
            LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
            "clCreateBuffer of %zu bytes exceeds the largest allocation of "
            "opencl:%zu (%s): CL_DEVICE_MAX_MEM_ALLOC_SIZE is %llu bytes",
            bytes, index, state->devices[index].name,
            (unsigned long long)state->devices[index].max_alloc_bytes);
    status = locus__opencl_device_ready(state, index, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    /* A CPU device's memory is this process's memory: PoCL allocates it at
     * the migration below and asserts when that fails (ulimit -v), so the
     * room is checked first (opencl_headroom.c). */
    uint64_t left = 0;
    if (device->kind == LOCUS_DEVICE_CPU &&
        !locus__opencl_address_room((uint64_t)bytes + HOST_ALLOCATION_SLACK,
                                    &left))
        return services->fail(
            LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
            "allocating %zu bytes on opencl:%zu (%s), a device whose memory "
            "is this process's, would pass the address-space limit "
            "(RLIMIT_AS, ulimit -v): %llu bytes are left",
            bytes, index, device->name, (unsigned long long)left);

    cl_int err = CL_SUCCESS;
    cl_mem buffer =
        clCreateBuffer(device->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (buffer == NULL || err != CL_SUCCESS)
        return services->fail(locus__opencl_status_of(err),
                              "clCreateBuffer of %zu bytes failed on "
                              "opencl:%zu (%s): %s (%d)",
                              bytes, index, device->name,
                              locus__opencl_error_name(err), (int)err);

    /* Implementations commit memory at first use, so an exhausted device
     * would only show in the middle of a later op. Migrating the buffer to
     * the device, contents undefined (no copy), commits it now. */
    cl_event migrated = NULL;
    err = clEnqueueMigrateMemObjects(device->queue, 1, &buffer,
                                     CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0,
                                     NULL, &migrated);
    if (err == CL_SUCCESS) {
        err = clWaitForEvents(1, &migrated);
        cl_int event_status = CL_COMPLETE;
        if (err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST &&
            clGetEventInfo(migrated, CL_EVENT_COMMAND_EXECUTION_STATUS,
                           sizeof event_status, &event_status,
                           NULL) == CL_SUCCESS &&
            event_status < 0)
            err = event_status;
        clReleaseEvent(migrated);
    }
    if (err != CL_SUCCESS) {
        clReleaseMemObject(buffer);
        return services->fail(locus__opencl_status_of(err),
                              "committing %zu bytes failed on opencl:%zu "
                              "(%s): clEnqueueMigrateMemObjects: %s (%d)",
                              bytes, index, device->name,
                              locus__opencl_error_name(err), (int)err);
    }
    *memory = buffer;
    return LOCUS_SUCCESS;
}

static void opencl_free(void *opaque, size_t index, void *memory)
{
    opencl_state *state = opaque;
    if (memory == NULL || check_device(state, index) != LOCUS_SUCCESS)
        return;
    cl_int err = clReleaseMemObject((cl_mem)memory);
    if (err != CL_SUCCESS)
        state->services->log(state->runtime, LOCUS_LOG_WARN,
                             "clReleaseMemObject failed on opencl:%zu (%s): "
                             "%s (%d)",
                             index, state->devices[index].name,
                             locus__opencl_error_name(err), (int)err);
}

/* Shared checks of upload and download; *device is set on success. */
static locus_status transfer_ready(opencl_state *state, size_t index,
                                   const void *memory, const void *host,
                                   opencl_device **device)
{
    locus_status status = check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    if (memory == NULL || host == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "%s pointer for opencl:%zu is NULL",
                                     memory == NULL ? "device" : "host", index);
    return locus__opencl_device_ready(state, index, device);
}

static locus_status opencl_upload(void *opaque, size_t index, void *memory,
                                  const void *host, size_t bytes,
                                  locus_op_context *op)
{
    opencl_state *state = opaque;
    opencl_device *device = NULL;
    if (bytes == 0 && state != NULL)
        return check_device(state, index);
    locus_status status = transfer_ready(state, index, memory, host, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    cl_int err = clEnqueueWriteBuffer(device->queue, (cl_mem)memory, CL_TRUE, 0,
                                      bytes, host, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return state->services->fail(
            locus__opencl_status_of(err),
            "clEnqueueWriteBuffer of %zu bytes failed on opencl:%zu (%s): "
            "%s (%d)",
            bytes, index, device->name, locus__opencl_error_name(err),
            (int)err);
    if (op != NULL && op->record != NULL)
        op->record->bytes_to_device += bytes;
    return LOCUS_SUCCESS;
}

static locus_status opencl_download(void *opaque, size_t index,
                                    const void *memory, void *host,
                                    size_t bytes, locus_op_context *op)
{
    opencl_state *state = opaque;
    opencl_device *device = NULL;
    if (bytes == 0 && state != NULL)
        return check_device(state, index);
    locus_status status = transfer_ready(state, index, memory, host, &device);
    if (status != LOCUS_SUCCESS)
        return status;
    /* The API takes a non-const cl_mem although reading does not modify the
     * buffer; the cast drops only the handle's const. */
    cl_mem buffer = (cl_mem)(uintptr_t)memory;
    cl_int err = clEnqueueReadBuffer(device->queue, buffer, CL_TRUE, 0, bytes,
                                     host, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return state->services->fail(
            locus__opencl_status_of(err),
            "clEnqueueReadBuffer of %zu bytes failed on opencl:%zu (%s): "
            "%s (%d)",
            bytes, index, device->name, locus__opencl_error_name(err),
            (int)err);
    if (op != NULL && op->record != NULL)
        op->record->bytes_from_device += bytes;
    return LOCUS_SUCCESS;
}

/* Nominal figures by the device's kind and compute units: a GPU's
 * launch and copies through the driver's queue, a CPU device's sharing
 * the cores with the runtime's own workers. */
static void opencl_nominal_rates(void *opaque, size_t index,
                                 const locus_device_info *info,
                                 locus_backend_rates *rates)
{
    (void)opaque, (void)index;
    int units = info->compute_units > 0 ? info->compute_units : 1;
    if (info->kind == LOCUS_DEVICE_GPU)
        *rates = locus_backend_rates_linked(30e-6, 64e9 * units, 1e12, 12e9,
                                            30e-6, 0);
    else
        *rates = locus_backend_rates_linked(50e-6, 4e9 * units, 10e9, 10e9,
                                            20e-6, 0);
}

/* Every op and conv2d algorithm, in f32. Which kernels a device gets
 * (the CPU variants have no implicit GEMM) is known only once its
 * program is built, so that refusal stays with the op, which then moves
 * on to another device; so do shapes past the kernels' limits. In f64,
 * on devices with cl_khr_fp64 (probe time): reduce, gemm, and conv2d by
 * im2col (auto takes it); nothing on the others. */
static int opencl_offers(void *opaque, size_t index, locus_op_kind op,
                         int algorithm, locus_dtype dtype)
{
    const opencl_state *state = opaque;
    if (dtype == LOCUS_DTYPE_F32)
        return 1;
    if (dtype != LOCUS_DTYPE_F64 || state == NULL || index >= state->count ||
        !state->devices[index].has_fp64)
        return 0;
    return op != LOCUS_OP_CONV2D || algorithm == LOCUS_CONV_AUTO ||
           algorithm == LOCUS_CONV_IM2COL;
}

static const locus_backend opencl_backend = {
    .struct_size = sizeof(locus_backend),
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "opencl",
    .host_memory = 0,
    .init = opencl_init,
    .fini = opencl_fini,
    .device_info = opencl_device_info,
    .alloc = opencl_alloc,
    .free = opencl_free,
    .upload = opencl_upload,
    .download = opencl_download,
    .reduce = locus__opencl_reduce,
    .gemm = locus__opencl_gemm,
    .conv2d = locus__opencl_conv2d,
    /* opencl:N, opencl:gpu, opencl:cpu, opencl:accelerator */
    .selector_parts = LOCUS_SELECTOR_INDEX | LOCUS_SELECTOR_KIND,
    .nominal_rates = opencl_nominal_rates,
    .offers = opencl_offers,
    /* Every feature, in f32 and (cl_khr_fp64) f64: opencl_conv_layer.c. */
    .conv2d_features = LOCUS_CONV_FEATURES_ALL,
    .conv2d_layer = locus__opencl_conv2d_layer,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void);

const locus_backend *locus_backend_entry(void)
{
    return &opencl_backend;
}
