/* locus_buffer_migrate and the next-touch placement, checked against the
 * kernel: page locations from single-page move_pages queries, and each
 * op's record (migrated bytes, local/remote bytes).
 *
 * On one node the checks that need a second report "n/a"; the two-node VM
 * of tests/numa/vm runs them all. The last line is the summary the VM
 * harness parses:
 *   LOCUS-NUMA-MIGRATE nodes=N pass=P fail=F na=A */
#include <errno.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context_types.h"
#include "expect_error.h"
#include "pool.h"

static locus_context *context;
static size_t node_count;
static int node_ids[LOCUS_MAX_NUMA_NODES];
static size_t page;
static int passed, failed, not_applicable;
static char record_path[256];

static void check(const char *name, void (*run)(void))
{
    int before = test_failures();
    run();
    bool ok = test_failures() == before;
    printf("check %-28s %s\n", name, ok ? "pass" : "FAIL");
    fflush(stdout);
    ok ? passed++ : failed++;
}

static void skip(const char *name, const char *why)
{
    printf("check %-28s n/a (%s)\n", name, why);
    not_applicable++;
}

static int page_node(const void *address)
{
    void *pages[1] = {(void *)((uintptr_t)address & ~(uintptr_t)(page - 1))};
    int status[1] = {-1};
    if (move_pages(0, 1, pages, NULL, status, 0) != 0)
        return -errno;
    return status[0];
}

/* Pages of [memory, memory + bytes) not on `node`, by the kernel. */
static size_t pages_elsewhere(const void *memory, size_t bytes, int node)
{
    size_t elsewhere = 0;
    for (size_t offset = 0; offset < bytes; offset += page)
        elsewhere += page_node((const char *)memory + offset) != node;
    return elsewhere;
}

static locus_buffer *placed(locus_context *in, locus_placement_policy policy,
                            int node, size_t bytes)
{
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = policy;
    placement.node = node;
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(in, bytes, &placement, &buffer));
    return buffer;
}

/* Ones in every element, so that sums check; returns the host pages. */
static float *fill_ones(locus_buffer *buffer, size_t count)
{
    float *host = NULL;
    if (TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ_WRITE,
                                 (void **)&host)) != LOCUS_SUCCESS)
        return NULL;
    for (size_t i = 0; i < count; i++)
        host[i] = 1.0f;
    TEST_OK(locus_buffer_unmap(buffer));
    return host;
}

static locus_device *cpu_of(locus_context *in, int node)
{
    char selector[32] = "cpu";
    if (node >= 0)
        snprintf(selector, sizeof selector, "cpu:numa=%d", node);
    locus_device *device = NULL;
    TEST_OK(locus_device_find(in, selector, &device));
    return device;
}

/* A sum on `device`; its record comes back. */
static void sum_on(locus_context *in, locus_device *device,
                   locus_buffer *buffer, size_t count, locus_record *record)
{
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = count;
    double sum = 0;
    locus_record_init(record);
    TEST_OK(locus_reduce(in, device, &desc, buffer, &sum, record));
    TEST_EXPECT(sum == (double)count, "sum %g, expected %zu", sum, count);
}

/* The record file's last line holding `needle`, or "" */
static void last_record_with(const char *needle, char *line, size_t capacity)
{
    line[0] = '\0';
    FILE *file = fopen(record_path, "r");
    if (!file)
        return;
    char text[4096];
    while (fgets(text, sizeof text, file))
        if (strstr(text, needle))
            snprintf(line, capacity, "%s", text);
    fclose(file);
}

static unsigned long long field_of(const char *line, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(line, key);
    return at ? strtoull(at + strlen(key), NULL, 10) : ~0ull;
}

