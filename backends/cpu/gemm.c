/* The matrix product on the worker pool, f32 and f64: the Goto/BLIS
 * algorithm (gemm_block.h) with a NUMA-aware split. The element type
 * enters only through its packing and macro-kernel (locus__gemm_kind).
 *
 * Workers are grouped by NUMA node (the pool orders them so). Each group
 * computes the rows of C whose pages the canonical split placed on its
 * node (a C placed `local` is then written where it lives), and packs its
 * own copy of each shared KC x NC block of B into memory bound to its
 * node, so the B block every micro-kernel call reads is never remote.
 * Inside a group the workers claim the phase's units (gemm_units.h) from
 * the group's counters: blocks of the group's rows by the block's column
 * panels to compute, each packing its own A block, and column panels of
 * the next B block to pack. A worker packs while pack units are left,
 * then computes, so a late worker finds the packing done and joins the
 * computing. Small products (private mode) keep a static grid per worker.
 *
 * Phases: block t of B (t runs over the NC column blocks, then the KC
 * depth blocks) is packed in phase t and used in phase t + 1, into two
 * alternating buffers, so one services->run() per phase both computes
 * with the previous block and packs the next: no barrier inside a job
 * (the pool runs nested jobs inline, where a barrier would deadlock).
 *
 * Every element of C is computed by one worker in a fixed order (the k
 * blocks in turn, each by one micro-kernel accumulation), whatever the
 * worker count and grid: the result is deterministic.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "dgemm.h"
#include "gemm_block.h"
#include "gemm_half.h"
#include "gemm_units.h"
#include "gemm_workspace.h"

#define MAX_GROUPS (LOCUS_MAX_NUMA_NODES + 1)
/* Per-worker areas start on their own pages: no false sharing. */
#define OWN_ALIGN 1024
/* Up to this many multiply-adds (512^3), each worker packs the B it needs
 * itself and the product is one job: waking the pool once per B block
 * would cost more than the packing it saves. */
#define PRIVATE_MAX 134217728.0

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t round_up(size_t v, size_t unit)
{
    return (v + unit - 1) / unit * unit;
}

/* A group's unit counters, reset before each phase's run; the next
 * unit to claim. Apart from each other and from the job, which every
 * worker reads. */
typedef struct gemm_counters {
    _Alignas(64) atomic_size_t compute;
    _Alignas(64) atomic_size_t pack;
} gemm_counters;

typedef struct gemm_group {
    int node; /* OS node, -1: unbound */
    int first_rank, ranks;
    size_t row_begin, row_end; /* C rows this group computes */
    int row_ways, col_ways;    /* private mode's grid: row * col = ranks */
    locus__gemm_units units;   /* phased mode's compute units */
    size_t pack_step;          /* column panels per pack unit */
    gemm_counters *counters;
    char *b_blocks[2]; /* shared packed B, alternating by phase */
    char *own;         /* per worker, own_stride elements apart */
} gemm_group;

typedef struct gemm_job {
    const locus_services *services;
    void *runtime;
    locus_op_context *op;
    const locus__gemm_view *g;
    const locus__gemm_kind *kind;
    locus__gemm_blocking blocks; /* mc, kc, nc as stepped (even blocks) */
    size_t n_blocks, k_blocks;   /* of B: phases - 1 = their product */
    int private_b;               /* small product: one job, see below */
    size_t b_elems;              /* of one packed B block */
    size_t own_stride;           /* A block (+ B block when private) */
    size_t phase;
    int group_count;
    gemm_group groups[MAX_GROUPS];
} gemm_job;

static const gemm_group *group_of(const gemm_job *job, int rank, int *local)
{
    for (int i = 0; i < job->group_count; i++) {
        const gemm_group *group = &job->groups[i];
        if (rank < group->first_rank + group->ranks) {
            *local = rank - group->first_rank;
            return group;
        }
    }
    assert(0 && "rank outside every group");
    return NULL;
}

