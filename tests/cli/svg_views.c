/* Draws the `locus` pictures from made-up figures, for what this machine
 * cannot show: measured bandwidth and latency on 1, 2, 4 and 8 nodes
 * (`locus numa` measures only the real machine), cells that failed, one
 * value everywhere, hostile names, and roofline panels of several devices
 * with crowded, failed and missing results. svg_test.py checks the files.
 *
 * usage: svg_views <folder> numa|bench; prints one line per file written:
 *   numa <file> <nodes> <panels>
 *   bench <file> <results> <references>
 * and exits 1 when a writer reported a failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_svg.h"
#include "numa.h"

static const char *folder;
static int failures;

static void path_of(char *path, size_t capacity, const char *name)
{
    snprintf(path, capacity, "%s/%s", folder, name);
}

/* Node n's bandwidth to node m falls and the latency rises with the
 * distance, as on a real machine; hole marks cells as not measured. */
static void numa_case(const char *name, size_t n, bool all_equal, bool holes,
                      const char *source, int first_id, const char *error)
{
    numa_node_view nodes[8];
    unsigned distances[64];
    double bandwidth[64], latency[64];
    numa_view view;
    memset(&view, 0, sizeof view);
    memset(nodes, 0, sizeof nodes);
    view.topology_source = source;
    view.this_system = true;
    view.node_count = n;
    view.nodes = nodes;
    view.distances = distances;
    view.bandwidth_gbps = bandwidth;
    view.latency_ns = latency;
    snprintf(view.measure_error, sizeof view.measure_error, "%s", error);
    for (size_t i = 0; i < n; i++) {
        nodes[i].info.os_index = first_id + (int)i;
        for (size_t j = 0; j < n; j++) {
            unsigned d = i == j ? 10 : (i / 4 == j / 4 ? 16 : 32);
            distances[i * n + j] = d;
            bandwidth[i * n + j] = all_equal ? 42.5 : 2400.0 / d + 0.37 * i;
            latency[i * n + j] = all_equal ? 95.0 : 9.0 * d + (double)j;
            if (holes && (i + 2 * j) % 5 == 1)
                bandwidth[i * n + j] = NAN;
            if (holes && (2 * i + j) % 7 == 3)
                latency[i * n + j] = NAN;
        }
    }
    char path[512];
    path_of(path, sizeof path, name);
    if (!numa_write_svg(&view, path))
        failures++;
    printf("numa %s %zu 2\n", path, n);
}

static bench_reference reference(const bench_result *r, const char *name,
                                 double seconds)
{
    bench_reference ref = {.seconds = seconds};
    snprintf(ref.name, sizeof ref.name, "%s", name);
    ref.gflops = r->flops / seconds / 1e9;
    ref.gbps = (double)r->bytes / seconds / 1e9;
    return ref;
}

/* A gemm of m x n x k that ran in seconds on device. */
static bench_result gemm_result(const char *device, size_t m, size_t n,
                                size_t k, double seconds, bool passed)
{
    bench_result r;
    memset(&r, 0, sizeof r);
    r.op = "gemm";
    snprintf(r.device, sizeof r.device, "%s", device);
    snprintf(r.shape, sizeof r.shape, "%zux%zux%zu", m, n, k);
    snprintf(r.record.algorithm, sizeof r.record.algorithm, "made-up");
    r.flops = 2.0 * (double)m * (double)n * (double)k;
    r.bytes = 4u * (m * k + k * n + 2 * m * n);
    r.best_seconds = seconds;
    r.median_seconds = seconds;
    r.repeat = 3;
    r.passed = passed;
    return r;
}

static void bench_case(const char *name, bench_result *results, size_t count,
                       bench_skip *skips, size_t skip_count,
                       const bench_roof *roofs, size_t roof_count)
{
    static bench_request request;
    memset(&request, 0, sizeof request);
    request.op = BENCH_GEMM;
    request.op_word = "gemm";
    request.settings.repeat = 3;
    request.settings.dtype = LOCUS_DTYPE_F32;
    bench_outcome outcome = {.results = results,
                             .result_count = count,
                             .skips = skips,
                             .skip_count = skip_count};
    char path[512];
    path_of(path, sizeof path, name);
    svg_writer svg;
    if (!bench_svg_open(&svg, path) ||
        !bench_svg_draw(&svg, &request, &outcome, roofs, roof_count))
        failures++;
    size_t references = 0;
    for (size_t i = 0; i < count; i++)
        references += results[i].reference_count;
    printf("bench %s %zu %zu\n", path, count, references);
}

