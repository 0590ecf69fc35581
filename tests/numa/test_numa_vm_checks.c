/* NUMA truth on whatever machine this runs on, checked against the kernel
 * rather than against Locus's own bookkeeping: page locations come from
 * single-page move_pages queries and worker cpus from getcpu(2).
 *
 * On a machine of two or more nodes (the 2-node VM of tests/numa/vm) every
 * check applies. On one node, the checks that need a second node report
 * "n/a" and the rest still run. The last line is the summary the VM harness
 * parses:
 *   LOCUS-NUMA-CHECKS nodes=N pass=P fail=F na=A
 *
 * argv[1], when given, is the directory of the fake device module
 * (tests/unit/modules/fake_device), for the device transfer checks. */
#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "account.h"
#include "context_types.h"
#include "expect_error.h"
#include "pool.h"

static locus_context *context;
static size_t node_count;
static int node_ids[LOCUS_MAX_NUMA_NODES];
static size_t page;
static int passed, failed, not_applicable;

/* Runs one named check: its TEST_EXPECTs decide pass or fail. */
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

/* The kernel's node for one page: >= 0, or a negative errno. */
static int page_node(const void *address)
{
    void *pages[1] = {(void *)((uintptr_t)address & ~(uintptr_t)(page - 1))};
    int status[1] = {-1};
    if (move_pages(0, 1, pages, NULL, status, 0) != 0)
        return -errno;
    return status[0];
}

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

/* The host pages of a buffer, filled with ones (so sums are checkable). */
static float *host_of(locus_buffer *buffer, size_t bytes)
{
    float *host = NULL;
    if (TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ_WRITE,
                                 (void **)&host)) != LOCUS_SUCCESS)
        return NULL;
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        host[i] = 1.0f;
    TEST_OK(locus_buffer_unmap(buffer));
    return host;
}

static void node_placement(void)
{
    for (size_t n = 0; n < node_count; n++) {
        size_t bytes = 48 * page + 100;
        locus_buffer *buffer = placed(LOCUS_PLACE_NODE, node_ids[n], bytes);
        unsigned char *host =
            buffer ? (unsigned char *)host_of(buffer, bytes) : NULL;
        size_t elsewhere = 0, first_bad = 0;
        for (size_t p = 0; host && p * page < bytes; p++)
            if (page_node(host + p * page) != node_ids[n] && !elsewhere++)
                first_bad = p;
        TEST_EXPECT(host && elsewhere == 0,
                    "node:%d: %zu of 49 pages elsewhere (first: page %zu on "
                    "%d)",
                    node_ids[n], elsewhere, first_bad,
                    host ? page_node(host + first_bad * page) : -1);
        locus_buffer_destroy(buffer);
    }
}

/* `local`: each worker's share of the canonical split sits on its node. */
static void local_placement(void)
{
    size_t bytes = 64 * page * (size_t)locus__pool_size(context->pool);
    locus_buffer *buffer = placed(LOCUS_PLACE_LOCAL, -1, bytes);
    unsigned char *host =
        buffer ? (unsigned char *)host_of(buffer, bytes) : NULL;
    int workers = locus__pool_size(context->pool);
    for (int w = 0; host && w < workers; w++) {
        int node = locus__pool_worker(context->pool, w)->node_os_index;
        size_t begin, end, wrong = 0;
        locus__pool_split(bytes, page, w, workers, &begin, &end);
        for (size_t at = begin; at < end; at += page)
            wrong += page_node(host + at) != node;
        TEST_EXPECT(wrong == 0,
                    "worker %d (node %d): %zu of its %zu pages elsewhere", w,
                    node, wrong, (end - begin) / page);
    }
    TEST_EXPECT(host != NULL, "no local buffer");
    locus_buffer_destroy(buffer);
}

