/* The CUDA module loads, finds the GPUs and describes them, and device
 * selectors resolve to them. Skipped (77) where the backend is unavailable:
 * no driver or no GPU is an ordinary machine, not a failure. */
#include <unistd.h>

#include "gpu_test.h"

/* Every CUDA device knows its PCI address (the split counts cuda:N and
 * NVIDIA's OpenCL view of the same GPU once by it), well formed and, where
 * this machine's /sys lists PCI devices, one of them. */
static void check_pci_bus_ids(locus_context *context)
{
    size_t count = 0;
    CHECK(locus_device_count(context, &count) == LOCUS_SUCCESS,
          "locus_device_count: %s", locus_last_error());
    for (size_t i = 0; i < count; i++) {
        locus_device *device = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get(context, i, &device) != LOCUS_SUCCESS ||
            locus_device_get_info(device, &info) != LOCUS_SUCCESS) {
            CHECK(0, "device %zu: %s", i, locus_last_error());
            continue;
        }
        if (strcmp(info.backend, "cuda") != 0)
            continue;
        CHECK(gpu_test_pci_bus_id_ok(info.pci_bus_id),
              "%s: pci_bus_id \"%s\" is not dddd:bb:dd.f", info.selector,
              info.pci_bus_id);
        char path[96];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s", info.pci_bus_id);
        if (access("/sys/bus/pci/devices", R_OK) == 0)
            CHECK(access(path, F_OK) == 0, "%s: no %s", info.selector, path);
    }
}

/* Returns 0 when checked, GPU_TEST_SKIP when there is nothing to check. */
static int check_context(int round)
{
    locus_context *context = NULL;
    if (gpu_test_context("cpu,cuda", &context) != LOCUS_SUCCESS) {
        gpu_test_failures++;
        return 0;
    }

    locus_backend_info backend;
    locus_backend_info_init(&backend);
    int listed = gpu_test_backend(context, "cuda", &backend);
    CHECK(listed, "the context does not list the cuda backend");
    if (!listed) {
        locus_context_destroy(context);
        return 0;
    }
    printf("cuda backend: %s, %zu devices: %s\n",
           backend.available ? "available" : "unavailable",
           backend.device_count, backend.reason);
    if (!backend.available) {
        CHECK(backend.reason[0] != '\0',
              "the unavailable cuda backend gives no reason");
        CHECK(round == 0,
              "the cuda backend went away on a second context: "
              "%s",
              backend.reason);
        locus_context_destroy(context);
        return round == 0 ? GPU_TEST_SKIP : 0;
    }

    size_t devices = gpu_test_devices(context, "cuda");
    CHECK(devices == backend.device_count,
          "%zu cuda devices in the device list, the backend reports %zu",
          devices, backend.device_count);
    CHECK(devices > 0, "no cuda device although the backend is available");
    check_pci_bus_ids(context);

    locus_device *first = NULL;
    locus_status status = locus_device_find(context, "cuda:0", &first);
    CHECK(status == LOCUS_SUCCESS && first != NULL,
          "locus_device_find(\"cuda:0\"): %s: %s", locus_status_name(status),
          locus_last_error());
    if (first != NULL) {
        locus_device_info info;
        locus_device_info_init(&info);
        CHECK(locus_device_get_info(first, &info) == LOCUS_SUCCESS,
              "locus_device_get_info: %s", locus_last_error());
        CHECK(strcmp(info.selector, "cuda:0") == 0 &&
                  strcmp(info.backend, "cuda") == 0,
              "\"cuda:0\" found %s of backend %s", info.selector, info.backend);
        CHECK(info.kind == LOCUS_DEVICE_GPU, "cuda:0 is a %s",
              locus_device_kind_str(info.kind));
        CHECK(strstr(info.version, "sm_") != NULL,
              "cuda:0's version \"%s\" names no sm_ architecture",
              info.version);
        CHECK(strcmp(info.vendor, "NVIDIA") == 0, "cuda:0's vendor is \"%s\"",
              info.vendor);
    }

    /* A device the machine does not have is an error, not a crash. */
    char missing[32];
    snprintf(missing, sizeof missing, "cuda:%zu", backend.device_count);
    locus_device *none = NULL;
    status = locus_device_find(context, missing, &none);
    CHECK(status != LOCUS_SUCCESS, "locus_device_find(\"%s\") succeeded",
          missing);
    locus_context_destroy(context);
    return 0;
}

int main(void)
{
    /* Twice: the module, with its static CUDA runtime, is loaded again for
     * a second context in the same process. */
    int result = check_context(0);
    if (result == GPU_TEST_SKIP) {
        printf("skipped: the cuda backend is unavailable\n");
        return gpu_test_failures > 0 ? 1 : GPU_TEST_SKIP;
    }
    check_context(1);
    if (gpu_test_failures > 0) {
        fprintf(stderr, "%d check%s failed\n", gpu_test_failures,
                gpu_test_failures == 1 ? "" : "s");
        return 1;
    }
    return 0;
}
