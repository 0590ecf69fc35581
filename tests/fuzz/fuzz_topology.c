/* libFuzzer target: hwloc XML topologies given through LOCUS_TOPOLOGY. The
 * input is written to a temporary file and a context is made from it (the
 * CPU backend, one worker); when that works, everything that reads the
 * topology runs: node and distance queries, device info, a buffer placed
 * locally and on node 0, and a small reduce and gemm, whose blocking comes
 * from the cache sizes in the XML. Checked: no crash, leak or undefined
 * behaviour, a failure has a detail, and what the queries return is within
 * the limits the API states. Inputs above 64 KiB are skipped: hwloc's
 * parser cost grows with size and finds nothing new there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hwloc.h>
#include <locus/locus.h>

#define MAX_XML_INPUT 65536

static char path[64];
static int fd = -1;

static void require(int condition, const char *what)
{
    if (!condition) {
        fprintf(stderr, "fuzz_topology: %s (%s)\n", what, locus_last_error());
        abort();
    }
}

static void queries(locus_context *context)
{
    size_t nodes = 0;
    require(locus_numa_node_count(context, &nodes) == LOCUS_SUCCESS, "count");
    require(nodes >= 1 && nodes <= LOCUS_MAX_NUMA_NODES, "node count");
    for (size_t i = 0; i < nodes; i++) {
        locus_numa_node_info info;
        locus_numa_node_info_init(&info);
        require(locus_numa_node_get(context, i, &info) == LOCUS_SUCCESS,
                "node info");
        require(info.os_index >= 0 && info.os_index < LOCUS_MAX_NUMA_NODES,
                "node number");
        for (size_t j = 0; j < nodes; j++) {
            unsigned distance;
            require(locus_numa_distance(context, i, j, &distance) ==
                        LOCUS_SUCCESS,
                    "distance");
        }
    }
    size_t devices = 0;
    require(locus_device_count(context, &devices) == LOCUS_SUCCESS, "devices");
    for (size_t d = 0; d < devices; d++) {
        locus_device *device;
        locus_device_info info;
        locus_device_info_init(&info);
        require(locus_device_get(context, d, &device) == LOCUS_SUCCESS &&
                    locus_device_get_info(device, &info) == LOCUS_SUCCESS,
                "device info");
    }
}

static void small_ops(locus_context *context)
{
    float values[64 * 64];
    for (size_t i = 0; i < 64 * 64; i++)
        values[i] = (float)(i % 13) - 6;
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = LOCUS_PLACE_NODE;
    placement.node = 0;
    locus_buffer *a = NULL, *c = NULL, *pinned = NULL;
    /* Node 0 may not exist in the XML: then a clean placement error. */
    locus_status status =
        locus_buffer_create(context, sizeof values, &placement, &pinned);
    require(status == LOCUS_SUCCESS || status == LOCUS_ERROR_PLACEMENT,
            "node 0 placement");
    if (locus_buffer_create(context, sizeof values, NULL, &a) ==
            LOCUS_SUCCESS &&
        locus_buffer_create(context, sizeof values, NULL, &c) ==
            LOCUS_SUCCESS) {
        require(locus_buffer_write(a, 0, values, sizeof values) ==
                    LOCUS_SUCCESS,
                "write");
        locus_reduce_desc reduce;
        locus_reduce_desc_init(&reduce);
        reduce.count = 64 * 64;
        double sum = 0;
        require(locus_reduce(context, NULL, &reduce, a, &sum, NULL) ==
                    LOCUS_SUCCESS,
                "reduce");
        locus_gemm_desc gemm;
        locus_gemm_desc_init(&gemm);
        gemm.m = gemm.n = gemm.k = 64;
        require(locus_gemm(context, NULL, &gemm, a, a, c, NULL) ==
                    LOCUS_SUCCESS,
                "gemm");
    }
    locus_buffer_destroy(pinned);
    locus_buffer_destroy(a);
    locus_buffer_destroy(c);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size > MAX_XML_INPUT)
        return 0;
    if (fd < 0) {
        setenv("HWLOC_HIDE_ERRORS", "1", 1);
        /* hwloc unloads its plugins (libxml2's importer among them) with
         * the last topology; one kept open keeps them mapped, so that a
         * leak inside them is reported with its names and can be told
         * apart from ours (.ci/lsan.supp). */
        static hwloc_topology_t keep_plugins;
        require(hwloc_topology_init(&keep_plugins) == 0, "hwloc init");
        snprintf(path, sizeof path, "/tmp/locus-fuzz-topology-XXXXXX");
        fd = mkstemp(path);
        require(fd >= 0, "temporary file");
    }
    require(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size,
            "writing the temporary file");

    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.topology = path;
    options.backends = "cpu";
    options.threads = "1"; /* a big XML machine must not mean many threads */
    options.log = "error";
    locus_context *context = NULL;
    locus_status status = locus_context_create(&options, &context);
    if (status != LOCUS_SUCCESS) {
        require(context == NULL, "failed create returned a context");
        require(locus_last_error()[0] != '\0', "failure without a detail");
        return 0;
    }
    queries(context);
    small_ops(context);
    locus_context_destroy(context);
    return 0;
}