static void migrate_errors(void)
{
    TEST_ERROR(locus_buffer_migrate(NULL, 0), LOCUS_ERROR_NULL_ARGUMENT,
               "buffer is NULL");
    size_t bytes = 8 * page;
    locus_buffer *buffer =
        placed(context, LOCUS_PLACE_NODE, node_ids[0], bytes);
    if (!buffer)
        return;
    TEST_ERROR(locus_buffer_migrate(buffer, 99), LOCUS_ERROR_PLACEMENT,
               "NUMA node 99 is not one of the context's");
    TEST_ERROR(locus_buffer_migrate(buffer, -1), LOCUS_ERROR_PLACEMENT,
               "NUMA node -1");
    void *host = NULL;
    TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ, &host));
    TEST_ERROR(locus_buffer_migrate(buffer, node_ids[0]), LOCUS_ERROR_BUSY,
               "is mapped");
    TEST_OK(locus_buffer_unmap(buffer));
    locus_buffer_destroy(buffer);

    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = (locus_placement_policy)6;
    locus_buffer *refused = NULL;
    TEST_ERROR(locus_buffer_create(context, bytes, &placement, &refused),
               LOCUS_ERROR_INVALID_ARGUMENT, "placement policy 6 is unknown");

    /* A what-if topology binds nothing, so there is nothing to move. */
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.log = "error";
    options.topology = "synthetic:pack:1 numa:2 core:1 pu:1";
    locus_context *what_if = NULL;
    if (TEST_OK(locus_context_create(&options, &what_if)) != LOCUS_SUCCESS)
        return;
    locus_buffer *simulated =
        placed(what_if, LOCUS_PLACE_NEXT_TOUCH, -1, bytes);
    if (simulated)
        TEST_ERROR(locus_buffer_migrate(simulated, 1),
                   LOCUS_ERROR_NOT_SUPPORTED, "simulated");
    locus_buffer_destroy(simulated);
    locus_context_destroy(what_if);
}

/* To the node the pages are on already: nothing moves, the record says 0. */
static void migrate_in_place(void)
{
    size_t bytes = 40 * page + 12;
    locus_buffer *buffer =
        placed(context, LOCUS_PLACE_NODE, node_ids[0], bytes);
    float *host = buffer ? fill_ones(buffer, bytes / 4) : NULL;
    if (!host)
        return;
    TEST_OK(locus_buffer_migrate(buffer, node_ids[0]));
    TEST_EXPECT(pages_elsewhere(host, bytes, node_ids[0]) == 0,
                "pages left node %d", node_ids[0]);
    char line[4096];
    last_record_with("\"op\":\"migrate\"", line, sizeof line);
    TEST_EXPECT(field_of(line, "migrated_bytes") == 0 &&
                    field_of(line, "buffer_address") ==
                        (unsigned long long)(uintptr_t)host &&
                    field_of(line, "bytes") == bytes,
                "migrate record: '%s'", line);
    locus_buffer_destroy(buffer);
}

/* Node 0 to the last node: every page there, the page map follows (a sum
 * there is all local, one on node 0 all remote), and the record counts
 * every byte. */
static void migrate_across(void)
{
    int from = node_ids[0], to = node_ids[node_count - 1];
    size_t count = 300 * page / 4 + 7, bytes = count * 4;
    locus_buffer *buffer = placed(context, LOCUS_PLACE_NODE, from, bytes);
    float *host = buffer ? fill_ones(buffer, count) : NULL;
    if (!host)
        return;
    locus_record record;
    sum_on(context, cpu_of(context, from), buffer, count, &record);
    TEST_EXPECT(record.remote_bytes == 0, "before: remote %llu",
                (unsigned long long)record.remote_bytes);
    TEST_OK(locus_buffer_migrate(buffer, to));
    TEST_EXPECT(pages_elsewhere(host, bytes, to) == 0,
                "%zu pages are not on node %d",
                pages_elsewhere(host, bytes, to), to);
    locus_page_report report;
    locus_page_report_init(&report);
    TEST_OK(locus_buffer_query_pages(buffer, &report));
    TEST_EXPECT(report.pages_on_node[to] == report.pages_total,
                "page query: %zu of %zu on node %d", report.pages_on_node[to],
                report.pages_total, to);
    char line[4096];
    last_record_with("\"op\":\"migrate\"", line, sizeof line);
    TEST_EXPECT(field_of(line, "migrated_bytes") == bytes &&
                    field_of(line, "migrate_node") == (unsigned)to,
                "migrate record: '%s'", line);
    sum_on(context, cpu_of(context, to), buffer, count, &record);
    TEST_EXPECT(record.remote_bytes == 0 && record.local_bytes == bytes,
                "read on node %d after the move: local %llu remote %llu", to,
                (unsigned long long)record.local_bytes,
                (unsigned long long)record.remote_bytes);
    sum_on(context, cpu_of(context, from), buffer, count, &record);
    TEST_EXPECT(record.remote_bytes == bytes,
                "read on node %d after the move: remote %llu of %zu", from,
                (unsigned long long)record.remote_bytes, bytes);
    locus_buffer_destroy(buffer);
}