/* `interleave`: consecutive pages take the nodes in turn. */
static void interleave_placement(void)
{
    size_t pages = 16 * node_count;
    locus_buffer *buffer = placed(LOCUS_PLACE_INTERLEAVE, -1, pages * page);
    unsigned char *host =
        buffer ? (unsigned char *)host_of(buffer, pages * page) : NULL;
    int nodes[64 * LOCUS_MAX_NUMA_NODES];
    size_t breaks = 0;
    for (size_t p = 0; host && p < pages; p++) {
        nodes[p] = page_node(host + p * page);
        /* Within each run of node_count pages, every node once. */
        for (size_t q = p - p % node_count; q < p; q++)
            breaks += nodes[q] == nodes[p];
        if (p >= node_count)
            breaks += nodes[p] != nodes[p - node_count];
    }
    TEST_EXPECT(host && breaks == 0,
                "interleave over %zu nodes: %zu pages break the rotation "
                "(first pages on %d %d %d %d)",
                node_count, breaks, nodes[0], nodes[1], nodes[2], nodes[3]);
    locus_buffer_destroy(buffer);
}

typedef struct where {
    unsigned cpu[1024];
    unsigned node[1024];
} where;

static void record_where(void *arg, int rank, int ranks)
{
    (void)ranks;
    where *w = arg;
    int index = locus__pool_current_worker();
    if (index < 0 || index >= 1024 || rank >= 1024)
        return;
    getcpu(&w->cpu[index], &w->node[index]);
}

/* Every worker pinned, and the kernel runs it on its node. */
static void workers_pinned(void)
{
    static where w;
    memset(&w, 0xff, sizeof w);
    TEST_OK(locus__pool_run(context->pool, -1, record_where, &w));
    int workers = locus__pool_size(context->pool);
    int per_node[LOCUS_MAX_NUMA_NODES] = {0};
    for (int i = 0; i < workers && i < 1024; i++) {
        const locus__worker_info *info = locus__pool_worker(context->pool, i);
        TEST_EXPECT(info->pinned, "worker %d is not pinned", i);
        TEST_EXPECT(w.cpu[i] == (unsigned)info->cpu &&
                        w.node[i] == (unsigned)info->node_os_index,
                    "worker %d: bound to cpu %d (node %d), the kernel ran it "
                    "on cpu %u (node %u)",
                    i, info->cpu, info->node_os_index, w.cpu[i], w.node[i]);
        if (info->node_os_index >= 0 &&
            info->node_os_index < LOCUS_MAX_NUMA_NODES)
            per_node[info->node_os_index]++;
    }
    for (size_t n = 0; n < node_count; n++)
        TEST_EXPECT(per_node[node_ids[n]] > 0, "no worker on node %d",
                    node_ids[n]);
}

/* Bytes of [memory, memory + bytes) whose pages are not on `node`, by
 * single-page queries: the ground truth for a reader on that node. */
static uint64_t truth_remote(const unsigned char *memory, size_t bytes,
                             int node)
{
    uint64_t remote = 0;
    for (size_t at = 0; at < bytes;) {
        size_t in_page = page - ((uintptr_t)(memory + at) & (page - 1));
        size_t take = in_page < bytes - at ? in_page : bytes - at;
        int where_page = page_node(memory + at);
        if (where_page >= 0 && where_page != node)
            remote += take;
        at += take;
    }
    return remote;
}

static locus_device *cpu_of_node(int node)
{
    char selector[32];
    snprintf(selector, sizeof selector, "cpu:numa=%d", node);
    locus_device *device = NULL;
    TEST_OK(locus_device_find(context, selector, &device));
    return device;
}

/* A reduce on node `reader`'s workers over `buffer`; its record must match
 * the truth exactly. */
static void reduce_matches_truth(locus_buffer *buffer, const float *host,
                                 size_t count, int reader, const char *what)
{
    locus_device *device = cpu_of_node(reader);
    if (!device || !host)
        return;
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = count;
    double sum = 0;
    locus_record record;
    locus_record_init(&record);
    uint64_t bytes = count * sizeof(float);
    uint64_t remote =
        truth_remote((const unsigned char *)host, (size_t)bytes, reader);
    TEST_OK(locus_reduce(context, device, &desc, buffer, &sum, &record));
    TEST_EXPECT(sum == (double)count, "%s: sum %g, expected %zu", what, sum,
                count);
    TEST_EXPECT(record.provenance != LOCUS_PROVENANCE_NONE,
                "%s: provenance none", what);
    /* Counters measure a split of DRAM reads, not the page truth. */
    if (record.provenance == LOCUS_PROVENANCE_ESTIMATED)
        TEST_EXPECT(record.remote_bytes == remote &&
                        record.local_bytes == bytes - remote,
                    "%s, read on node %d: local %llu remote %llu; truth: "
                    "local %llu remote %llu",
                    what, reader, (unsigned long long)record.local_bytes,
                    (unsigned long long)record.remote_bytes,
                    (unsigned long long)(bytes - remote),
                    (unsigned long long)remote);
    else
        TEST_EXPECT(record.local_bytes + record.remote_bytes == bytes,
                    "%s: counted local %llu + remote %llu != %llu bytes", what,
                    (unsigned long long)record.local_bytes,
                    (unsigned long long)record.remote_bytes,
                    (unsigned long long)bytes);
}

