/*
 * Finding and describing OpenCL devices: names, versions, kind, size, and
 * the NUMA nodes nearest each, from the PCI location extensions for GPUs
 * and from the allowed cpuset for CPU devices.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_errors.h"
#include "opencl_internal.h"

/* PCI location extensions. Defined here rather than taken from cl_ext.h so
 * the module builds against headers older than the extension; the values and
 * layouts are those of the extension specifications. */
#define PCI_BUS_INFO_KHR 0x410F /* cl_khr_pci_bus_info */
#define PCI_BUS_ID_NV 0x4008    /* cl_nv_device_attribute_query */
#define PCI_SLOT_ID_NV 0x4009   /* (device << 3) | function */
#define PCI_DOMAIN_ID_NV 0x400A /* NVIDIA drivers since CUDA 10.2 */
#define TOPOLOGY_AMD 0x4037     /* cl_amd_device_attribute_query */
#define TOPOLOGY_TYPE_PCIE_AMD 1

typedef struct pci_bus_info_khr {
    cl_uint domain;
    cl_uint bus;
    cl_uint device;
    cl_uint function;
} pci_bus_info_khr;

typedef union topology_amd {
    struct {
        cl_uint type;
        cl_uint data[5];
    } raw;
    struct {
        cl_uint type;
        cl_char unused[17];
        cl_char bus;
        cl_char device;
        cl_char function;
    } pcie;
} topology_amd;

/* A string property of any length, malloc'ed; NULL with *err set on
 * failure. */