/* The B block of index t: columns [*j0, *j0 + *nc), depth [*p0, ...). */
static void block_at(const gemm_job *job, size_t t, size_t *j0, size_t *nc,
                     size_t *p0, size_t *kc)
{
    size_t jb = t / job->k_blocks, pb = t % job->k_blocks;
    *j0 = jb * job->blocks.nc;
    *nc = min_size(job->blocks.nc, job->g->n - *j0);
    *p0 = pb * job->blocks.kc;
    *kc = min_size(job->blocks.kc, job->g->k - *p0);
}

/* This worker's share of a group: rows [*r0, *r1) of C, column panels
 * [*q0, *q1) of a block of `panels` panels. */
static void worker_tile(const gemm_job *job, const gemm_group *group, int local,
                        size_t panels, size_t *r0, size_t *r1, size_t *q0,
                        size_t *q1)
{
    int row_part = local / group->col_ways, col_part = local % group->col_ways;
    size_t rows = group->row_end - group->row_begin;
    job->services->split(rows, job->kind->mr, row_part, group->row_ways, r0,
                         r1);
    *r0 += group->row_begin;
    *r1 += group->row_begin;
    job->services->split(panels, 1, col_part, group->col_ways, q0, q1);
}

/* Accounts rows [r0, r1) x columns [c0, c1) of a stored matrix: the
 * rows' bytes, over their span. */
static void account_rows(const gemm_job *job, const void *base, size_t elem,
                         size_t ld, size_t r0, size_t r1, size_t c0, size_t c1)
{
    if (r0 >= r1 || c0 >= c1)
        return;
    job->services->account_read_rows(job->op,
                                     (const char *)base + (r0 * ld + c0) * elem,
                                     (c1 - c0) * elem, ld * elem, r1 - r0);
}

/* Claims and packs column panels of B block t into the group's buffer
 * for it, accounting what each unit reads of B. */
static void pack_b_units(const gemm_job *job, const gemm_group *group, size_t t)
{
    const locus__gemm_kind *kind = job->kind;
    const locus__gemm_view *g = job->g;
    size_t j0, nc, p0, kc, nr = kind->nr;
    size_t ab = g->ab_size ? g->ab_size : kind->elem_size;
    block_at(job, t, &j0, &nc, &p0, &kc);
    size_t panels = (nc + nr - 1) / nr, step = group->pack_step;
    for (;;) {
        size_t u = atomic_fetch_add_explicit(&group->counters->pack, 1,
                                             memory_order_relaxed);
        size_t q0 = u * step;
        if (q0 >= panels)
            return;
        size_t q1 = min_size(q0 + step, panels);
        size_t c0 = j0 + q0 * nr, c1 = j0 + min_size(q1 * nr, nc);
        if (g->trans_b == LOCUS_NO_TRANS)
            account_rows(job, g->b, ab, g->ldb, p0, p0 + kc, c0, c1);
        else
            account_rows(job, g->b, ab, g->ldb, c0, c1, p0, p0 + kc);
        kind->pack_b(g->typed, nr, p0, kc, c0, c1 - c0,
                     group->b_blocks[t % 2] + q0 * nr * kc * kind->elem_size);
    }
}

/* Claims and computes units of the group's rows of C with block t of B,
 * each into the worker's own A block. Each unit accounts what it reads:
 * its rows of A in the first column block (later column blocks read the
 * same A again, which the static split did not count either), and its
 * tile of C in the first depth block, where beta != 0 reads it. */
