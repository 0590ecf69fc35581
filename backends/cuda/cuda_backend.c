/*
 * The CUDA backend module: finds the CUDA devices, describes them, and owns
 * each device's stream and scratch (made at first use, freed at fini). The
 * memory entries are in cuda_memory.c, the ops in cuda_ops.c and
 * cuda_conv.c, the kernels in the .cu files.
 *
 * The CUDA runtime is linked statically, so the module needs only the driver
 * (libcuda.so.1), which the runtime library opens itself at first use; a
 * machine without one gets an absent backend with a reason, not a module
 * that fails to load.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <locus/backend.h>

#include "cuda_conv_layer.h"
#include "cuda_f64.h"
#include "cuda_half_ops.h"
#include "cuda_internal.h"

static locus_status status_of(cudaError_t err)
{
    return err == cudaErrorMemoryAllocation ? LOCUS_ERROR_DEVICE_OUT_OF_MEMORY
                                            : LOCUS_ERROR_BACKEND;
}

/* Reports a failed CUDA call as "<what> failed on cuda:N (name): <message>
 * (<enumerator>)". Also clears the error from the runtime's last-error slot,
 * so that a later cudaGetLastError after a kernel launch does not report this
 * one again (sticky errors stay regardless). */
locus_status locus__cuda_fail(const cuda_state *state, size_t index,
                              cudaError_t err, const char *what_format, ...)
{
    char what[160];
    va_list args;
    va_start(args, what_format);
    int written = vsnprintf(what, sizeof what, what_format, args);
    va_end(args);
    if (written < 0)
        what[0] = '\0';
    (void)cudaGetLastError();
    return state->services->fail(
        status_of(err), "%s failed on cuda:%zu (%s): %s (%s)", what, index,
        state->devices[index].name, cudaGetErrorString(err),
        cudaGetErrorName(err));
}

/* "major.minor" of a CUDA version number such as 13000. */
static void version_text(int version, char *out, size_t out_size)
{
    snprintf(out, out_size, "%d.%d", version / 1000, (version % 1000) / 10);
}

static void no_device_reason(cudaError_t err, char *reason, size_t reason_size)
{
    char runtime_version[16];
    version_text(CUDART_VERSION, runtime_version, sizeof runtime_version);
    if (err == cudaErrorInsufficientDriver || err == cudaErrorStubLibrary) {
        /* The same error code covers a missing driver and an old one; the
         * driver version (0 when there is no driver) tells them apart. */
        int driver = 0;
        if (cudaDriverGetVersion(&driver) != cudaSuccess)
            driver = 0;
        if (driver == 0 || err == cudaErrorStubLibrary) {
            snprintf(reason, reason_size,
                     "no CUDA driver (cudaGetDeviceCount: %s, %s)",
                     cudaGetErrorString(err), cudaGetErrorName(err));
        } else {
            char driver_version[16];
            version_text(driver, driver_version, sizeof driver_version);
            snprintf(reason, reason_size,
                     "CUDA driver %s is older than the CUDA %s runtime of "
                     "this module (cudaGetDeviceCount: %s, %s)",
                     driver_version, runtime_version, cudaGetErrorString(err),
                     cudaGetErrorName(err));
        }
        return;
    }
    if (err == cudaErrorNoDevice) {
        snprintf(reason, reason_size,
                 "no CUDA device found (cudaGetDeviceCount: %s, %s)",
                 cudaGetErrorString(err), cudaGetErrorName(err));
        return;
    }
    snprintf(reason, reason_size, "cudaGetDeviceCount failed: %s (%s)",
             cudaGetErrorString(err), cudaGetErrorName(err));
}

/* The device's PCI address: domain, bus, device, function. The bus id
 * string has the function too, which cudaDeviceProp lacks (0 then). */
static void device_pci_address(int ordinal,
                               const struct cudaDeviceProp *properties,
                               unsigned address[4])
{
    address[0] = (unsigned)properties->pciDomainID;
    address[1] = (unsigned)properties->pciBusID;
    address[2] = (unsigned)properties->pciDeviceID;
    address[3] = 0;
    char bus_id[32];
    cudaError_t err =
        cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, ordinal);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    unsigned d, b, s, f;
    if (sscanf(bus_id, "%x:%x:%x.%x", &d, &b, &s, &f) == 4) {
        address[0] = d;
        address[1] = b;
        address[2] = s;
        address[3] = f;
    }
}