/* All pages on the last node, read by the first node's workers: every byte
 * remote, none local. */
static void remote_reduce(void)
{
    int home = node_ids[node_count - 1], reader = node_ids[0];
    size_t count = 300 * page / sizeof(float) + 7;
    locus_buffer *buffer = placed(LOCUS_PLACE_NODE, home, count * 4);
    const float *host = buffer ? host_of(buffer, count * 4) : NULL;
    TEST_EXPECT(!host || truth_remote((const unsigned char *)host, count * 4,
                                      reader) == count * 4,
                "the buffer on node %d is not all remote to node %d", home,
                reader);
    reduce_matches_truth(buffer, host, count, reader, "remote buffer");
    locus_buffer_destroy(buffer);
}

/* One node's workers over its own memory: every byte local (one node). */
static void local_reduce(void)
{
    int node = node_ids[0];
    size_t count = 100 * page / sizeof(float) + 3;
    locus_buffer *buffer = placed(LOCUS_PLACE_NODE, node, count * 4);
    const float *host = buffer ? host_of(buffer, count * 4) : NULL;
    reduce_matches_truth(buffer, host, count, node, "buffer on the reader");
    locus_buffer_destroy(buffer);
}

/* Interleaved pages read by one node's workers, from an odd offset: the
 * split must follow every page, partial ones included. 333 pages and the
 * 64-sample estimate of old would alias (every sample on one parity). */
static void interleaved_reduce(void)
{
    size_t bytes = 333 * page;
    locus_buffer *buffer = placed(LOCUS_PLACE_INTERLEAVE, -1, bytes);
    const float *host = buffer ? host_of(buffer, bytes) : NULL;
    for (size_t n = 0; n < node_count; n++)
        reduce_matches_truth(buffer, host, bytes / 4 - 123, node_ids[n],
                             "interleaved buffer");
    locus_buffer_destroy(buffer);
}

/* A worker's reads at odd offsets straight into the accounting: exact to
 * the byte for partial pages at both ends. */
typedef struct odd_reads {
    locus__account *account;
    const unsigned char *base;
    size_t bytes;
} odd_reads;

static void read_odd(void *arg, int rank, int ranks)
{
    const odd_reads *job = arg;
    size_t begin, end;
    locus__pool_split(job->bytes, 1, rank, ranks, &begin, &end);
    begin += begin ? 13 : 5; /* overlap the neighbour's range, unaligned */
    if (begin < end)
        locus__account_read(job->account, job->base + begin, end - begin);
}

/* The buffer's host pages (host_of) and an accounting begun for reads of
 * them; false, the buffer destroyed, when either fails. */
static bool accounting_on(locus_buffer *buffer, size_t bytes,
                          const unsigned char **host, locus__account *account)
{
    *host = buffer ? (const unsigned char *)host_of(buffer, bytes) : NULL;
    if (*host && TEST_OK(locus__account_begin(account, &context->topology,
                                              context->pool)) == LOCUS_SUCCESS)
        return true;
    locus_buffer_destroy(buffer);
    return false;
}

