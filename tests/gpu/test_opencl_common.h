/* Helpers of the OpenCL op tests: the device under test and the cpu. The
 * data, buffer and tolerance helpers of cuda_test.h are device-neutral
 * (public API only) and are shared rather than copied.
 *
 * Unlike the CUDA tests these never skip: a machine that builds the module
 * is expected to have an OpenCL device (CI has PoCL), and an absent backend
 * is a failure. LOCUS_TEST_OPENCL picks the device (default opencl:0; on
 * the H200 machine opencl:1 is NVIDIA's). */
#ifndef LOCUS_TEST_OPENCL_COMMON_H
#define LOCUS_TEST_OPENCL_COMMON_H

#include "cuda_test.h"

static inline const char *opencl_test_selector(void)
{
    const char *selector = getenv("LOCUS_TEST_OPENCL");
    return selector != NULL && selector[0] != '\0' ? selector : "opencl:0";
}

/* A context with the cpu and opencl backends, the device under test and
 * the cpu; 1 on a failure, 0 when ready. */
static inline int opencl_test_open(locus_context **context,
                                   locus_device **device, locus_device **cpu)
{
    if (gpu_test_context("cpu,opencl", context) != LOCUS_SUCCESS)
        return 1;
    locus_backend_info backend;
    locus_backend_info_init(&backend);
    if (!gpu_test_backend(*context, "opencl", &backend) || !backend.available) {
        fprintf(stderr, "the opencl backend is unavailable: %s\n",
                backend.reason);
        locus_context_destroy(*context);
        return 1;
    }
    const char *selector = opencl_test_selector();
    if (locus_device_find(*context, selector, device) != LOCUS_SUCCESS ||
        locus_device_find(*context, "cpu", cpu) != LOCUS_SUCCESS) {
        fprintf(stderr, "finding %s and cpu: %s\n", selector,
                locus_last_error());
        locus_context_destroy(*context);
        return 1;
    }
    locus_device_info info;
    locus_device_info_init(&info);
    if (locus_device_get_info(*device, &info) == LOCUS_SUCCESS)
        printf("testing %s: %s (%s)\n", info.selector, info.name, info.version);
    return 0;
}

#endif