static void compute_units(const gemm_job *job, const gemm_group *group,
                          int local, size_t t)
{
    const locus__gemm_kind *kind = job->kind;
    const locus__gemm_view *g = job->g;
    const locus__gemm_units *units = &group->units;
    size_t elem = kind->elem_size, nr = kind->nr;
    size_t ab = g->ab_size ? g->ab_size : elem;
    size_t j0, nc, p0, kc;
    block_at(job, t, &j0, &nc, &p0, &kc);
    size_t panels = (nc + nr - 1) / nr;
    size_t total = units->row_units * units->col_units;
    char *ap = group->own + (size_t)local * job->own_stride * elem;
    const char *bp = group->b_blocks[t % 2];
    for (;;) {
        size_t u = atomic_fetch_add_explicit(&group->counters->compute, 1,
                                             memory_order_relaxed);
        if (u >= total)
            return;
        size_t r0 = group->row_begin + u / units->col_units * units->row_step;
        size_t r1 = min_size(r0 + units->row_step, group->row_end);
        size_t q0 = u % units->col_units * units->col_step;
        if (q0 >= panels)
            continue; /* the last column block may have fewer panels */
        size_t q1 = min_size(q0 + units->col_step, panels);
        size_t c0 = j0 + q0 * nr, c1 = j0 + min_size(q1 * nr, nc);
        if (t < job->k_blocks) {
            if (g->trans_a == LOCUS_NO_TRANS)
                account_rows(job, g->a, ab, g->lda, r0, r1, p0, p0 + kc);
            else
                account_rows(job, g->a, ab, g->lda, p0, p0 + kc, r0, r1);
        }
        if (p0 == 0 && g->reads_c)
            account_rows(job, g->c, elem, g->ldc, r0, r1, c0, c1);
        kind->pack_a(g->typed, kind->mr, r0, r1 - r0, p0, kc, ap);
        kind->macro(g->typed, r1 - r0, c1 - c0, kc, ap,
                    bp + q0 * nr * kc * elem, r0, c0, p0 == 0,
                    job->blocks.l2_cols);
    }
}

/* Private mode: computes this worker's tile of C with block t of B,
 * first packing the columns of B its tile needs into its own buffer:
 * some packing is done twice across workers, but the whole product is one
 * job with no phase to wait for, which is what small products need.
 * Static tiles, since dynamic units would pack B once per unit. */
static void compute_share(const gemm_job *job, const gemm_group *group,
                          int local, size_t t)
{
    const locus__gemm_kind *kind = job->kind;
    const void *typed = job->g->typed;
    size_t elem = kind->elem_size;
    size_t j0, nc, p0, kc, r0, r1, q0, q1, nr = kind->nr;
    block_at(job, t, &j0, &nc, &p0, &kc);
    worker_tile(job, group, local, (nc + nr - 1) / nr, &r0, &r1, &q0, &q1);
    if (r0 >= r1 || q0 >= q1)
        return;
    size_t cols = min_size(q1 * nr, nc) - q0 * nr;
    char *ap = group->own + (size_t)local * job->own_stride * elem;
    char *bp = ap + (job->own_stride - job->b_elems) * elem;
    kind->pack_b(typed, nr, p0, kc, j0 + q0 * nr, cols, bp);
    size_t step = locus__gemm_even_block(r1 - r0, job->blocks.mc, kind->mr);
    for (size_t ic = r0; ic < r1; ic += step) {
        size_t mc = min_size(step, r1 - ic);
        kind->pack_a(typed, kind->mr, ic, mc, p0, kc, ap);
        kind->macro(typed, mc, cols, kc, ap, bp, ic, j0 + q0 * nr, p0 == 0,
                    job->blocks.l2_cols);
    }
}

/* Accounts the stored rows [r0, r1) x columns [c0, c1) of a matrix as one
 * range: the span, gaps between rows included. Cheap, and exact whenever
 * the block is whole rows of a tight matrix, the common case. */
static void account_block(const gemm_job *job, const void *base, size_t elem,
                          size_t ld, size_t r0, size_t r1, size_t c0, size_t c1)
{
    if (r0 >= r1 || c0 >= c1)
        return;
    size_t elems = (r1 - r0 - 1) * ld + (c1 - c0);
    job->services->account_read(
        job->op, (const char *)base + (r0 * ld + c0) * elem, elems * elem);
}

