/* Worker grouping on a synthetic two-node topology: workers are ordered by
 * node, node groups are contiguous and balanced, CPU devices exist per node,
 * and the topology says that binding is not real there. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "context_types.h"
#include "expect_error.h"
#include "pool.h"

static locus_context *make(const char *topology, const char *threads)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.topology = topology;
    options.threads = threads;
    options.log = "error";
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

static void check_grouping(const char *topology, const char *threads,
                           int expected_workers, int nodes)
{
    locus_context *context = make(topology, threads);
    if (!context)
        return;
    TEST_EXPECT(!locus_topology_is_this_system(context),
                "%s reported as this system", topology);
    size_t node_count = 0;
    TEST_OK(locus_numa_node_count(context, &node_count));
    TEST_EXPECT(node_count == (size_t)nodes, "%zu nodes, expected %d",
                node_count, nodes);
    int size = locus__pool_size(context->pool);
    TEST_EXPECT(size == expected_workers,
                "%s threads=%s: %d workers, "
                "expected %d",
                topology, threads ? threads : "default", size,
                expected_workers);
    int previous = -1;
    for (int w = 0; w < size; w++) {
        const locus__worker_info *info = locus__pool_worker(context->pool, w);
        TEST_EXPECT(info->node_position >= previous,
                    "worker %d on node %d after a worker on node %d", w,
                    info->node_position, previous);
        TEST_EXPECT(!info->pinned, "worker %d pinned on a synthetic topology",
                    w);
        previous = info->node_position;
    }
    /* Every node gets its share: a pool smaller than the machine spans it. */
    for (int n = 0; n < nodes; n++) {
        int count = locus__pool_count_on(context->pool,
                                         context->topology.nodes[n].os_index);
        TEST_EXPECT(count >= expected_workers / nodes &&
                        count <= (expected_workers + nodes - 1) / nodes,
                    "node %d has %d of %d workers", n, count, expected_workers);
    }
    /* One cpu device for all, and one per node. */
    size_t devices = 0;
    TEST_OK(locus_device_count(context, &devices));
    TEST_EXPECT(devices == (size_t)nodes + 1, "%zu cpu devices, expected %d",
                devices, nodes + 1);
    locus_device *device = NULL;
    if (TEST_OK(locus_device_find(context, "cpu:numa=1", &device)) ==
        LOCUS_SUCCESS) {
        locus_device_info info;
        locus_device_info_init(&info);
        TEST_OK(locus_device_get_info(device, &info));
        TEST_EXPECT(info.nearest_numa_mask == 2 &&
                        strcmp(info.selector, "cpu:numa=1") == 0,
                    "cpu:numa=1 is '%s' with mask %llx", info.selector,
                    (unsigned long long)info.nearest_numa_mask);
    }
    locus_context_destroy(context);
}

static void test_synthetic_placement_is_not_claimed(void)
{
    locus_context *context = make("synthetic:node:2 core:2 pu:1", NULL);
    if (!context)
        return;
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = LOCUS_PLACE_NODE;
    placement.node = 1;
    locus_buffer *buffer = NULL;
    /* The node exists in the description, so the request is valid; nothing
     * is bound, which the context reported when it was made. */
    TEST_OK(locus_buffer_create(context, 1 << 16, &placement, &buffer));
    placement.node = 2;
    TEST_ERROR(locus_buffer_create(context, 1 << 16, &placement,
                                   &(locus_buffer *){NULL}),
               LOCUS_ERROR_PLACEMENT, "node 2 does not exist");
    /* An op's local/remote split is not estimated from unreal placement. */
    if (buffer) {
        float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        TEST_OK(locus_buffer_write(buffer, 0, ones, sizeof ones));
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = 16;
        double sum = 0;
        locus_record record;
        locus_record_init(&record);
        TEST_OK(locus_reduce(context, NULL, &desc, buffer, &sum, &record));
        TEST_EXPECT(sum == 16, "sum %g", sum);
        TEST_EXPECT(record.provenance == LOCUS_PROVENANCE_NONE,
                    "provenance '%s' on a synthetic topology",
                    locus_provenance_str(record.provenance));
        locus_buffer_destroy(buffer);
    }
    locus_context_destroy(context);
}

/* The default on a described topology: one worker a core, at most four
 * a cpu this process runs on, at least one a node (pool.c). */
static int foreign_default(int cores, int nodes)
{
    cpu_set_t set;
    int real = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set)
                   ? CPU_COUNT(&set)
                   : 1;
    int cap = 4 * real > nodes ? 4 * real : nodes;
    return cores < cap ? cores : cap;
}

/* Thousands of described cores start a bounded pool, quickly, whose ops
 * are still right (4096 threads were started on 2 cores before). */
static void check_large_description(const char *topology, int cores, int nodes)
{
    struct timespec begin, end;
    clock_gettime(CLOCK_MONOTONIC, &begin);
    locus_context *context = make(topology, NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    if (!context)
        return;
    int size = locus__pool_size(context->pool);
    TEST_EXPECT(size == foreign_default(cores, nodes),
                "%s: %d workers, expected %d", topology, size,
                foreign_default(cores, nodes));
    double seconds = (double)(end.tv_sec - begin.tv_sec) +
                     1e-9 * (double)(end.tv_nsec - begin.tv_nsec);
    printf("%s: %d workers, context in %.3f s\n", topology, size, seconds);
    float ones[1000];
    for (int i = 0; i < 1000; i++)
        ones[i] = 1.0f;
    locus_buffer *buffer = NULL;
    if (TEST_OK(locus_buffer_create(context, sizeof ones, NULL, &buffer)) ==
            LOCUS_SUCCESS &&
        TEST_OK(locus_buffer_write(buffer, 0, ones, sizeof ones)) ==
            LOCUS_SUCCESS) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = 1000;
        double sum = 0;
        /* On the whole pool: with device NULL the first op would calibrate
         * each of the 65 cpu devices first (issue #20's first-op item). */
        locus_device *cpu = NULL;
        TEST_OK(locus_device_find(context, "cpu", &cpu));
        TEST_OK(locus_reduce(context, cpu, &desc, buffer, &sum, NULL));
        TEST_EXPECT(sum == 1000, "%s: sum %g", topology, sum);
    }
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);
}

int main(void)
{
    check_grouping("synthetic:node:2 core:2 pu:1", NULL, 4, 2);
    check_grouping("synthetic:node:2 core:2 pu:1", "2", 2, 2);
    check_grouping("synthetic:node:2 core:2 pu:2", "6", 6, 2);
    check_grouping("synthetic:pack:2 node:2 core:3 pu:1", NULL,
                   foreign_default(12, 4), 4);
    check_large_description("synthetic:node:4 core:1024 pu:1", 4096, 4);
    /* The node:64 core:512 starts 64 workers too, but hwloc alone
     * takes 12 s to build those 32768 PUs here: 64 a node shows the cap. */
    check_large_description("synthetic:node:64 core:64 pu:1", 4096, 64);
    test_synthetic_placement_is_not_claimed();
    return test_exit_code();
}