static void odd_ranges(void)
{
    size_t bytes = 97 * page;
    locus_buffer *buffer = placed(LOCUS_PLACE_INTERLEAVE, -1, bytes);
    const unsigned char *host;
    locus__account account;
    if (!accounting_on(buffer, bytes, &host, &account))
        return;
    odd_reads job = {&account, host, bytes};
    TEST_OK(locus__pool_run(context->pool, -1, read_odd, &job));
    uint64_t local = 0, remote = 0;
    int workers = locus__pool_size(context->pool);
    for (int w = 0; w < workers; w++) {
        size_t begin, end;
        locus__pool_split(bytes, 1, w, workers, &begin, &end);
        begin += begin ? 13 : 5;
        if (begin >= end)
            continue;
        int node = locus__pool_worker(context->pool, w)->node_os_index;
        uint64_t r = truth_remote(host + begin, end - begin, node);
        remote += r;
        local += end - begin - r;
    }
    locus__account_result result;
    locus__account_finish(&account, &result);
    locus__account_release(&account);
    if (result.provenance == LOCUS_PROVENANCE_ESTIMATED)
        TEST_EXPECT(result.local_bytes == local &&
                        result.remote_bytes == remote,
                    "odd ranges: local %llu remote %llu; truth: local %llu "
                    "remote %llu",
                    (unsigned long long)result.local_bytes,
                    (unsigned long long)result.remote_bytes,
                    (unsigned long long)local, (unsigned long long)remote);
    locus_buffer_destroy(buffer);
}

/* Every worker reads the same strided rows (one row per channel of an
 * image) and records them as one range (locus__account_read_rows), or in
 * `pieces` ranges of consecutive columns, as a worker taking its share of
 * an image a piece at a time does: their spans overlap, so the account
 * merges them into one record, which must give the same sums. */
#define STRIDED_ROWS 37
#define STRIDED_ROW_BYTES 1000
typedef struct strided_reads {
    locus__account *account;
    const unsigned char *base;
    size_t stride, pieces;
} strided_reads;

static void read_strided(void *arg, int rank, int ranks)
{
    const strided_reads *job = arg;
    (void)rank;
    (void)ranks;
    for (size_t k = 0; k < job->pieces; k++) {
        size_t b0 = k * STRIDED_ROW_BYTES / job->pieces,
               b1 = (k + 1) * STRIDED_ROW_BYTES / job->pieces;
        locus__account_read_rows(job->account, job->base + 7 + b0, b1 - b0,
                                 job->stride, STRIDED_ROWS);
    }
}

/* Strided rows on one node's pages: exact, every reader's bytes local on
 * that node and remote elsewhere; on interleaved pages an estimate (the
 * span's split scaled), whose local and remote still add up to the bytes
 * read. Read whole or in `pieces`. */
static void strided_rows_in(size_t pieces)
{
    size_t stride = 3 * page + 100;
    size_t bytes = STRIDED_ROWS * stride + page;
    uint64_t read = (uint64_t)STRIDED_ROWS * STRIDED_ROW_BYTES;
    int workers = locus__pool_size(context->pool);
    for (size_t n = 0; n <= node_count; n++) {
        int interleaved = n == node_count;
        if (interleaved && node_count < 2)
            break;
        locus_buffer *buffer =
            interleaved ? placed(LOCUS_PLACE_INTERLEAVE, -1, bytes)
                        : placed(LOCUS_PLACE_NODE, node_ids[n], bytes);
        const unsigned char *host;
        locus__account account;
        if (!accounting_on(buffer, bytes, &host, &account))
            return;
        strided_reads job = {&account, host, stride, pieces};
        TEST_OK(locus__pool_run(context->pool, -1, read_strided, &job));
        locus__account_result result;
        locus__account_finish(&account, &result);
        locus__account_release(&account);
        locus_buffer_destroy(buffer);
        uint64_t total = (uint64_t)workers * read, local = 0;
        for (int w = 0; !interleaved && w < workers; w++)
            if (locus__pool_worker(context->pool, w)->node_os_index ==
                node_ids[n])
                local += read;
        if (result.provenance != LOCUS_PROVENANCE_ESTIMATED)
            continue;
        if (interleaved)
            TEST_EXPECT(result.local_bytes + result.remote_bytes == total &&
                            result.local_bytes > 0 && result.remote_bytes > 0,
                        "strided rows in %zu piece(s), interleaved: local %llu "
                        "+ remote %llu, expected %llu, both nonzero",
                        pieces, (unsigned long long)result.local_bytes,
                        (unsigned long long)result.remote_bytes,
                        (unsigned long long)total);
        else
            TEST_EXPECT(
                result.local_bytes == local &&
                    result.remote_bytes == total - local,
                "strided rows in %zu piece(s) on node %d: local %llu "
                "remote %llu; truth: local %llu remote %llu",
                pieces, node_ids[n], (unsigned long long)result.local_bytes,
                (unsigned long long)result.remote_bytes,
                (unsigned long long)local, (unsigned long long)(total - local));
    }
}

