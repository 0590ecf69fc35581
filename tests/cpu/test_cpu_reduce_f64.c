/* locus_reduce in f64 on the CPU devices, under every kernel set
 * (LOCUS_CPU_ISA generic, avx2, avx512; one this CPU lacks is skipped
 * with a line saying so) and with one and several workers, so that both
 * the kernels' lanes and the combination of the workers' partials are
 * checked: the cases of f64_reduce_check.h against a long double
 * reference, and the first-zero rule of the CPU backend. */
#include <stdio.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "f64_reduce_check.h"
#include "test_util.h"

static void test_isa(const char *isa, const char *threads)
{
    locus_context *ctx = test_cpu_context(isa, NULL, threads);
    if (!ctx)
        return;
    printf("isa %s, threads %s\n", isa, threads ? threads : "default");
    fflush(stdout);
    char label[64];
    snprintf(label, sizeof label, "cpu %s threads %s", isa,
             threads ? threads : "default");
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS)
        f64_reduce_check(ctx, dev, label, 1, 0);
    size_t at = 0;
    for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
        f64_reduce_check(ctx, d, label, 1, 0);
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++) {
        test_isa(test_cpu_isas[i], "1");
        test_isa(test_cpu_isas[i], NULL);
    }
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
