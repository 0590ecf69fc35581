#include "placement.h"

#include <errno.h>
#include <numaif.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "status.h"

/* move_pages takes at most this many pages per call here, to bound the
 * stack arrays. */
#define PAGES_PER_QUERY 1024

/* Asked several times by every op's accounting (the page maps): kept, as
 * it never changes while the process runs. */
size_t locus__page_size(void)
{
    static size_t cached;
    size_t size = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (size == 0) {
        long queried = sysconf(_SC_PAGESIZE);
        size = queried > 0 ? (size_t)queried : 4096;
        __atomic_store_n(&cached, size, __ATOMIC_RELAXED);
    }
    return size;
}

void locus_page_report_init(locus_page_report *report)
{
    if (!report)
        return;
    memset(report, 0, sizeof *report);
    report->struct_size = sizeof *report;
}

static void tally(locus_page_report *report, int status)
{
    if (status >= 0 && status < LOCUS_MAX_NUMA_NODES)
        report->pages_on_node[status]++;
    else if (status == -ENOENT)
        report->pages_untouched++;
    else if (status == -EFAULT)
        report->pages_unmapped++;
    else
        report->pages_other++;
}

locus_status locus__query_pages(const void *memory, size_t bytes,
                                size_t max_samples, locus_page_report *report)
{
    size_t page = locus__page_size();
    uintptr_t first = (uintptr_t)memory & ~(uintptr_t)(page - 1);
    uintptr_t last = ((uintptr_t)memory + bytes - 1) & ~(uintptr_t)(page - 1);
    size_t total = (size_t)((last - first) / page) + 1;
    size_t queried = max_samples && max_samples < total ? max_samples : total;

    size_t struct_size = report->struct_size;
    memset(report, 0, sizeof *report);
    report->struct_size = struct_size;
    report->page_size = page;
    report->pages_total = total;
    report->pages_queried = queried;

    void *pages[PAGES_PER_QUERY];
    int status[PAGES_PER_QUERY];
    for (size_t done = 0; done < queried;) {
        size_t batch =
            queried - done < PAGES_PER_QUERY ? queried - done : PAGES_PER_QUERY;
        for (size_t i = 0; i < batch; i++) {
            /* An even spread, first and last page included. */
            size_t index = queried == total
                               ? done + i
                               : (done + i) * (total - 1) / (queried - 1);
            pages[i] = (void *)(first + index * page);
        }
        if (move_pages(0, (unsigned long)batch, pages, NULL, status, 0) != 0)
            return locus__fail(errno == ENOSYS ? LOCUS_ERROR_NOT_SUPPORTED
                                               : LOCUS_ERROR_SYSTEM,
                               "move_pages over %zu pages: %s", batch,
                               strerror(errno));
        for (size_t i = 0; i < batch; i++)
            tally(report, status[i]);
        done += batch;
    }
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_query_pages(const void *memory, size_t bytes,
                                         size_t max_samples,
                                         locus_page_report *report)
{
    locus__clear_error();
    if (!memory || !report)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           memory ? "report" : "memory");
    if (bytes == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "page query over 0 bytes");
    if (report->struct_size < sizeof *report)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "report struct_size %zu: call "
                           "locus_page_report_init first",
                           report->struct_size);
    /* The range's end, rounded up to a page, must be an address: SIZE_MAX
     * bytes wrapped around and was reported as a success. */
    const uintptr_t start = (uintptr_t)memory;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (bytes > UINTPTR_MAX - start || start + bytes > UINTPTR_MAX - page)
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "page query of %zu bytes from %p runs past the "
                           "end of the address space",
                           bytes, memory);
    return locus__query_pages(memory, bytes, max_samples, report);
}

typedef struct touch_job {
    unsigned char *base;
    size_t bytes;
    size_t page;
} touch_job;

