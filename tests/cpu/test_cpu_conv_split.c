/* How 0.2's f32 convolution splits a small output among many workers: the
 * ResNet-50 layers at batch 1 whose outputs are 7x7 and 14x14 (49 and 196
 * positions a channel, 256-2048 output channels) on 16 workers, as on the
 * 16-core host, and on 2. Each layer is given the path conv_implicit.c's
 * entry takes (the direct kernel where locus__cpu_direct_fits, else the
 * implicit GEMM), and the first split of that path's work (before any
 * stealing: locus__cpu_direct_loads, locus__cpu_implicit_loads, in kernel
 * calls) must give every worker work within 1.25x of the mean: the most
 * at most 1.25 times the mean, the least at least the mean over 1.25.
 * Under the avx512 table (the host's; 12 x 32 GEMM tile, 14 x 32 direct
 * tile), skipped where this CPU lacks it; no timing. */
#include <stdio.h>
#include <stdlib.h>

#include "conv_direct.h"
#include "conv_implicit.h"
#include "cpu_conv_problem.h"
#include "pool.h"
#include "test_util.h"

static size_t no_cache(void *runtime, int level)
{
    (void)runtime;
    (void)level;
    return 0; /* the plans' defaults */
}

static int unshared(void *runtime, int level)
{
    (void)runtime;
    (void)level;
    return 1;
}

/* ResNet-50's layers with 7x7 or 14x14 outputs, batch 1. */
static const conv_case layers[] = {
    {1, 512, 14, 14, 512, 3, 3, 2, 2, 1, 1},   /* layer4.0.conv2 */
    {1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1},     /* layer4.1-2.conv2 */
    {1, 512, 7, 7, 2048, 1, 1, 1, 1, 0, 0},    /* layer4.x.conv3 */
    {1, 2048, 7, 7, 512, 1, 1, 1, 1, 0, 0},    /* layer4.1-2.conv1 */
    {1, 1024, 14, 14, 2048, 1, 1, 2, 2, 0, 0}, /* layer4.0.downsample */
    {1, 1024, 14, 14, 512, 1, 1, 1, 1, 0, 0},  /* layer4.0.conv1 */
    {1, 256, 28, 28, 256, 3, 3, 2, 2, 1, 1},   /* layer3.0.conv2 */
    {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1},   /* layer3.1-5.conv2 */
    {1, 256, 14, 14, 1024, 1, 1, 1, 1, 0, 0},  /* layer3.x.conv3 */
    {1, 1024, 14, 14, 256, 1, 1, 1, 1, 0, 0},  /* layer3.1-5.conv1 */
    {1, 512, 28, 28, 1024, 1, 1, 2, 2, 0, 0},  /* layer3.0.downsample */
};
#define LAYER_COUNT (sizeof layers / sizeof *layers)

static void check(const char *isa, const conv_case *cc, int workers)
{
    locus_services services = {0};
    services.split = locus__pool_split;
    services.cache_bytes = no_cache;
    services.cache_sharing = unshared;
    locus__cpu_state state;
    locus__conv_problem pr = test_conv_problem(cc, isa, workers, &state);
    state.services = &services;
    locus__cpu_conv_flatten_1x1(&pr); /* as locus__cpu_conv2d does */
    size_t *loads = calloc((size_t)workers, sizeof *loads);
    if (!TEST_EXPECT(loads != NULL, "out of memory"))
        return;
    int direct = locus__cpu_direct_fits(&pr);
    int ok = direct ? locus__cpu_direct_loads(&pr, loads)
                    : locus__cpu_implicit_loads(&pr, loads);
    if (TEST_EXPECT(ok, "%s %zux%zux%zu -> %zu %zux%zu/%zu: no split", isa,
                    cc->c, cc->h, cc->w, cc->k, cc->r, cc->s, cc->sh)) {
        size_t total = 0, most = 0, least = SIZE_MAX;
        for (int r = 0; r < workers; r++) {
            total += loads[r];
            most = loads[r] > most ? loads[r] : most;
            least = loads[r] < least ? loads[r] : least;
        }
        double mean = (double)total / workers;
        printf("%s %zux%zux%zu -> %zu %zux%zu/%zu, %d workers, %s: loads "
               "%zu..%zu, mean %.2f\n",
               isa, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s, cc->sh, workers,
               direct ? "direct" : "implicit", least, most, mean);
        TEST_EXPECT((double)most <= 1.25 * mean && (double)least * 1.25 >= mean,
                    "%s %zux%zux%zu -> %zu %zux%zu/%zu on %d workers (%s): "
                    "loads from %zu to %zu kernel calls, mean %.2f: not "
                    "within 1.25x",
                    isa, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s, cc->sh,
                    workers, direct ? "direct" : "implicit", least, most, mean);
    }
    free(loads);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    locus__cpu_isa probe;
    locus__cpu_isa_init(&probe, "avx512");
    const char *isa = "avx512";
    if (strcmp(probe.name, isa) != 0) {
        printf("the avx512 table does not run here: skipped\n");
        return 77;
    }
    for (size_t i = 0; i < LAYER_COUNT; i++) {
        check(isa, &layers[i], 16);
        check(isa, &layers[i], 2);
    }
    return test_exit_code();
}