static char *device_string_copy(cl_device_id device, cl_device_info param,
                                cl_int *err)
{
    size_t size = 0;
    *err = clGetDeviceInfo(device, param, 0, NULL, &size);
    if (*err != CL_SUCCESS)
        return NULL;
    char *text = malloc(size + 1);
    if (text == NULL) {
        *err = CL_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    *err = clGetDeviceInfo(device, param, size, text, NULL);
    if (*err != CL_SUCCESS) {
        free(text);
        return NULL;
    }
    text[size] = '\0';
    return text;
}

/* A string property truncated to fit out. */
static cl_int device_string(cl_device_id device, cl_device_info param,
                            char *out, size_t out_size)
{
    cl_int err;
    out[0] = '\0';
    char *text = device_string_copy(device, param, &err);
    if (text == NULL)
        return err;
    snprintf(out, out_size, "%s", text);
    free(text);
    return CL_SUCCESS;
}

static cl_int platform_string(cl_platform_id platform, cl_platform_info param,
                              char *out, size_t out_size)
{
    size_t size = 0;
    out[0] = '\0';
    cl_int err = clGetPlatformInfo(platform, param, 0, NULL, &size);
    if (err != CL_SUCCESS)
        return err;
    char *text = malloc(size + 1);
    if (text == NULL)
        return CL_OUT_OF_HOST_MEMORY;
    err = clGetPlatformInfo(platform, param, size, text, NULL);
    if (err == CL_SUCCESS) {
        text[size] = '\0';
        snprintf(out, out_size, "%s", text);
    }
    free(text);
    return err;
}

/* Extension lists are space separated; a plain strstr would let
 * "cl_khr_fp16" match "cl_khr_fp1". */
static int has_extension(const char *list, const char *name)
{
    size_t length = strlen(name);
    for (const char *at = list; (at = strstr(at, name)) != NULL; at += length) {
        int starts = at == list || at[-1] == ' ';
        int ends = at[length] == '\0' || at[length] == ' ';
        if (starts && ends)
            return 1;
    }
    return 0;
}

/* The standard extension first, then the vendor ones it superseded (the same
 * order of preference as hwloc's, which reads only the vendor ones).
 * *domain_known is 0 when the domain is a guess (0): good enough for NUMA
 * locality, not to say two devices are the same hardware. */
static int device_pci_address(cl_device_id device, const char *extensions,
                              unsigned address[4], int *domain_known)
{
    *domain_known = 1;
    if (has_extension(extensions, "cl_khr_pci_bus_info")) {
        pci_bus_info_khr info;
        if (clGetDeviceInfo(device, PCI_BUS_INFO_KHR, sizeof info, &info,
                            NULL) == CL_SUCCESS) {
            address[0] = info.domain;
            address[1] = info.bus;
            address[2] = info.device;
            address[3] = info.function;
            return 1;
        }
    }
    if (has_extension(extensions, "cl_amd_device_attribute_query")) {
        topology_amd topology;
        if (clGetDeviceInfo(device, TOPOLOGY_AMD, sizeof topology, &topology,
                            NULL) == CL_SUCCESS &&
            topology.raw.type == TOPOLOGY_TYPE_PCIE_AMD) {
            /* The extension has no domain; the fields are signed chars, so
             * bus 0x80 and up must not be sign-extended. */
            address[0] = 0;
            *domain_known = 0;
            address[1] = (unsigned char)topology.pcie.bus;
            address[2] = (unsigned char)topology.pcie.device;
            address[3] = (unsigned char)topology.pcie.function;
            return 1;
        }
    }
    if (has_extension(extensions, "cl_nv_device_attribute_query")) {
        cl_uint bus = 0, slot = 0, domain = 0;
        if (clGetDeviceInfo(device, PCI_BUS_ID_NV, sizeof bus, &bus, NULL) ==
                CL_SUCCESS &&
            clGetDeviceInfo(device, PCI_SLOT_ID_NV, sizeof slot, &slot, NULL) ==
                CL_SUCCESS) {
            /* Older drivers lack the domain query; domain 0 is then the
             * only sensible guess. */
            if (clGetDeviceInfo(device, PCI_DOMAIN_ID_NV, sizeof domain,
                                &domain, NULL) != CL_SUCCESS) {
                domain = 0;
                *domain_known = 0;
            }
            address[0] = domain;
            address[1] = bus & 0xff;
            address[2] = slot >> 3;
            address[3] = slot & 7;
            return 1;
        }
    }
    return 0;
}

static locus_device_kind kind_of(cl_device_type type)
{
    if (type & CL_DEVICE_TYPE_GPU)
        return LOCUS_DEVICE_GPU;
    if (type & CL_DEVICE_TYPE_CPU)
        return LOCUS_DEVICE_CPU;
    return LOCUS_DEVICE_ACCELERATOR;
}

/* "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, ..." is too long
 * for the info's version field; what precedes the first comma names the
 * implementation and its release, which is what a reader of `locus info`
 * needs. Runs of blanks collapse to one. */
static void short_platform_version(const char *full, char *out, size_t out_size)
{
    size_t length = 0;
    int blank = 0;
    for (const char *at = full; *at != '\0' && *at != ','; at++) {
        if (*at == ' ' || *at == '\t') {
            blank = 1;
            continue;
        }
        if (blank && length > 0 && length + 1 < out_size)
            out[length++] = ' ';
        blank = 0;
        if (length + 1 < out_size)
            out[length++] = *at;
    }
    out[length] = '\0';
}

static const char *device_type_name(locus_device_kind kind)
{
    return kind == LOCUS_DEVICE_GPU   ? "gpu"
           : kind == LOCUS_DEVICE_CPU ? "cpu"
                                      : "accelerator";
}

/* Fills device from the OpenCL queries. A failing query of a property Locus
 * needs makes the device unusable; the caller skips it. */
static cl_int describe_device(const opencl_state *state,
                              cl_platform_id platform,
                              const char *platform_version, cl_device_id id,
                              opencl_device *device, const char **failed)
{
    cl_int err;
    device->platform = platform;
    device->id = id;

    cl_device_type type = 0;
    cl_uint units = 0;
    cl_ulong memory = 0, max_alloc = 0;
    char driver[64];

#define QUERY(call, what)                                                      \
    do {                                                                       \
        err = (call);                                                          \
        if (err != CL_SUCCESS) {                                               \
            *failed = (what);                                                  \
            return err;                                                        \
        }                                                                      \
    } while (0)

    QUERY(device_string(id, CL_DEVICE_NAME, device->name, sizeof device->name),
          "CL_DEVICE_NAME");
    QUERY(device_string(id, CL_DEVICE_VENDOR, device->vendor,
                        sizeof device->vendor),
          "CL_DEVICE_VENDOR");
    QUERY(device_string(id, CL_DRIVER_VERSION, driver, sizeof driver),
          "CL_DRIVER_VERSION");
    QUERY(clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL),
          "CL_DEVICE_TYPE");
    QUERY(clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                          NULL),
          "CL_DEVICE_MAX_COMPUTE_UNITS");
    QUERY(clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof memory, &memory,
                          NULL),
          "CL_DEVICE_GLOBAL_MEM_SIZE");
    QUERY(clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                          &max_alloc, NULL),
          "CL_DEVICE_MAX_MEM_ALLOC_SIZE");