/* Private mode: what this worker reads over the whole product: the A
 * rows of its tile, its share of B (packing), and its tile of C when
 * beta != 0. */
static void account_worker(const gemm_job *job, const gemm_group *group,
                           int local)
{
    const locus__gemm_view *g = job->g;
    size_t nr = job->kind->nr, panels = (g->n + nr - 1) / nr;
    size_t r0, r1, q0, q1, b0, b1;
    size_t ab = g->ab_size ? g->ab_size : job->kind->elem_size;
    worker_tile(job, group, local, panels, &r0, &r1, &q0, &q1);
    if (g->trans_a == LOCUS_NO_TRANS)
        account_block(job, g->a, ab, g->lda, r0, r1, 0, g->k);
    else
        account_block(job, g->a, ab, g->lda, 0, g->k, r0, r1);
    job->services->split(g->n, nr, local, group->ranks, &b0, &b1);
    if (g->trans_b == LOCUS_NO_TRANS)
        account_block(job, g->b, ab, g->ldb, 0, g->k, b0, b1);
    else
        account_block(job, g->b, ab, g->ldb, b0, b1, 0, g->k);
    if (g->reads_c)
        account_block(job, g->c, job->kind->elem_size, g->ldc, r0, r1,
                      min_size(q0 * nr, g->n), min_size(q1 * nr, g->n));
}

static void phase_worker(void *arg, int rank, int ranks)
{
    const gemm_job *job = arg;
    (void)ranks;
    int local;
    const gemm_group *group = group_of(job, rank, &local);
    size_t phases = job->n_blocks * job->k_blocks + 1;
    if (job->private_b) {
        account_worker(job, group, local);
        for (size_t t = 0; t + 1 < phases; t++)
            compute_share(job, group, local, t);
        return;
    }
    /* Block t - 1, computed here, was packed in the previous phase; block
     * t, packed here, is read only in the next: nothing in a phase waits
     * for another worker. */
    if (job->phase + 1 < phases)
        pack_b_units(job, group, job->phase);
    if (job->phase > 0)
        compute_units(job, group, local, job->phase - 1);
}

/* alpha == 0 or k == 0: C = beta C, rows split among all workers. */
static void scale_worker(void *arg, int rank, int ranks)
{
    const gemm_job *job = arg;
    size_t r0, r1;
    job->services->split(job->g->m, 1, rank, ranks, &r0, &r1);
    if (r0 >= r1)
        return;
    if (job->g->reads_c)
        account_block(job, job->g->c, job->kind->elem_size, job->g->ldc, r0, r1,
                      0, job->g->n);
    job->kind->scale(job->g->typed, r0, r1, 0, job->g->n);
}

/* The worker grid of a group: the row/column split whose largest tile,
 * counted in whole micro-tiles, is smallest; ties go to more row parts,
 * which share B and pack nothing twice. */
static void choose_grid(gemm_group *group, size_t mr, size_t nr, size_t nc)
{
    size_t row_panels = (group->row_end - group->row_begin + mr - 1) / mr;
    size_t col_panels = (nc + nr - 1) / nr;
    size_t best = SIZE_MAX;
    group->row_ways = group->ranks;
    group->col_ways = 1;
    for (int ways = group->ranks; ways >= 1; ways--) {
        if (group->ranks % ways != 0)
            continue;
        int cols = group->ranks / ways;
        size_t tiles = ((row_panels + (size_t)ways - 1) / (size_t)ways) *
                       ((col_panels + (size_t)cols - 1) / (size_t)cols);
        if (tiles < best) {
            best = tiles;
            group->row_ways = ways;
            group->col_ways = cols;
        }
    }
}

/* The groups of the device's workers: one per NUMA node with workers, in
 * pool order (workers without a node, if any, come first and get memory
 * of no binding). A node device, or a one-node machine, is one group. */