static int services_usable(const locus_services *services)
{
    size_t needed = offsetof(locus_services, cpuset_numa_mask) +
                    sizeof services->cpuset_numa_mask;
    return services != NULL && services->struct_size >= needed &&
           services->fail != NULL && services->log != NULL &&
           services->pci_numa_mask != NULL;
}

static void cuda_fini(void *opaque);

static locus_status cuda_init(const locus_services *services, void *runtime,
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

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count <= 0) {
        if (reason_size > 0) {
            if (err != cudaSuccess)
                no_device_reason(err, reason, reason_size);
            else
                snprintf(reason, reason_size, "no CUDA device found");
        }
        (void)cudaGetLastError();
        return LOCUS_SUCCESS;
    }

    int driver = 0;
    char driver_version[16] = "unknown";
    if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
        version_text(driver, driver_version, sizeof driver_version);

    cuda_state *state = calloc(1, sizeof *state);
    cuda_device *devices = calloc((size_t)count, sizeof *devices);
    if (state == NULL || devices == NULL) {
        free(state);
        free(devices);
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cuda: out of host memory");
    }
    state->services = services;
    state->runtime = runtime;
    state->devices = devices;

    char note[192] = "";
    for (int ordinal = 0; ordinal < count; ordinal++) {
        struct cudaDeviceProp properties;
        err = cudaGetDeviceProperties(&properties, ordinal);
        if (err != cudaSuccess) {
            snprintf(note, sizeof note,
                     "device %d: cudaGetDeviceProperties: %s (%s)", ordinal,
                     cudaGetErrorString(err), cudaGetErrorName(err));
            services->log(runtime, LOCUS_LOG_WARN, "cuda: %s", note);
            (void)cudaGetLastError();
            continue;
        }
        /* A device in prohibited compute mode accepts no context; offering
         * it would only turn every op on it into an error. (CUDA 13 dropped
         * the mode from cudaDeviceProp; the attribute query has it.) */
        int mode = cudaComputeModeDefault;
        err = cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, ordinal);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            mode = cudaComputeModeDefault;
        }
        if (mode == cudaComputeModeProhibited) {
            snprintf(note, sizeof note,
                     "device %d (%.64s) is in prohibited compute mode", ordinal,
                     properties.name);
            services->log(runtime, LOCUS_LOG_INFO, "cuda: %s", note);
            continue;
        }
        cuda_device *device = &devices[state->count];
        device->ordinal = ordinal;
        /* Names are far shorter than cudaDeviceProp's 256 bytes; the
         * precision only bounds the copy. */
        snprintf(device->name, sizeof device->name, "%.*s",
                 (int)sizeof device->name - 1, properties.name);
        snprintf(device->version, sizeof device->version, "sm_%d%d, driver %s",
                 properties.major, properties.minor, driver_version);
        device->compute_units = properties.multiProcessorCount;
        device->cc_major = properties.major;
        device->cc_minor = properties.minor;
        device->memory_bytes = properties.totalGlobalMem;
        device_pci_address(ordinal, &properties, device->pci_address);
        /* The nodes nearest the device's PCI slot. */
        device->numa_mask = services->pci_numa_mask(
            runtime, device->pci_address[0], device->pci_address[1],
            device->pci_address[2], device->pci_address[3]);
        services->log(runtime, LOCUS_LOG_DEBUG,
                      "cuda: device %zu: %s (%s), %d SMs, %llu bytes",
                      state->count, device->name, device->version,
                      device->compute_units,
                      (unsigned long long)device->memory_bytes);
        pthread_mutex_init(&device->lock, NULL);
        state->count++;
    }

    if (state->count == 0) {
        if (reason_size > 0)
            snprintf(reason, reason_size, "no usable CUDA device among %d (%s)",
                     count, note);
        cuda_fini(state);
        return LOCUS_SUCCESS;
    }
    if (reason_size > 0) {
        char runtime_version[16];
        version_text(CUDART_VERSION, runtime_version, sizeof runtime_version);
        snprintf(reason, reason_size,
                 "%zu device%s, driver %s, runtime %s (static)", state->count,
                 state->count == 1 ? "" : "s", driver_version, runtime_version);
    }
    *state_out = state;
    *device_count = state->count;
    return LOCUS_SUCCESS;
}

/* No cudaDeviceReset: the primary context is shared with any CUDA code of
 * the application in the same process, and resetting it would free that
 * code's memory too. Memory Locus allocated has been freed by the runtime
 * before fini. */
