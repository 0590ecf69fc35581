/* Placement on the real machine, checked by page queries: node:N puts every
 * page on N, a node that does not exist fails cleanly, interleave spreads
 * pages over the nodes, local pages sit with the workers that touched them,
 * and the page query tells untouched and zero pages apart. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "expect_error.h"

static locus_context *context;
static size_t node_count;
static int node_ids[LOCUS_MAX_NUMA_NODES];

static locus_buffer *placed(locus_placement_policy policy, int node,
                            size_t bytes)
{
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = policy;
    placement.node = node;
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(context, bytes, &placement, &buffer));
    return buffer;
}

static void report_pages(locus_buffer *buffer, locus_page_report *report)
{
    locus_page_report_init(report);
    TEST_OK(locus_buffer_query_pages(buffer, report));
}

static void test_node_placement(void)
{
    for (size_t i = 0; i < node_count; i++) {
        size_t bytes = 64 * 4096 + 123;
        locus_buffer *buffer = placed(LOCUS_PLACE_NODE, node_ids[i], bytes);
        if (!buffer)
            continue;
        locus_page_report report;
        report_pages(buffer, &report);
        TEST_EXPECT(report.pages_on_node[node_ids[i]] == report.pages_total &&
                        report.pages_total >= 65,
                    "node:%d placed %zu of %zu pages there", node_ids[i],
                    report.pages_on_node[node_ids[i]], report.pages_total);
        locus_buffer_destroy(buffer);
    }
    /* The first node number the machine lacks. */
    int missing = 0;
    for (size_t i = 0; i < node_count; i++)
        if (node_ids[i] >= missing)
            missing = node_ids[i] + 1;
    char fragment[64];
    snprintf(fragment, sizeof fragment, "node %d does not exist", missing);
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = LOCUS_PLACE_NODE;
    placement.node = missing;
    locus_buffer *buffer = NULL;
    TEST_ERROR(locus_buffer_create(context, 4096, &placement, &buffer),
               LOCUS_ERROR_PLACEMENT, fragment);
    TEST_EXPECT(buffer == NULL, "failed placement left a buffer");
}

static void test_interleave(void)
{
    size_t pages = 32 * node_count;
    locus_buffer *buffer =
        placed(LOCUS_PLACE_INTERLEAVE, -1, pages * (size_t)getpagesize());
    if (!buffer)
        return;
    locus_page_report report;
    report_pages(buffer, &report);
    for (size_t i = 0; i < node_count; i++)
        TEST_EXPECT(report.pages_on_node[node_ids[i]] * node_count >= pages / 2,
                    "interleave put %zu of %zu pages on node %d",
                    report.pages_on_node[node_ids[i]], pages, node_ids[i]);
    locus_buffer_destroy(buffer);
}

static void test_local(void)
{
    locus_buffer *buffer = placed(LOCUS_PLACE_LOCAL, -1, 1 << 20);
    if (!buffer)
        return;
    locus_page_report report;
    report_pages(buffer, &report);
    size_t on_nodes = 0;
    for (size_t i = 0; i < node_count; i++)
        on_nodes += report.pages_on_node[node_ids[i]];
    TEST_EXPECT(on_nodes == report.pages_total,
                "local placement left %zu of %zu pages untouched",
                report.pages_total - on_nodes, report.pages_total);
    /* A reduce over it with the same split reads only local pages. */
    float *host = NULL;
    TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_WRITE, (void **)&host));
    if (host)
        for (size_t i = 0; i < (1 << 20) / sizeof(float); i++)
            host[i] = 1.0f;
    TEST_OK(locus_buffer_unmap(buffer));
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = (1 << 20) / sizeof(float);
    double sum = 0;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_reduce(context, NULL, &desc, buffer, &sum, &record));
    TEST_EXPECT(sum == (double)desc.count, "sum %g", sum);
    TEST_EXPECT(record.provenance == LOCUS_PROVENANCE_ESTIMATED &&
                    record.local_bytes + record.remote_bytes == 1 << 20,
                "record: local %llu remote %llu provenance %s",
                (unsigned long long)record.local_bytes,
                (unsigned long long)record.remote_bytes,
                locus_provenance_str(record.provenance));
    if (node_count == 1)
        TEST_EXPECT(record.remote_bytes == 0, "one node, yet %llu remote bytes",
                    (unsigned long long)record.remote_bytes);
    locus_buffer_destroy(buffer);
}

static void test_untouched_and_zero_pages(void)
{
    size_t page = (size_t)getpagesize();
    unsigned char *memory = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!TEST_EXPECT(memory != MAP_FAILED, "mmap"))
        return;
    memory[0] = 1;                              /* touched */
    volatile unsigned char read = memory[page]; /* the shared zero page */
    (void)read;
    locus_page_report report;
    locus_page_report_init(&report);
    TEST_OK(locus_query_pages(memory, 4 * page, 0, &report));
    size_t placed_pages = 0;
    for (int n = 0; n < LOCUS_MAX_NUMA_NODES; n++)
        placed_pages += report.pages_on_node[n];
    /* The zero page is EFAULT everywhere. Pages never touched are ENOENT
     * on recent kernels, but EFAULT where the range has no page table yet
     * (Linux 6.1's follow_page with FOLL_DUMP, seen in the 2-node VM). */
    TEST_EXPECT(report.pages_total == 4 && placed_pages == 1 &&
                    report.pages_unmapped >= 1 &&
                    report.pages_untouched + report.pages_unmapped == 3,
                "pages: %zu total, %zu placed, %zu untouched, %zu zero",
                report.pages_total, placed_pages, report.pages_untouched,
                report.pages_unmapped);
    /* Sampling a range queries at most the samples asked for. */
    TEST_OK(locus_query_pages(memory, 4 * page, 2, &report));
    TEST_EXPECT(report.pages_queried == 2, "queried %zu pages",
                report.pages_queried);
    munmap(memory, 4 * page);
}

int main(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
        return 1;
    if (!locus_topology_is_this_system(context)) {
        fprintf(stderr, "topology is not this machine's\n");
        return 1;
    }
    TEST_OK(locus_numa_node_count(context, &node_count));
    for (size_t i = 0; i < node_count; i++) {
        locus_numa_node_info info;
        locus_numa_node_info_init(&info);
        TEST_OK(locus_numa_node_get(context, i, &info));
        node_ids[i] = info.os_index;
    }
    printf("%zu NUMA node(s)\n", node_count);
    test_node_placement();
    test_interleave();
    test_local();
    test_untouched_and_zero_pages();
    locus_context_destroy(context);
    return test_exit_code();
}
