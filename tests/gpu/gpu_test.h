/* Helpers shared by the GPU backend tests: a hermetic context, the lookup of
 * a backend's report, and the checks every device of a module must pass.
 * Public API only. */
#ifndef LOCUS_GPU_TEST_H
#define LOCUS_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

/* meson's convention for a skipped test. */
#define GPU_TEST_SKIP 77

static int gpu_test_failures;

#define CHECK(condition, ...)                                                  \
    do {                                                                       \
        if (!(condition)) {                                                    \
            gpu_test_failures++;                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__,            \
                    #condition);                                               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* A context that loads only `backends`. LOCUS_* variables of the calling
 * shell (LOCUS_DEVICE, LOCUS_STRICT, ...) are ignored so they cannot change
 * the outcome; the module path, which meson sets for the test, is passed on
 * as an option. */
/* Strict by default: a device test must see its device's failures, not a
 * silent fallback to the CPU (docs/SCHEDULER.md). A test of the fallback
 * sets this to "0". */
static const char *gpu_test_strict = "1";

static inline locus_status gpu_test_context(const char *backends,
                                            locus_context **context)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.backends = backends;
    options.plugin_path = getenv("LOCUS_PLUGIN_PATH");
    options.ignore_environment = 1;
    options.strict = gpu_test_strict;
    locus_status status = locus_context_create(&options, context);
    if (status != LOCUS_SUCCESS)
        fprintf(stderr, "locus_context_create(backends=%s): %s: %s\n", backends,
                locus_status_name(status), locus_last_error());
    return status;
}

/* The report of backend `name`; nonzero when the context lists it. */
static inline int gpu_test_backend(const locus_context *context,
                                   const char *name, locus_backend_info *out)
{
    size_t count = 0;
    locus_status status = locus_backend_count(context, &count);
    CHECK(status == LOCUS_SUCCESS, "locus_backend_count: %s",
          locus_last_error());
    for (size_t i = 0; i < count; i++) {
        locus_backend_info info;
        locus_backend_info_init(&info);
        status = locus_backend_get(context, i, &info);
        CHECK(status == LOCUS_SUCCESS, "locus_backend_get(%zu): %s", i,
              locus_last_error());
        if (status == LOCUS_SUCCESS && strcmp(info.name, name) == 0) {
            *out = info;
            return 1;
        }
    }
    return 0;
}

/* Nonzero when id is a PCI address in the canonical form the runtime
 * gives: "dddd:bb:dd.f", lowercase hex, the domain at least 4 digits, the
 * device at most 0x1f and the function at most 7. */
static inline int gpu_test_pci_bus_id_ok(const char *id)
{
    size_t length = strlen(id);
    if (length < 12)
        return 0;
    const char *tail = id + length - 8; /* ":bb:dd.f" */
    for (const char *at = id; *at != '\0'; at++) {
        int position = (int)(at - tail);
        int separator = position == 0 || position == 3 || position == 6;
        if (separator) {
            if (*at != (position == 6 ? '.' : ':'))
                return 0;
        } else if (!((*at >= '0' && *at <= '9') ||
                     (*at >= 'a' && *at <= 'f'))) {
            return 0;
        }
    }
    unsigned device = (unsigned)strtoul(tail + 4, NULL, 16);
    return device <= 0x1f && tail[7] <= '7';
}

/* Checks the info of every device of `backend` and returns how many there
 * are. */
static inline size_t gpu_test_devices(locus_context *context,
                                      const char *backend)
{
    size_t count = 0, found = 0;
    locus_status status = locus_device_count(context, &count);
    CHECK(status == LOCUS_SUCCESS, "locus_device_count: %s",
          locus_last_error());
    for (size_t i = 0; i < count; i++) {
        locus_device *device = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        status = locus_device_get(context, i, &device);
        CHECK(status == LOCUS_SUCCESS && device != NULL,
              "locus_device_get(%zu): %s", i, locus_last_error());
        if (device == NULL)
            continue;
        status = locus_device_get_info(device, &info);
        CHECK(status == LOCUS_SUCCESS, "locus_device_get_info(%zu): %s", i,
              locus_last_error());
        if (strcmp(info.backend, backend) != 0)
            continue;
        found++;
        printf("%s: %s, %s, %s, %s, %d compute units, %llu bytes, "
               "nearest nodes 0x%llx\n",
               info.selector, info.name, info.vendor, info.version,
               locus_device_kind_str(info.kind), info.compute_units,
               (unsigned long long)info.memory_bytes,
               (unsigned long long)info.nearest_numa_mask);

        char selector[sizeof info.selector];
        snprintf(selector, sizeof selector, "%s:%d", backend,
                 info.index_in_backend);
        CHECK(strcmp(info.selector, selector) == 0,
              "selector \"%s\", expected \"%s\"", info.selector, selector);
        CHECK(info.name[0] != '\0', "device %s has no name", info.selector);
        CHECK(info.vendor[0] != '\0', "device %s has no vendor", info.selector);
        CHECK(info.version[0] != '\0', "device %s has no version",
              info.selector);
        CHECK(info.compute_units > 0, "device %s: %d compute units",
              info.selector, info.compute_units);
        CHECK(info.memory_bytes > 0, "device %s: 0 bytes of memory",
              info.selector);
        CHECK(info.kind == LOCUS_DEVICE_CPU || info.kind == LOCUS_DEVICE_GPU ||
                  info.kind == LOCUS_DEVICE_ACCELERATOR,
              "device %s: kind %d", info.selector, (int)info.kind);
        /* A CPU device runs on this machine's cores, so its nodes are
         * always known. */
        if (info.kind == LOCUS_DEVICE_CPU)
            CHECK(info.nearest_numa_mask != 0,
                  "CPU device %s has no nearest NUMA node", info.selector);
        /* A PCI address, where known, is well formed; a CPU device has
         * none (PoCL's, for one). */
        printf("%s: PCI %s\n", info.selector,
               info.pci_bus_id[0] ? info.pci_bus_id : "unknown");
        CHECK(info.pci_bus_id[0] == '\0' ||
                  gpu_test_pci_bus_id_ok(info.pci_bus_id),
              "device %s: malformed pci_bus_id \"%s\"", info.selector,
              info.pci_bus_id);
        if (info.kind == LOCUS_DEVICE_CPU)
            CHECK(info.pci_bus_id[0] == '\0',
                  "CPU device %s has pci_bus_id \"%s\"", info.selector,
                  info.pci_bus_id);

        /* Its own selector finds it again. */
        locus_device *again = NULL;
        status = locus_device_find(context, info.selector, &again);
        CHECK(status == LOCUS_SUCCESS && again == device,
              "locus_device_find(\"%s\"): %s: %s", info.selector,
              locus_status_name(status), locus_last_error());
    }
    return found;
}

#endif