#undef QUERY

    /* Whole, not truncated: the PCI extensions may come late in a long
     * list. */
    char *extensions = device_string_copy(id, CL_DEVICE_EXTENSIONS, &err);
    if (extensions == NULL) {
        *failed = "CL_DEVICE_EXTENSIONS";
        return err;
    }

    if (device->name[0] == '\0')
        snprintf(device->name, sizeof device->name, "unnamed OpenCL device");
    int written = snprintf(device->version, sizeof device->version,
                           "%s, driver %s", platform_version, driver);
    if (written < 0)
        device->version[0] = '\0';
    device->kind = kind_of(type);
    device->compute_units = units > INT32_MAX ? INT32_MAX : (int)units;
    device->memory_bytes = memory;
    device->max_alloc_bytes = max_alloc;

    /* A GPU's nearest nodes are those of its PCI slot. A CPU device (PoCL's
     * pthread device, Intel's CPU runtime) runs its threads on every core
     * the process may use, so its nodes are those of the allowed cpuset;
     * NULL asks the runtime for exactly that. */
    unsigned *address = device->pci_address;
    int domain_known = 0;
    device->numa_mask = 0;
    device->has_pci_address = 0;
    if (device->kind == LOCUS_DEVICE_CPU) {
        device->numa_mask =
            state->services->cpuset_numa_mask(state->runtime, NULL);
    } else if (device_pci_address(id, extensions, address, &domain_known)) {
        device->has_pci_address = domain_known;
        device->numa_mask = state->services->pci_numa_mask(
            state->runtime, address[0], address[1], address[2], address[3]);
    }
    /* f64 is offered only where the device says it has doubles. */
    device->has_fp64 = has_extension(extensions, "cl_khr_fp64");
    free(extensions);
    return CL_SUCCESS;
}

/* PoCL's platform name: its CPU device starts its threads, and aborts the
 * process when it cannot (pthread_scheduler_init), at the first
 * clGetDeviceIDs. Once per process: set under the runtime's set-up lock
 * (plugin.c), which every init runs under. */
#define POCL_PLATFORM_NAME "Portable Computing Language"
static int pocl_started;

/* Whether PoCL's threads have the address space to start in; if not, the
 * platform is skipped with the figures in note (OpenCL is then absent
 * with that reason, or the other platforms' devices remain). */
static int pocl_can_start(const opencl_state *state, const char *platform_name,
                          char *note, size_t note_size)
{
    if (pocl_started || strstr(platform_name, POCL_PLATFORM_NAME) == NULL)
        return 1;
    unsigned threads = 0;
    uint64_t needed = locus__opencl_pocl_startup_bytes(&threads);
    uint64_t left = 0;
    if (locus__opencl_address_room(needed, &left))
        return 1;
    snprintf(note, note_size,
             "platform %s skipped: its %u threads need about %llu MiB of "
             "address space and the limit (RLIMIT_AS, ulimit -v) leaves %llu "
             "MiB; PoCL aborts the process when it cannot start them",
             platform_name, threads, (unsigned long long)(needed >> 20),
             (unsigned long long)(left >> 20));
    state->services->log(state->runtime, LOCUS_LOG_WARN, "opencl: %s", note);
    return 0;
}