static void build_groups(const locus__cpu_state *s, int node, int workers,
                         gemm_job *job)
{
    const locus_services *services = s->services;
    job->group_count = 0;
    if (node >= 0 || s->node_count < 2) {
        job->groups[0] = (gemm_group){.node = node, .ranks = workers};
        job->group_count = 1;
        return;
    }
    int counted = 0;
    for (int i = 0; i < s->node_count; i++)
        counted += services->worker_count(s->runtime, s->nodes[i].os_index);
    int rank = 0;
    if (counted < workers) {
        job->groups[job->group_count++] =
            (gemm_group){.node = -1, .ranks = workers - counted};
        rank = workers - counted;
    }
    for (int i = 0; i < s->node_count && job->group_count < MAX_GROUPS; i++) {
        int count = services->worker_count(s->runtime, s->nodes[i].os_index);
        if (count <= 0)
            continue;
        job->groups[job->group_count++] = (gemm_group){
            .node = s->nodes[i].os_index, .first_rank = rank, .ranks = count};
        rank += count;
    }
}

/* Rows of C per group: the rows whose first byte the canonical page split
 * of C's bytes over all workers gives to the group's workers, so a C
 * placed `local` is written by the node that holds it. */
static void assign_rows(const locus__cpu_state *s, int workers, gemm_job *job)
{
    const locus__gemm_view *g = job->g;
    size_t row_bytes = g->ldc * job->kind->elem_size;
    size_t total = g->m * row_bytes;
    for (int i = 0; i < job->group_count; i++) {
        gemm_group *group = &job->groups[i];
        size_t begin, end;
        s->services->split(total, s->page_size, group->first_rank, workers,
                           &begin, &end);
        group->row_begin =
            i == 0 ? 0 : min_size((begin + row_bytes - 1) / row_bytes, g->m);
        if (i > 0)
            job->groups[i - 1].row_end = group->row_begin;
    }
    job->groups[job->group_count - 1].row_end = g->m;
}

/* Each group's buffers, in memory bound to its node: the two shared B
 * blocks (none in private mode) and each worker's own area. */
static locus_status alloc_groups(const locus__cpu_state *s, gemm_job *job,
                                 locus__gemm_buffers *buffers,
                                 uint64_t *workspace)
{
    const locus__gemm_kind *kind = job->kind;
    size_t kc = job->blocks.kc, elem = kind->elem_size;
    job->b_elems = round_up(kc * round_up(job->blocks.nc, kind->nr), 16);
    /* A worker's A block holds at most a unit's rows (phased mode) or
     * its tile's (private mode: worker_tile's split, whole micro-panels,
     * the larger shares first), which with blocks sized to L3 is often
     * fewer than mc. */
    size_t most_rows = 0;
    for (int i = 0; i < job->group_count; i++) {
        const gemm_group *group = &job->groups[i];
        size_t panels =
            (group->row_end - group->row_begin + kind->mr - 1) / kind->mr;
        size_t ways = (size_t)group->row_ways;
        size_t rows = job->private_b ? (panels + ways - 1) / ways * kind->mr
                                     : group->units.row_step;
        if (rows > most_rows)
            most_rows = rows;
    }
    size_t mc = min_size(job->blocks.mc, most_rows);
    job->own_stride = round_up(round_up(mc, kind->mr) * kc, 16);
    if (job->private_b)
        job->own_stride += job->b_elems;
    job->own_stride = round_up(job->own_stride, OWN_ALIGN);
    size_t shared = job->private_b ? 0 : 2 * job->b_elems;

    int nodes[MAX_GROUPS];
    size_t bytes[MAX_GROUPS];
    *workspace = 0;
    for (int i = 0; i < job->group_count; i++) {
        nodes[i] = job->groups[i].node;
        bytes[i] =
            (shared + (size_t)job->groups[i].ranks * job->own_stride) * elem;
        *workspace += bytes[i];
    }
    locus_status status = locus__gemm_workspace_acquire(
        s->gemm_workspace, s->services, s->runtime, job->group_count, nodes,
        bytes, buffers);
    if (status != LOCUS_SUCCESS)
        return status;
    for (int i = 0; i < job->group_count; i++) {
        char *base = buffers->memory[i];
        job->groups[i].b_blocks[0] = base;
        job->groups[i].b_blocks[1] = base + job->b_elems * elem;
        job->groups[i].own = base + shared * elem;
    }
    return LOCUS_SUCCESS;
}

