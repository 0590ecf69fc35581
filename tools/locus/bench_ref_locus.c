/* Locus's own kernels as the reference of an OpenCL device: the CPU
 * backend for an OpenCL CPU device (PoCL runs on the same cores, so
 * OpenBLAS or a bandwidth figure would compare it with the wrong thing),
 * cuda:0 for an OpenCL GPU when the CUDA backend has one. The peer runs
 * the same shape and settings through bench_run, on its own random inputs
 * (timing does not depend on the values), with its own references off. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

bool bench_references_off;

void bench_reference_locus(locus_context *context,
                           const locus_device_info *info,
                           const bench_settings *settings,
                           const bench_shape *shape, bench_result *result)
{
    const char *peer = info->kind == LOCUS_DEVICE_GPU ? "cuda:0" : "cpu";
    locus_device *device = NULL;
    if (locus_device_find(context, peer, &device) != LOCUS_SUCCESS)
        return;
    bench_result *peer_result = malloc(sizeof *peer_result);
    if (peer_result == NULL)
        return;
    random_state random;
    random_seed(&random, 0x10c05ull);
    bench_references_off = true;
    locus_status status =
        bench_run(context, device, settings, shape, &random, peer_result);
    bench_references_off = false;
    if (status == LOCUS_SUCCESS && peer_result->passed) {
        char name[64];
        snprintf(name, sizeof name, "locus %s", peer);
        bench_add_reference(result, name, peer_result->best_seconds);
    }
    free(peer_result);
}