static void bench_cases(void)
{
    static bench_result results[64];
    size_t count = 0;
    /* cpu: three sizes, two references each. */
    const size_t sizes[3] = {64, 256, 1024};
    for (size_t s = 0; s < 3; s++) {
        double n = (double)sizes[s];
        bench_result *r = &results[count++];
        *r = gemm_result("cpu", sizes[s], sizes[s], sizes[s],
                         2 * n * n * n / (40e9 + 60e9 * (double)s), true);
        r->references[r->reference_count++] =
            reference(r, "openblas cblas_sgemm", r->best_seconds * 0.9);
        r->references[r->reference_count++] =
            reference(r, "a plain loop", r->best_seconds * 8.0);
    }
    /* A hostile device name, and a failed result. */
    bench_result *failed = &results[count++];
    *failed = gemm_result("opencl:0", 512, 512, 512, 2e-3, false);
    failed->references[failed->reference_count++] =
        reference(failed, "clblast <sgemm> & \"friends\"", 1e-3);
    results[count++] = gemm_result("opencl:0", 33, 7, 1023, 4e-5, true);
    /* Thirty runs at one intensity with close rates: crowded labels. */
    for (size_t i = 0; i < 30; i++)
        results[count++] =
            gemm_result("cuda:0", 128, 128, 128, 1e-5 * (1.0 + 0.01 * i), true);
    /* Not drawable: no time. */
    results[count++] = gemm_result("cpu", 8, 8, 8, 0.0, true);
    static const bench_roof roofs[] = {
        {.device = "cpu",
         .name = "a CPU, \x01 with control bytes \xff",
         .peak_gflops = 120.0, /* below what the run reached */
         .peak_source = "calibration (gemm)",
         .bandwidth_gbps = 20.0,
         .bandwidth_source = "calibration (reduce)"},
        {.device = "opencl:0",
         .name = "<b>an OpenCL device</b> with a name far too long to fit "
                 "on any line of the picture, however wide it is made"},
    };
    bench_skip skips[12];
    for (size_t i = 0; i < 12; i++) {
        memset(&skips[i], 0, sizeof skips[i]);
        skips[i].op = "gemm";
        snprintf(skips[i].device, sizeof skips[i].device, "opencl:1");
        snprintf(skips[i].shape, sizeof skips[i].shape, "%zu", 100 + i);
        snprintf(skips[i].reason, sizeof skips[i].reason,
                 "not supported: a reason long enough to need cutting, "
                 "with <markup> & more, repeated until it is far wider than "
                 "the page could ever be, and then some more words");
    }
    bench_case("bench-devices.svg", results, count, skips, 12, roofs, 2);
    bench_case("bench-uncalibrated.svg", results, 3, NULL, 0, NULL, 0);
    bench_case("bench-empty.svg", NULL, 0, skips, 2, NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "numa") && strcmp(argv[2], "bench"))) {
        fprintf(stderr, "usage: svg_views <folder> numa|bench\n");
        return 2;
    }
    folder = argv[1];
    if (strcmp(argv[2], "bench") == 0) {
        bench_cases();
        return failures ? 1 : 0;
    }
    for (size_t n = 1; n <= 8; n *= 2) {
        char name[64];
        snprintf(name, sizeof name, "numa-measured-%zu.svg", n);
        numa_case(name, n, false, false, "this machine", 0, "");
    }
    numa_case("numa-equal-2.svg", 2, true, false, "this machine", 0, "");
    numa_case("numa-equal-1.svg", 1, true, false, "this machine", 0, "");
    numa_case("numa-holes-4.svg", 4, false, true, "this machine", 0,
              "node 2 -> node 1: mbind failed: Cannot allocate memory, "
              "and a message long enough that it must be cut to fit");
    numa_case("numa-hostile-3.svg", 3, false, false,
              "xml:/a/very/long/path/<with>/&/'quotes'/\"and\"/\x01/\xc3/"
              "and/many/more/folders/to/make/it/longer/than/any/page/"
              "would/be/wide/enough/for/topology.xml",
              61, "");
    return failures ? 1 : 0;
}