/* The application's memory moves too, and stays the application's. */
static void migrate_wrapped(void)
{
    int to = node_ids[node_count - 1];
    size_t count = 64 * page / 4, bytes = count * 4;
    float *memory = aligned_alloc(page, bytes);
    if (!memory) {
        TEST_EXPECT(false, "aligned_alloc");
        return;
    }
    for (size_t i = 0; i < count; i++)
        memory[i] = 1.0f;
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_wrap(context, memory, bytes, &buffer));
    TEST_OK(locus_buffer_migrate(buffer, to));
    TEST_EXPECT(pages_elsewhere(memory, bytes, to) == 0,
                "wrapped: %zu pages not on node %d",
                pages_elsewhere(memory, bytes, to), to);
    locus_record record;
    sum_on(context, cpu_of(context, to), buffer, count, &record);
    locus_buffer_destroy(buffer);
    TEST_EXPECT(memory[count - 1] == 1.0f, "the wrapped memory changed");
    free(memory);
}

/* Created (and so first touched) under a node-0 binding of this thread;
 * the first op, on the last node, moves every page there and reads them
 * all locally; the second op, on node 0, moves nothing: once. */
static void next_touch_once(locus_context *in, bool from_env)
{
    int from = node_ids[0], to = node_ids[node_count - 1];
    size_t count = 200 * page / 4 + 5, bytes = count * 4;
    unsigned long mask = 1ul << from;
    TEST_EXPECT(set_mempolicy(MPOL_BIND, &mask, sizeof mask * 8) == 0,
                "set_mempolicy: %s", strerror(errno));
    locus_buffer *buffer = placed(
        in, from_env ? LOCUS_PLACE_DEFAULT : LOCUS_PLACE_NEXT_TOUCH, -1, bytes);
    float *host = buffer ? fill_ones(buffer, count) : NULL;
    set_mempolicy(MPOL_DEFAULT, NULL, 0);
    if (!host)
        return;
    TEST_EXPECT(pages_elsewhere(host, bytes, from) == 0,
                "before the first op, pages are not all on node %d", from);
    locus_record record;
    sum_on(in, cpu_of(in, to), buffer, count, &record);
    TEST_EXPECT(pages_elsewhere(host, bytes, to) == 0,
                "after the first op on node %d, %zu pages are elsewhere", to,
                pages_elsewhere(host, bytes, to));
    TEST_EXPECT(record.migrated_bytes == bytes && record.migrate_node == to,
                "first op: migrated %llu bytes to node %d, expected %zu to "
                "%d",
                (unsigned long long)record.migrated_bytes, record.migrate_node,
                bytes, to);
    TEST_EXPECT(record.remote_bytes == 0 && record.local_bytes == bytes,
                "first op: local %llu remote %llu",
                (unsigned long long)record.local_bytes,
                (unsigned long long)record.remote_bytes);
    sum_on(in, cpu_of(in, from), buffer, count, &record);
    TEST_EXPECT(record.migrated_bytes == 0 && record.remote_bytes == bytes,
                "second op: migrated %llu, remote %llu (want 0, %zu)",
                (unsigned long long)record.migrated_bytes,
                (unsigned long long)record.remote_bytes, bytes);
    TEST_EXPECT(pages_elsewhere(host, bytes, to) == 0,
                "the second op moved pages again");
    locus_buffer_destroy(buffer);
}

