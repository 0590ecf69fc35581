/* Worker grouping on a synthetic two-node topology: workers are ordered by
 * node, node groups are contiguous and balanced, CPU devices exist per node,
 * and the topology says that binding is not real there. */
#include <string.h>

#include "context.h"
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

int main(void)
{
    check_grouping("synthetic:node:2 core:2 pu:1", NULL, 4, 2);
    check_grouping("synthetic:node:2 core:2 pu:1", "2", 2, 2);
    check_grouping("synthetic:node:2 core:2 pu:2", "6", 6, 2);
    check_grouping("synthetic:pack:2 node:2 core:3 pu:1", NULL, 12, 4);
    test_synthetic_placement_is_not_claimed();
    return test_exit_code();
}