locus_status locus__gemm_run(const locus__cpu_state *s, size_t device,
                             const locus__gemm_kind *kind,
                             const locus__gemm_view *g, locus_op_context *op)
{
    const locus_services *services = s->services;
    int node, workers;
    locus_status status = locus__cpu_device_workers(s, device, &node, &workers);
    if (status != LOCUS_SUCCESS)
        return status;

    gemm_job job = {
        .services = services,
        .runtime = s->runtime,
        .op = op,
        .g = g,
        .kind = kind,
    };
    locus__cpu_set_algorithm(op, kind->kernel_name);
    if (g->m == 0 || g->n == 0)
        return LOCUS_SUCCESS;
    /* The runtime hands NULL for A and B only to a product that reads
     * neither (locus__gemm_view's reads_ab, in the dtype's precision). */
    if (g->reads_ab && (!g->a || !g->b))
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "gemm given no a or b for a product that reads "
                              "them (m %zu, n %zu, k %zu)",
                              g->m, g->n, g->k);
    int tiny = 2.0 * (double)g->m * (double)g->n * (double)g->k <
               LOCUS__CPU_INLINE_FLOPS;
    if (!g->reads_ab)
        return locus__cpu_run(s, node,
                              (double)g->m * (double)g->n *
                                      (double)kind->elem_size <
                                  LOCUS__CPU_INLINE_BYTES,
                              scale_worker, &job);

    locus__gemm_blocking raw =
        locus__gemm_blocking_for(kind->mr, kind->nr, kind->elem_size,
                                 services->cache_bytes(s->runtime, 1),
                                 services->cache_bytes(s->runtime, 2),
                                 services->cache_sharing(s->runtime, 2),
                                 services->cache_bytes(s->runtime, 3),
                                 services->cache_sharing(s->runtime, 3));
    job.blocks.mc = raw.mc;
    job.blocks.l2_cols = raw.l2_cols;
    job.blocks.kc = locus__gemm_even_block(g->k, raw.kc, 8);
    job.blocks.nc = locus__gemm_even_block(g->n, raw.nc, kind->nr);
    job.n_blocks = (g->n + job.blocks.nc - 1) / job.blocks.nc;
    job.k_blocks = (g->k + job.blocks.kc - 1) / job.blocks.kc;

    build_groups(s, node, workers, &job);
    assign_rows(s, workers, &job);
    job.private_b = (double)g->m * (double)g->n * (double)g->k <= PRIVATE_MAX;
    gemm_counters counters[MAX_GROUPS];
    size_t block_panels = (job.blocks.nc + kind->nr - 1) / kind->nr;
    for (int i = 0; i < job.group_count; i++) {
        gemm_group *group = &job.groups[i];
        choose_grid(group, kind->mr, kind->nr, job.blocks.nc);
        group->units = locus__gemm_units_plan(group->row_end - group->row_begin,
                                              block_panels, kind->mr, kind->nr,
                                              job.blocks.mc, group->ranks);
        group->pack_step =
            locus__gemm_pack_step(block_panels, kind->nr, group->ranks);
        group->counters = &counters[i];
        atomic_init(&counters[i].compute, 0);
        atomic_init(&counters[i].pack, 0);
    }

    uint64_t workspace = 0;
    locus__gemm_buffers buffers;
    status = alloc_groups(s, &job, &buffers, &workspace);
    if (status != LOCUS_SUCCESS)
        return status;
    if (op && op->record)
        op->record->workspace_bytes = workspace;

    size_t phases = job.private_b ? 1 : job.n_blocks * job.k_blocks + 1;
    for (job.phase = 0; job.phase < phases; job.phase++) {
        /* The run hands the job to the workers after these stores. */
        for (int i = 0; i < job.group_count; i++) {
            atomic_store_explicit(&counters[i].compute, 0,
                                  memory_order_relaxed);
            atomic_store_explicit(&counters[i].pack, 0, memory_order_relaxed);
        }
        status = locus__cpu_run(s, node, tiny, phase_worker, &job);
        if (status != LOCUS_SUCCESS)
            break;
    }
    locus__gemm_workspace_release(services, s->runtime, &buffers);
    return status;
}