static void next_touch(void)
{
    next_touch_once(context, false);
}

static void next_touch_env(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.log = "error";
    options.numa = "next-touch";
    locus_context *env_context = NULL;
    if (TEST_OK(locus_context_create(&options, &env_context)) != LOCUS_SUCCESS)
        return;
    next_touch_once(env_context, true);
    locus_context_destroy(env_context);
}

/* On the device of every node, each page goes to the node of the worker
 * whose share of the canonical split holds it, as `local` would place it. */
static void next_touch_spread(void)
{
    size_t bytes = 256 * page;
    unsigned long mask = 1ul << node_ids[0];
    set_mempolicy(MPOL_BIND, &mask, sizeof mask * 8);
    locus_buffer *buffer = placed(context, LOCUS_PLACE_NEXT_TOUCH, -1, bytes);
    float *host = buffer ? fill_ones(buffer, bytes / 4) : NULL;
    set_mempolicy(MPOL_DEFAULT, NULL, 0);
    if (!host)
        return;
    locus_record record;
    sum_on(context, cpu_of(context, -1), buffer, bytes / 4, &record);
    const locus__pool *pool = context->pool;
    int ranks = locus__pool_size(pool);
    size_t wrong = 0;
    for (int rank = 0; rank < ranks; rank++) {
        size_t begin, end;
        locus__pool_split(bytes, page, rank, ranks, &begin, &end);
        int node = locus__pool_worker(pool, rank)->node_os_index;
        wrong += pages_elsewhere((char *)host + begin, end - begin, node);
    }
    TEST_EXPECT(wrong == 0, "%zu pages are not on their worker's node", wrong);
    TEST_EXPECT(record.migrated_bytes > 0 && record.migrate_node == -1 &&
                    record.remote_bytes == 0,
                "spread: migrated %llu (node %d), remote %llu",
                (unsigned long long)record.migrated_bytes, record.migrate_node,
                (unsigned long long)record.remote_bytes);
    locus_buffer_destroy(buffer);
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    const char *tmp = getenv("TMPDIR");
    snprintf(record_path, sizeof record_path, "%s/locus-migrate-%ld.jsonl",
             tmp && tmp[0] ? tmp : "/tmp", (long)getpid());
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.log = "error";
    options.record = record_path;
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
        return 1;
    if (!locus_topology_is_this_system(context)) {
        fprintf(stderr, "the topology is not this machine's\n");
        return 1;
    }
    TEST_OK(locus_numa_node_count(context, &node_count));
    for (size_t i = 0; i < node_count; i++) {
        locus_numa_node_info info;
        locus_numa_node_info_init(&info);
        TEST_OK(locus_numa_node_get(context, i, &info));
        node_ids[i] = info.os_index;
    }
    const char *one_node = "this machine has one NUMA node";
    check("migrate-errors", migrate_errors);
    check("migrate-in-place", migrate_in_place);
    void (*const two_node[])(void) = {migrate_across, migrate_wrapped,
                                      next_touch, next_touch_env,
                                      next_touch_spread};
    const char *names[] = {"migrate-across", "migrate-wrapped", "next-touch",
                           "next-touch-env", "next-touch-spread"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (node_count > 1)
            check(names[i], two_node[i]);
        else
            skip(names[i], one_node);
    }
    locus_context_destroy(context);
    unlink(record_path);
    printf("LOCUS-NUMA-MIGRATE nodes=%zu pass=%d fail=%d na=%d\n", node_count,
           passed, failed, not_applicable);
    return test_exit_code();
}