/* Writing one byte per page faults it in on the toucher's node. */
static void touch_pages(void *arg, int rank, int ranks)
{
    const touch_job *job = arg;
    size_t begin, end;
    locus__pool_split(job->bytes, job->page, rank, ranks, &begin, &end);
    for (size_t offset = begin; offset < end; offset += job->page)
        job->base[offset] = 0;
}

static locus_status bind_area(const locus__topology *topology, void *base,
                              size_t bytes, const locus_placement *placement)
{
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    if (!nodes)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "nodeset");
    hwloc_membind_policy_t policy;
    if (placement->policy == LOCUS_PLACE_NODE) {
        hwloc_bitmap_only(nodes, (unsigned)placement->node);
        policy = HWLOC_MEMBIND_BIND;
    } else {
        for (int i = 0; i < topology->node_count; i++)
            hwloc_bitmap_set(nodes, (unsigned)topology->nodes[i].os_index);
        policy = HWLOC_MEMBIND_INTERLEAVE;
    }
    int result = -1;
    if (locus__fault_hit(LOCUS__FAULT_BIND))
        errno = EIO;
    else
        result = hwloc_set_area_membind(
            topology->hwloc, base, bytes, nodes, policy,
            HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
    int error = errno;
    hwloc_bitmap_free(nodes);
    if (result != 0)
        return locus__fail(
            LOCUS_ERROR_PLACEMENT,
            "the kernel refused to bind %zu bytes %s%d: %s", bytes,
            policy == HWLOC_MEMBIND_BIND ? "to node " : "interleaved over ",
            policy == HWLOC_MEMBIND_BIND ? placement->node
                                         : topology->node_count,
            strerror(error));
    return LOCUS_SUCCESS;
}

/* Every sampled page must be on the node asked for. */
static locus_status verify_node(const locus__host_memory *memory)
{
    locus_page_report report;
    locus_page_report_init(&report);
    locus_status status =
        locus__query_pages(memory->base, memory->mapped_bytes, 4096, &report);
    if (status != LOCUS_SUCCESS)
        return status;
    int node = memory->placement.node;
    size_t elsewhere = report.pages_queried - report.pages_on_node[node];
    if (elsewhere != 0)
        return locus__fail(LOCUS_ERROR_PLACEMENT,
                           "asked for node %d, but %zu of %zu pages queried "
                           "are elsewhere",
                           node, elsewhere, report.pages_queried);
    return LOCUS_SUCCESS;
}

locus_status locus__host_alloc(const locus__topology *topology,
                               locus__pool *pool, size_t bytes,
                               const locus_placement *placement,
                               locus__host_memory *out)
{
    memset(out, 0, sizeof *out);
    out->placement = *placement;
    size_t page = locus__page_size();
    if (placement->policy == LOCUS_PLACE_NODE &&
        locus__topology_node_position(topology, placement->node) < 0)
        return locus__fail(LOCUS_ERROR_PLACEMENT,
                           "NUMA node %d does not exist (the topology has "
                           "%d node%s)",
                           placement->node, topology->node_count,
                           topology->node_count == 1 ? "" : "s");
    if (bytes > SIZE_MAX - page)
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%zu bytes cannot be rounded to pages", bytes);
    out->mapped_bytes = (bytes + page - 1) / page * page;
    void *base = MAP_FAILED;
    if (locus__fault_hit(LOCUS__FAULT_ALLOC))
        errno = ENOMEM;
    else
        base = mmap(NULL, out->mapped_bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "mmap of %zu bytes: %s",
                           out->mapped_bytes, strerror(errno));
    out->base = base;

    /* On a synthetic or XML topology, hwloc's binding calls succeed and do
     * nothing: place nothing and claim nothing. */
    bool real = topology->is_this_system;
    locus_status status = LOCUS_SUCCESS;
    if (real && (placement->policy == LOCUS_PLACE_NODE ||
                 placement->policy == LOCUS_PLACE_INTERLEAVE))
        status = bind_area(topology, base, out->mapped_bytes, placement);
    if (status == LOCUS_SUCCESS && placement->policy != LOCUS_PLACE_OFF) {
        touch_job job = {base, out->mapped_bytes, page};
        if (placement->policy == LOCUS_PLACE_LOCAL && pool)
            status = locus__pool_run(pool, -1, touch_pages, &job);
        else
            touch_pages(&job, 0, 1);
    }
    if (status == LOCUS_SUCCESS && real &&
        placement->policy == LOCUS_PLACE_NODE) {
        status = verify_node(out);
        out->verified = status == LOCUS_SUCCESS;
    }
    if (status != LOCUS_SUCCESS) {
        locus__host_free(out);
        return status;
    }
    return LOCUS_SUCCESS;
}