static void cuda_fini(void *opaque)
{
    cuda_state *state = opaque;
    if (state == NULL)
        return;
    for (size_t i = 0; i < state->count; i++) {
        locus__cuda_release_prefetch(state, i);
        locus__cuda_release(state, i);
        pthread_mutex_destroy(&state->devices[i].lock);
    }
    free(state->devices);
    free(state);
}

locus_status locus__cuda_check_device(const cuda_state *state, size_t index)
{
    if (state == NULL)
        return LOCUS_ERROR_NULL_ARGUMENT;
    if (index >= state->count)
        return state->services->fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                                     "no device cuda:%zu (%zu devices)", index,
                                     state->count);
    return LOCUS_SUCCESS;
}

static locus_status cuda_device_info(void *opaque, size_t index,
                                     locus_device_info *info)
{
    const cuda_state *state = opaque;
    locus_status status = locus__cuda_check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    if (info == NULL)
        return state->services->fail(LOCUS_ERROR_NULL_ARGUMENT,
                                     "device info for cuda:%zu is NULL", index);
    const cuda_device *device = &state->devices[index];
    snprintf(info->backend, sizeof info->backend, "cuda");
    snprintf(info->name, sizeof info->name, "%s", device->name);
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
    snprintf(info->version, sizeof info->version, "%s", device->version);
    info->kind = LOCUS_DEVICE_GPU;
    info->nearest_numa_mask = device->numa_mask;
    info->memory_bytes = device->memory_bytes;
    info->compute_units = device->compute_units;
    info->index_in_backend = (int)index;
    locus_device_info_set_pci(info, device->pci_address[0],
                              device->pci_address[1], device->pci_address[2],
                              device->pci_address[3]);
    return LOCUS_SUCCESS;
}

/* The current device is per host thread, and the runtime calls from any
 * application thread, so every entry point selects its device first. */
static locus_status select_device(const cuda_state *state, size_t index)
{
    locus_status status = locus__cuda_check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    cudaError_t err = cudaSetDevice(state->devices[index].ordinal);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err, "cudaSetDevice(%d)",
                                state->devices[index].ordinal);
    return LOCUS_SUCCESS;
}

/* Stream and staging events, once per device. The stream does not
 * synchronize with the legacy default stream, so CUDA work of the
 * application on that stream does not serialize with Locus's. */
static locus_status make_stream(const cuda_state *state, size_t index,
                                cuda_device *device)
{
    cudaError_t err =
        cudaStreamCreateWithFlags(&device->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err, "cudaStreamCreate");
    for (int slot = 0; slot < LOCUS_CUDA_STAGING_SLOTS; slot++) {
        err = cudaEventCreateWithFlags(&device->slot_done[slot],
                                       cudaEventDisableTiming);
        if (err != cudaSuccess) {
            locus_status status =
                locus__cuda_fail(state, index, err, "cudaEventCreate");
            while (slot-- > 0)
                (void)cudaEventDestroy(device->slot_done[slot]);
            (void)cudaStreamDestroy(device->stream);
            return status;
        }
    }
    device->ready = 1;
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_begin(cuda_state *state, size_t index,
                               cuda_device **device_out)
{
    locus_status status = locus__cuda_check_device(state, index);
    if (status != LOCUS_SUCCESS)
        return status;
    cuda_device *device = &state->devices[index];
    pthread_mutex_lock(&device->lock);
    status = select_device(state, index);
    if (status == LOCUS_SUCCESS && !device->ready)
        status = make_stream(state, index, device);
    if (status != LOCUS_SUCCESS) {
        pthread_mutex_unlock(&device->lock);
        return status;
    }
    *device_out = device;
    return LOCUS_SUCCESS;
}

void locus__cuda_end(cuda_device *device)
{
    pthread_mutex_unlock(&device->lock);
}

locus_status locus__cuda_sync(const cuda_state *state, size_t index,
                              const char *what)
{
    cudaError_t err = cudaStreamSynchronize(state->devices[index].stream);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err, "%s", what);
    return LOCUS_SUCCESS;
}