void locus__opencl_add_platform(opencl_state *state, cl_platform_id platform,
                                size_t *capacity, char *note, size_t note_size)
{
    char platform_name[128], version_full[256], version[64];
    cl_int err = platform_string(platform, CL_PLATFORM_NAME, platform_name,
                                 sizeof platform_name);
    if (err != CL_SUCCESS)
        snprintf(platform_name, sizeof platform_name, "unnamed platform");
    err = platform_string(platform, CL_PLATFORM_VERSION, version_full,
                          sizeof version_full);
    if (err != CL_SUCCESS)
        snprintf(version_full, sizeof version_full, "OpenCL");
    short_platform_version(version_full, version, sizeof version);

    if (!pocl_can_start(state, platform_name, note, note_size))
        return;
    cl_uint count = 0;
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, NULL, &count);
    if (strstr(platform_name, POCL_PLATFORM_NAME) != NULL)
        pocl_started = 1;
    if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && count == 0)) {
        snprintf(note, note_size, "platform %s has no device", platform_name);
        return;
    }
    if (err != CL_SUCCESS) {
        snprintf(note, note_size, "platform %s: clGetDeviceIDs: %s (%d)",
                 platform_name, locus__opencl_error_name(err), (int)err);
        state->services->log(state->runtime, LOCUS_LOG_WARN, "opencl: %s",
                             note);
        return;
    }
    cl_device_id *ids = malloc(count * sizeof *ids);
    if (ids == NULL) {
        snprintf(note, note_size, "out of host memory listing %u devices",
                 (unsigned)count);
        return;
    }
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids, NULL);
    if (err != CL_SUCCESS) {
        snprintf(note, note_size, "platform %s: clGetDeviceIDs: %s (%d)",
                 platform_name, locus__opencl_error_name(err), (int)err);
        state->services->log(state->runtime, LOCUS_LOG_WARN, "opencl: %s",
                             note);
        free(ids);
        return;
    }

    for (cl_uint i = 0; i < count; i++) {
        cl_bool available = CL_FALSE;
        err = clGetDeviceInfo(ids[i], CL_DEVICE_AVAILABLE, sizeof available,
                              &available, NULL);
        if (err != CL_SUCCESS || !available) {
            snprintf(note, note_size, "platform %s: device %u is not available",
                     platform_name, (unsigned)i);
            state->services->log(state->runtime, LOCUS_LOG_INFO, "opencl: %s",
                                 note);
            continue;
        }
        if (state->count == *capacity) {
            size_t grown = *capacity == 0 ? 4 : 2 * *capacity;
            opencl_device *devices =
                realloc(state->devices, grown * sizeof *devices);
            if (devices == NULL) {
                snprintf(note, note_size, "out of host memory");
                break;
            }
            state->devices = devices;
            *capacity = grown;
        }
        opencl_device *device = &state->devices[state->count];
        memset(device, 0, sizeof *device);
        const char *failed = "";
        err =
            describe_device(state, platform, version, ids[i], device, &failed);
        if (err != CL_SUCCESS) {
            snprintf(note, note_size,
                     "platform %s: device %u: clGetDeviceInfo(%s): %s (%d)",
                     platform_name, (unsigned)i, failed,
                     locus__opencl_error_name(err), (int)err);
            state->services->log(state->runtime, LOCUS_LOG_WARN, "opencl: %s",
                                 note);
            continue;
        }
        if (pthread_mutex_init(&device->lock, NULL) != 0) {
            snprintf(note, note_size, "pthread_mutex_init failed");
            break;
        }
        state->services->log(state->runtime, LOCUS_LOG_DEBUG,
                             "opencl: device %zu: %s (%s, %s), %d compute "
                             "units, %llu bytes",
                             state->count, device->name,
                             device_type_name(device->kind), device->version,
                             device->compute_units,
                             (unsigned long long)device->memory_bytes);
        state->count++;
    }
    free(ids);
}