void locus__host_free(locus__host_memory *memory)
{
    if (memory->base)
        munmap(memory->base, memory->mapped_bytes);
    memory->base = NULL;
    memory->mapped_bytes = 0;
}

/* Batches ask where each page is first, so that pages already on their
 * target count as moved without a copy, and moved_bytes counts only the
 * bytes that really changed node. */
locus_status locus__move_pages(void *memory, size_t bytes,
                               locus__page_target_fn node_of_page, void *arg,
                               locus__page_move *move)
{
    memset(move, 0, sizeof *move);
    size_t page = locus__page_size();
    uintptr_t start = (uintptr_t)memory, end = start + bytes;
    uintptr_t first = start & ~(uintptr_t)(page - 1);
    move->pages = (size_t)((end - 1 - first) / page) + 1;
    void *pages[PAGES_PER_QUERY];
    int nodes[PAGES_PER_QUERY], before[PAGES_PER_QUERY],
        status[PAGES_PER_QUERY];
    for (size_t done = 0; done < move->pages;) {
        size_t batch = move->pages - done < PAGES_PER_QUERY ? move->pages - done
                                                            : PAGES_PER_QUERY;
        for (size_t i = 0; i < batch; i++) {
            pages[i] = (void *)(first + (done + i) * page);
            nodes[i] = node_of_page(arg, done + i);
        }
        if (move_pages(0, (unsigned long)batch, pages, NULL, before, 0) != 0 ||
            move_pages(0, (unsigned long)batch, pages, nodes, status,
                       MPOL_MF_MOVE) < 0)
            return locus__fail(errno == ENOSYS ? LOCUS_ERROR_NOT_SUPPORTED
                                               : LOCUS_ERROR_SYSTEM,
                               "move_pages over %zu pages: %s", batch,
                               strerror(errno));
        /* Pages just faulted in may still sit in a cpu's LRU cache, which
         * the kernel cannot isolate yet (EBUSY): a second ask finds them
         * drained. */
        for (int retry = 0; retry < 3; retry++) {
            void *again[PAGES_PER_QUERY];
            int again_nodes[PAGES_PER_QUERY], again_status[PAGES_PER_QUERY];
            size_t index[PAGES_PER_QUERY], busy = 0;
            for (size_t i = 0; i < batch; i++)
                if (status[i] == -EBUSY) {
                    again[busy] = pages[i];
                    again_nodes[busy] = nodes[i];
                    index[busy++] = i;
                }
            if (busy == 0 ||
                move_pages(0, (unsigned long)busy, again, again_nodes,
                           again_status, MPOL_MF_MOVE) < 0)
                break;
            for (size_t j = 0; j < busy; j++)
                status[index[j]] = again_status[j];
        }
        for (size_t i = 0; i < batch; i++) {
            int s = status[i];
            if (s == nodes[i]) {
                move->moved++;
                if (before[i] != s) {
                    uintptr_t lo = (uintptr_t)pages[i], hi = lo + page;
                    move->moved_bytes +=
                        (hi < end ? hi : end) - (lo > start ? lo : start);
                }
            } else if (s == -ENOENT || s == -EFAULT) {
                move->untouched++;
            } else if (s == -EBUSY) {
                move->busy++;
            } else if (s == -ENOMEM) {
                move->no_memory++;
            } else {
                move->other++;
            }
        }
        done += batch;
    }
    return LOCUS_SUCCESS;
}
