/* The OpenCL module loads, finds the devices of the ICD (PoCL's CPU device
 * at least, which CI has), and describes them; device selectors resolve to
 * them; an op runs on the device found by "opencl" (the op tests check
 * the kernels in depth), a float64 op runs where the device offers f64
 * (cl_khr_fp64) and fails with LOCUS_ERROR_NOT_SUPPORTED where it does
 * not, and an op under a LOCUS_OPENCL_TUNING that names no tuning fails
 * with LOCUS_ERROR_BAD_ENVIRONMENT.
 *
 * Unlike the CUDA test this one never skips: a machine that builds the
 * module is expected to have an OpenCL platform, and an absent backend is
 * the failure this test is here to catch. */
#include <math.h>

#include "gpu_test.h"

/* A float32 reduce runs; a float64 one runs where it is offered. */
static void check_reduce(locus_context *context, locus_device *device,
                         const locus_device_info *info)
{
    enum { COUNT = 1000 };
    float values[COUNT];
    for (int i = 0; i < COUNT; i++)
        values[i] = 1.0f + (float)(i % 7) * 0.25f;

    locus_buffer *buffer = NULL;
    locus_status status =
        locus_buffer_create(context, sizeof values, NULL, &buffer);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_create: %s",
          locus_last_error());
    if (status != LOCUS_SUCCESS)
        return;
    status = locus_buffer_write(buffer, 0, values, sizeof values);
    CHECK(status == LOCUS_SUCCESS, "locus_buffer_write: %s",
          locus_last_error());

    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F32;
    desc.op = LOCUS_REDUCE_SUM;
    desc.count = COUNT;
    double result = -1.0, expected = 0.0;
    for (int i = 0; i < COUNT; i++)
        expected += values[i];
    status = locus_reduce(context, device, &desc, buffer, &result, NULL);
    CHECK(status == LOCUS_SUCCESS && result == expected,
          "float32 reduce on %s: %s, %.17g (expected %.17g): %s",
          info->selector, locus_status_name(status), result, expected,
          locus_last_error());
    /* f64 where the device has cl_khr_fp64 (offers says so), else
     * refused: refused before the backend by the runtime, or by the
     * backend with the device named, never a wrong answer. The values
     * (tests/gpu/test_device_f64.c checks f64 itself) are the floats'
     * bytes read as COUNT / 2 doubles. */
    int offered = 0;
    CHECK(locus_device_offers(device, LOCUS_OP_REDUCE, 0, LOCUS_DTYPE_F64,
                              &offered) == LOCUS_SUCCESS,
          "locus_device_offers: %s", locus_last_error());
    double doubles[COUNT / 2], expected64 = 0.0;
    memcpy(doubles, values, sizeof doubles);
    for (int i = 0; i < COUNT / 2; i++)
        expected64 += doubles[i];
    desc.dtype = LOCUS_DTYPE_F64;
    desc.count = COUNT / 2;
    status = locus_reduce(context, device, &desc, buffer, &result, NULL);
    const char *detail = locus_last_error();
    printf("f64 reduce on %s (offered %d): %s: %s\n", info->selector, offered,
           locus_status_name(status), detail);
    if (offered)
        CHECK(status == LOCUS_SUCCESS &&
                  fabs(result - expected64) <= 1e-12 * fabs(expected64),
              "f64 reduce on %s: %s, %.17g (expected %.17g)", info->selector,
              locus_status_name(status), result, expected64);
    else
        CHECK(status == LOCUS_ERROR_NOT_SUPPORTED,
              "locus_reduce on %s returned %s, expected "
              "LOCUS_ERROR_NOT_SUPPORTED",
              info->selector, locus_status_name(status));
    locus_buffer_destroy(buffer);
}