/* ---- f32: the locus__gemm_kind of locus__sgemm ----------------------- */

static void sgemm_pack_a(const void *typed, size_t mr, size_t i0, size_t mc,
                         size_t p0, size_t kc, void *ap)
{
    locus__sgemm_pack_a(typed, mr, i0, mc, p0, kc, ap);
}

static void sgemm_pack_b(const void *typed, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, void *bp)
{
    locus__sgemm_pack_b(typed, nr, p0, kc, j0, nc, bp);
}

static void sgemm_macro(const void *typed, size_t mc, size_t nc, size_t kc,
                        const void *ap, const void *bp, size_t i0, size_t j0,
                        int first_depth, size_t sweep_cols)
{
    const locus__sgemm *g = typed;
    locus__sgemm_macro(g->isa, mc, nc, kc, ap, bp, g->c + i0 * g->ldc + j0,
                       g->ldc, g->alpha, first_depth ? g->beta : 1.0f,
                       sweep_cols);
}

static void sgemm_scale(const void *typed, size_t i0, size_t i1, size_t j0,
                        size_t j1)
{
    locus__sgemm_scale(typed, i0, i1, j0, j1);
}

locus_status locus__cpu_gemm(void *state, size_t device,
                             const locus_gemm_desc *desc, const void *a,
                             const void *b, void *c, locus_op_context *op)
{
    const locus__cpu_state *s = state;
    if (desc->dtype == LOCUS_DTYPE_BF16 || desc->dtype == LOCUS_DTYPE_F16)
        return locus__cpu_gemm_half(s, device, desc, a, b, c, op);
    if (desc->dtype == LOCUS_DTYPE_F64)
        return locus__cpu_dgemm(s, device, desc, a, b, c, op);
    /* LOCUS_MATH_TF32 and 3XTF32 permit less precision for speed; the CPU
     * has no faster path, so it honours them with full f32. */
    locus_status status = locus__cpu_check_dtype(s, "gemm", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;

    locus__sgemm g = {
        .trans_a = desc->trans_a,
        .trans_b = desc->trans_b,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .alpha = (float)desc->alpha,
        .beta = (float)desc->beta,
        .a = a,
        .lda = desc->lda,
        .b = b,
        .ldb = desc->ldb,
        .c = c,
        .ldc = desc->ldc,
        .isa = &s->isa,
    };
    locus__gemm_view view = {
        .trans_a = g.trans_a,
        .trans_b = g.trans_b,
        .m = g.m,
        .n = g.n,
        .k = g.k,
        .a = a,
        .b = b,
        .c = c,
        .lda = g.lda,
        .ldb = g.ldb,
        .ldc = g.ldc,
        .reads_c = g.beta != 0.0f,
        .reads_ab = g.alpha != 0.0f && g.k != 0,
        .typed = &g,
    };
    locus__gemm_kind kind = {
        .elem_size = sizeof(float),
        .mr = s->isa.mr,
        .nr = s->isa.nr,
        .kernel_name = s->isa.sgemm_name,
        .pack_a = sgemm_pack_a,
        .pack_b = sgemm_pack_b,
        .macro = sgemm_macro,
        .scale = sgemm_scale,
    };
    return locus__gemm_run(s, device, &kind, &view, op);
}