locus_status locus__cuda_workspace(const cuda_state *state, size_t index,
                                   size_t bytes, void **memory)
{
    cuda_device *device = &state->devices[index];
    if (bytes <= device->workspace_bytes && device->workspace != NULL) {
        *memory = device->workspace;
        return LOCUS_SUCCESS;
    }
    /* The old workspace may still be read by queued kernels. */
    locus_status status = locus__cuda_sync(state, index, "workspace growth");
    if (status != LOCUS_SUCCESS)
        return status;
    if (device->workspace != NULL) {
        (void)cudaFree(device->workspace);
        device->workspace = NULL;
        device->workspace_bytes = 0;
    }
    void *pointer = NULL;
    cudaError_t err = cudaMalloc(&pointer, bytes);
    if (err != cudaSuccess)
        return locus__cuda_fail(state, index, err,
                                "cudaMalloc of a %zu-byte workspace", bytes);
    device->workspace = pointer;
    device->workspace_bytes = bytes;
    *memory = pointer;
    return LOCUS_SUCCESS;
}

void locus__cuda_release(const cuda_state *state, size_t index)
{
    cuda_device *device = &state->devices[index];
    if (!device->ready)
        return;
    if (cudaSetDevice(device->ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    (void)cudaStreamSynchronize(device->stream);
    locus__cuda_release_staging(state, device);
    if (device->result_host != NULL)
        (void)cudaFreeHost(device->result_host);
    if (device->reduce_scratch != NULL)
        (void)cudaFree(device->reduce_scratch);
    if (device->workspace != NULL)
        (void)cudaFree(device->workspace);
    for (int slot = 0; slot < LOCUS_CUDA_STAGING_SLOTS; slot++)
        (void)cudaEventDestroy(device->slot_done[slot]);
    (void)cudaStreamDestroy(device->stream);
    (void)cudaGetLastError();
    device->result_host = NULL;
    device->result_mapped = NULL;
    device->reduce_scratch = NULL;
    device->workspace = NULL;
    device->workspace_bytes = 0;
    device->ready = 0;
}

void locus__cuda_set_algorithm(locus_op_context *op, const char *algorithm)
{
    locus_op_set_algorithm(op, algorithm);
}

/* The nominal figures of a CUDA GPU by its SMs: a launch of about ten
 * microseconds and the copy rates of a PCIe link, pinned copies about
 * twice the pageable ones. */
static void cuda_nominal_rates(void *state, size_t index,
                               const locus_device_info *info,
                               locus_backend_rates *rates)
{
    (void)state, (void)index;
    int units = info->compute_units > 0 ? info->compute_units : 1;
    *rates = locus_backend_rates_linked(10e-6, 128e9 * units, 1e12, 12e9, 10e-6,
                                        25e9);
}

/* Every op and conv2d algorithm, in f32; shapes past the kernels' limits
 * are refused by the ops themselves. */
static int cuda_offers(void *state, size_t index, locus_op_kind op,
                       int algorithm, locus_dtype dtype)
{
    (void)state, (void)index;
    if (locus__cuda_half_dtype(dtype))
        return locus__cuda_half_offers(op, algorithm);
    if (dtype == LOCUS_DTYPE_F64)
        return locus__cuda_offers_f64(op, algorithm);
    (void)op, (void)algorithm;
    return dtype == LOCUS_DTYPE_F32;
}

static const locus_backend cuda_backend = {
    .struct_size = sizeof(locus_backend),
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "cuda",
    .host_memory = 0,
    .init = cuda_init,
    .fini = cuda_fini,
    .device_info = cuda_device_info,
    .alloc = locus__cuda_alloc,
    .free = locus__cuda_free,
    .upload = locus__cuda_upload,
    .download = locus__cuda_download,
    .reduce = locus__cuda_reduce_op,
    .gemm = locus__cuda_gemm_op,
    .conv2d = locus__cuda_conv2d_op,
    .pin = locus__cuda_pin,
    .unpin = locus__cuda_unpin,
    .selector_parts = LOCUS_SELECTOR_INDEX, /* cuda:N */
    .nominal_rates = cuda_nominal_rates,
    .offers = cuda_offers,
    .conv2d_features = LOCUS_CONV_FEATURES_ALL,
    .conv2d_layer = locus__cuda_conv2d_layer_op,
    .prefetch = locus__cuda_prefetch,
    .prefetch_wait = locus__cuda_prefetch_wait,
    .prefetch_to_host = locus__cuda_prefetch_to_host,
    .wrap = locus__cuda_wrap, /* no unwrap: a wrap holds nothing */
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void);

const locus_backend *locus_backend_entry(void)
{
    return &cuda_backend;
}