static void check_context(void)
{
    locus_context *context = NULL;
    if (gpu_test_context("cpu,opencl", &context) != LOCUS_SUCCESS) {
        gpu_test_failures++;
        return;
    }

    locus_backend_info backend;
    locus_backend_info_init(&backend);
    int listed = gpu_test_backend(context, "opencl", &backend);
    CHECK(listed, "the context does not list the opencl backend");
    if (listed) {
        printf("opencl backend: %s, %zu devices: %s\n",
               backend.available ? "available" : "unavailable",
               backend.device_count, backend.reason);
        CHECK(backend.available,
              "the opencl backend is unavailable: %s (is an ICD such as "
              "pocl-opencl-icd installed? LOCUS_PLUGIN_PATH=%s)",
              backend.reason,
              getenv("LOCUS_PLUGIN_PATH") ? getenv("LOCUS_PLUGIN_PATH")
                                          : "(unset)");
    }
    if (!listed || !backend.available) {
        locus_context_destroy(context);
        return;
    }

    size_t devices = gpu_test_devices(context, "opencl");
    CHECK(devices == backend.device_count,
          "%zu opencl devices in the device list, the backend reports %zu",
          devices, backend.device_count);
    CHECK(devices > 0, "no opencl device although the backend is available");

    /* "opencl:cpu" must find a CPU device exactly when there is one. */
    int has_cpu = 0;
    size_t count = 0;
    locus_device_count(context, &count);
    for (size_t i = 0; i < count; i++) {
        locus_device *device = NULL;
        locus_device_info info;
        locus_device_info_init(&info);
        if (locus_device_get(context, i, &device) == LOCUS_SUCCESS &&
            locus_device_get_info(device, &info) == LOCUS_SUCCESS &&
            strcmp(info.backend, "opencl") == 0 &&
            info.kind == LOCUS_DEVICE_CPU)
            has_cpu = 1;
    }
    locus_device *cpu = NULL;
    locus_status status = locus_device_find(context, "opencl:cpu", &cpu);
    if (has_cpu) {
        locus_device_info info;
        locus_device_info_init(&info);
        CHECK(status == LOCUS_SUCCESS && cpu != NULL,
              "locus_device_find(\"opencl:cpu\"): %s: %s",
              locus_status_name(status), locus_last_error());
        if (cpu != NULL) {
            CHECK(locus_device_get_info(cpu, &info) == LOCUS_SUCCESS,
                  "locus_device_get_info: %s", locus_last_error());
            CHECK(strcmp(info.backend, "opencl") == 0 &&
                      info.kind == LOCUS_DEVICE_CPU,
                  "\"opencl:cpu\" found %s (%s)", info.selector,
                  locus_device_kind_str(info.kind));
        }
    } else {
        printf("no OpenCL CPU device here (no PoCL?): \"opencl:cpu\" must "
               "not match\n");
        CHECK(status != LOCUS_SUCCESS,
              "locus_device_find(\"opencl:cpu\") succeeded without an "
              "OpenCL CPU device");
    }

    locus_device *first = NULL;
    status = locus_device_find(context, "opencl", &first);
    CHECK(status == LOCUS_SUCCESS && first != NULL,
          "locus_device_find(\"opencl\"): %s: %s", locus_status_name(status),
          locus_last_error());
    if (first != NULL) {
        locus_device_info info;
        locus_device_info_init(&info);
        locus_device_get_info(first, &info);
        CHECK(strcmp(info.backend, "opencl") == 0, "\"opencl\" found %s",
              info.selector);
        check_reduce(context, first, &info);
    }
    locus_context_destroy(context);
}

/* LOCUS_OPENCL_TUNING with a value other than gpu or cpu: the first op,
 * which builds the device's program, fails with LOCUS_ERROR_BAD_ENVIRONMENT
 * naming the variable; once it is unset, the next op builds and runs. */
static void check_bad_tuning(void)
{
    locus_context *context = NULL;
    locus_device *device = NULL;
    locus_status status = locus_context_create(NULL, &context);
    CHECK(status == LOCUS_SUCCESS, "locus_context_create: %s",
          locus_last_error());
    if (status != LOCUS_SUCCESS)
        return;
    status = locus_device_find(context, "opencl", &device);
    CHECK(status == LOCUS_SUCCESS, "no opencl device: %s", locus_last_error());
    locus_buffer *buffer = NULL;
    if (status == LOCUS_SUCCESS)
        status =
            locus_buffer_create(context, 64 * sizeof(float), NULL, &buffer);
    if (status == LOCUS_SUCCESS) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = 64;
        double result = 0.0;
        setenv("LOCUS_OPENCL_TUNING", "bogus", 1);
        status = locus_reduce(context, device, &desc, buffer, &result, NULL);
        CHECK(status == LOCUS_ERROR_BAD_ENVIRONMENT &&
                  strstr(locus_last_error(), "LOCUS_OPENCL_TUNING") != NULL,
              "LOCUS_OPENCL_TUNING=bogus: %s: %s", locus_status_name(status),
              locus_last_error());
        unsetenv("LOCUS_OPENCL_TUNING");
        status = locus_reduce(context, device, &desc, buffer, &result, NULL);
        CHECK(status == LOCUS_SUCCESS,
              "the op after LOCUS_OPENCL_TUNING was unset: %s: %s",
              locus_status_name(status), locus_last_error());
    }
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);
}

int main(void)
{
    check_bad_tuning();
    /* Twice: contexts may come and go in one process, and the module with
     * its ICD loader is loaded again each time. */
    check_context();
    check_context();
    if (gpu_test_failures > 0) {
        fprintf(stderr, "%d check%s failed\n", gpu_test_failures,
                gpu_test_failures == 1 ? "" : "s");
        return 1;
    }
    return 0;
}