static void strided_rows(void)
{
    strided_rows_in(1);
}

static void strided_rows_pieces(void)
{
    strided_rows_in(7);
}

static const char *fake_dir;

/* A device op's host transfers, split by the device's nearest node: the
 * fake device says it is nearest the first node. */
static void device_transfers(void)
{
    char mask[32];
    snprintf(mask, sizeof mask, "%llu", 1ull << node_ids[0]);
    setenv("LOCUS_TEST_FAKE_NUMA_MASK", mask, 1);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda";
    options.plugin_path = fake_dir;
    options.log = "error";
    locus_context *fake_context = NULL;
    if (TEST_OK(locus_context_create(&options, &fake_context)) != LOCUS_SUCCESS)
        return;
    locus_device *fake = NULL;
    TEST_OK(locus_device_find(fake_context, "cuda", &fake));
    for (size_t n = 0; fake && n < node_count; n++) {
        size_t count = 50 * page / sizeof(float) + 1;
        locus_placement placement;
        locus_placement_init(&placement);
        placement.policy = LOCUS_PLACE_NODE;
        placement.node = node_ids[n];
        locus_buffer *buffer = NULL;
        TEST_OK(
            locus_buffer_create(fake_context, count * 4, &placement, &buffer));
        float *host = NULL;
        if (buffer &&
            TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_WRITE,
                                     (void **)&host)) == LOCUS_SUCCESS) {
            for (size_t i = 0; i < count; i++)
                host[i] = 1.0f;
            TEST_OK(locus_buffer_unmap(buffer));
        }
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = count;
        double sum = 0;
        locus_record record;
        locus_record_init(&record);
        if (host)
            TEST_OK(
                locus_reduce(fake_context, fake, &desc, buffer, &sum, &record));
        uint64_t bytes = count * 4;
        uint64_t remote =
            host ? truth_remote((unsigned char *)host, bytes, node_ids[0]) : 0;
        TEST_EXPECT(record.bytes_to_device == bytes &&
                        record.provenance == LOCUS_PROVENANCE_ESTIMATED &&
                        record.remote_bytes == remote &&
                        record.local_bytes == bytes - remote,
                    "upload of a node:%d buffer to a device near node %d: "
                    "to_device %llu local %llu remote %llu (%s); truth: "
                    "local %llu remote %llu",
                    node_ids[n], node_ids[0],
                    (unsigned long long)record.bytes_to_device,
                    (unsigned long long)record.local_bytes,
                    (unsigned long long)record.remote_bytes,
                    locus_provenance_str(record.provenance),
                    (unsigned long long)(bytes - remote),
                    (unsigned long long)remote);
        locus_buffer_destroy(buffer);
    }
    locus_context_destroy(fake_context);
    unsetenv("LOCUS_TEST_FAKE_NUMA_MASK");
}

int main(int argc, char **argv)
{
    fake_dir = argc > 1 ? argv[1] : NULL;
    page = (size_t)sysconf(_SC_PAGESIZE);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    options.log = "error";
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
    printf("%zu NUMA node(s), %d workers\n", node_count,
           locus__pool_size(context->pool));
    const char *one_node = "this machine has one NUMA node";
    check("node-placement", node_placement);
    check("local-placement", local_placement);
    if (node_count > 1)
        check("interleave-placement", interleave_placement);
    else
        skip("interleave-placement", one_node);
    check("workers-pinned", workers_pinned);
    if (node_count > 1)
        check("remote-reduce-exact", remote_reduce);
    else
        skip("remote-reduce-exact", one_node);
    check("local-reduce-exact", local_reduce);
    check("interleaved-reduce-exact", interleaved_reduce);
    check("odd-ranges-exact", odd_ranges);
    check("strided-rows", strided_rows);
    check("strided-rows-pieces", strided_rows_pieces);
    if (fake_dir)
        check("device-transfers", device_transfers);
    else
        skip("device-transfers", "no fake device module given");
    locus_context_destroy(context);
    printf("LOCUS-NUMA-CHECKS nodes=%zu pass=%d fail=%d na=%d\n", node_count,
           passed, failed, not_applicable);
    return test_exit_code();
}
