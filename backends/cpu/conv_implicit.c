/* 2-D convolution as an implicit GEMM: per image n,
 *   output[n] (K x PQ, NCHW: ldc = P * Q) = filter (K x CRS) * col (CRS x PQ)
 * with col, im2col's column matrix, never built: the B micro-panels the
 * register kernel reads (kc depth rows by nr output positions) are packed
 * from a zero-padded copy of the few image rows the current block of
 * output positions reads (conv_implicit_pack.c), so the workspace is the
 * packed filter plus, per worker, LOCUS__IMPLICIT_PANELS micro-panels and
 * that band of rows. A 1x1 stride-1 unpadded filter makes the image itself
 * the column matrix (C x PQ): its whole micro-panels are read in place by
 * the strided kernel (isa.h), rows PQ apart, and only an image's last,
 * partial one is packed, which saves the copy's time (docs/PERFORMANCE.md).
 *
 * Loop nest of one worker's share (image n, micro-panel columns [t0, t1),
 * filter row panels [i0, i1)), outermost first:
 *  - column blocks of `block_tiles` micro-panels, so that the K x block
 *    slab of output being accumulated stays in L2 between depth blocks;
 *    the block's band of padded input rows is copied here;
 *  - depth blocks of kc (a kc x nr micro-panel of B fills half of L1);
 *    the packed filter's kc-deep block of the worker's rows stays in L2;
 *  - groups of LOCUS__IMPLICIT_PANELS micro-panel columns: pack them in
 *    one sweep of the band (the filter panels streaming through L1
 *    between two micro-panels would otherwise evict the band's lines),
 *    then for each
 *  - row panels: one register-kernel call each, first depth block with
 *    beta 0 (the output is only written, so NaN there cannot leak), the
 *    later ones accumulating with beta 1.
 * Every output element is computed by the same sequence of kernel calls
 * whichever worker owns it, so results do not depend on the worker count.
 *
 * The filter is packed into micro-panels of mr rows (rows past K zero),
 * depth block by depth block, once per call or, where the filter buffer
 * has a content key, once for as long as the filter cache keeps it
 * (filter_cache.c): a fresh packing, written by a few workers, must reach
 * every other worker's cache on each call (docs/PERFORMANCE.md). It is the
 * only shared workspace. It is packed inside the compute job, not by a job
 * of its own: each dispatch wakes every worker and waits for the last, a
 * good part of what a call costs beyond the arithmetic.
 * Each piece (one row panel of one depth block) has an atomic state
 * (pieces.h: free, claimed, done). Just before a worker first uses a depth
 * block it claims and packs the free pieces of its own rows (workers sharing
 * rows start at different panels, so they split them), then waits for
 * the ones others claimed; the pieces it packed are still in its L2
 * when the kernel reads them (packing the whole filter first sent the
 * 2.25 MiB of the 256-channel layer's to L3 and back). A barrier would
 * deadlock where the pool runs the ranks one after the other (a nested
 * run is inline); a claimed piece is always being packed by a running
 * worker that waits for nothing.
 *
 * Parallelism. The workers form a wk x wp grid: wk groups split the filter
 * row panels, wp split the micro-panel columns of the whole batch (the
 * images' P*Q positions one after the other, cut with services->split, so
 * a worker writes one contiguous stretch of each output row it owns). The
 * grid minimizes the largest share, counted in kernel calls plus the B
 * packing (which a column split shares and a row split repeats): batch 1
 * keeps both workers busy on a 14x14 image by splitting K, and splits the
 * positions wherever there are enough of them.
 *
 * Shared B. Where the grid has several row groups, each would pack the
 * same B micro-panels (a small output over many workers: a 7x7 output is
 * two micro-panel columns, so 16 workers form 8 row groups); packing one
 * costs several kernel calls, as much as a worker's share of the calls
 * there. Then B is packed once into a shared workspace, in pieces of one
 * column by one depth block: a worker reaching a depth block claims, for
 * each of its columns, the first free piece from that block on (workers
 * arriving together pack different blocks, and the later blocks are
 * ready when reached), then waits for the block's pieces. The packed
 * values are the same whoever packs them, so results do not change.
 *
 * Workspace. Mapping fresh pages costs a fault and a zeroing per page, as
 * much as the packing of a whole layer (docs/PERFORMANCE.md); the buffers
 * come from the context's packing-buffer cache (gemm_workspace.h), which
 * maps them once and keeps them, or maps them for the call when another
 * thread holds it.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>

#include "conv_implicit.h"

#include "conv_direct.h"
#include "conv_implicit_pack.h"
#include "gemm_block.h"
#include "pieces.h"
#include "shares.h"

#define DEFAULT_L1 (32u << 10)
#define DEFAULT_L2 (256u << 10)
/* Cost of packing one B micro-panel, in kernel calls of the same depth:
 * a 16-wide run is 4 SSE loads and stores per depth row, about what one
 * call's 12 FMAs per depth row take. */
#define PACK_CALLS 1
/* The most floats of B shared by the row groups (16 MiB). */
#define SHARED_B_FLOATS ((size_t)4 << 20)

typedef struct implicit_plan {
    size_t mr, nr;
    size_t crs, pq;
    size_t tiles;       /* micro-panel columns per image */
    size_t panels;      /* filter row panels of mr */
    size_t kc;          /* depth block, all but the last */
    size_t blocks;      /* depth blocks */
    size_t block_tiles; /* micro-panel columns per output block */
    size_t panel;       /* floats of a worker's B micro-panel, slack too */
    size_t band;        /* floats of a worker's band buffer (0: direct) */
    int wk, wp;         /* worker grid: row groups x column groups */
    int shared_b;       /* B packed once for all row groups (see below) */
    size_t b_piece;     /* floats of one shared B piece, slack too */
    size_t b_floats;    /* floats of the shared B, whole pages */
    size_t b_flags;     /* floats of its piece states, whole pages */
    size_t filter;      /* floats of the packed filter, whole pages */
    size_t flags;       /* floats of the panel states, whole pages */
    size_t stride;      /* floats between two workers' parts, whole pages */
    size_t bytes;
} implicit_plan;

typedef struct implicit_job {
    const locus__conv_problem *problem;
    const locus_services *services;
    implicit_plan plan;
    float *filter;        /* packed */
    atomic_int *packing;  /* per row panel: a piece state (pieces.h) */
    locus__share *shares; /* per worker: its micro-panel columns */
    float *parts;         /* per worker: a B micro-panel and a band */
    float *shared_b;      /* shared_b: (column, depth block) pieces */
    atomic_int *b_states; /* shared_b: a piece state each */
} implicit_job;

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

static size_t round_up(size_t value, size_t unit)
{
    return ceil_div(value, unit) * unit;
}

/* Depth block: the B micro-panel (kc x nr) in half of L1, cut evenly and
 * in multiples of 8 (the kernels' unrolled steps) where that divides. */
static size_t depth_block(size_t crs, size_t nr, size_t l1)
{
    size_t most = l1 / 2 / (nr * sizeof(float)) / 8 * 8;
    most = most < 64 ? 64 : most > 512 ? 512 : most;
    size_t blocks = ceil_div(crs, most);
    return min_size(round_up(ceil_div(crs, blocks), 8), crs);
}

/* The grid of workers with the smallest largest share (see the top). */
static void choose_grid(const locus__conv_problem *pr, implicit_plan *plan)
{
    size_t columns = pr->batch * plan->tiles, best = SIZE_MAX;
    size_t workers = (size_t)pr->workers;
    plan->wk = 1;
    plan->wp = pr->workers;
    for (size_t wk = 1; wk <= workers && wk <= plan->panels; wk++) {
        if (workers % wk != 0)
            continue;
        size_t wp = workers / wk;
        size_t cost =
            ceil_div(columns, wp) * (ceil_div(plan->panels, wk) + PACK_CALLS);
        if (cost < best) {
            best = cost;
            plan->wk = (int)wk;
            plan->wp = (int)wp;
        }
    }
}

/* The tile, the counts of micro-panel columns and filter row panels, and
 * the worker grid: what the first split of the work depends on. Reads
 * the problem and the ISA table alone. Returns 0 when a count
 * overflows. */
static int plan_grid(const locus__conv_problem *pr, implicit_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    plan->mr = pr->state->isa.mr;
    plan->nr = pr->state->isa.nr;
    if (!locus__cpu_mul_size(sh->channels, sh->kernel_h, &plan->crs) ||
        !locus__cpu_mul_size(plan->crs, sh->kernel_w, &plan->crs) ||
        !locus__cpu_mul_size(sh->out_h, sh->out_w, &plan->pq))
        return 0;
    plan->tiles = ceil_div(plan->pq, plan->nr);
    plan->panels = ceil_div(pr->out_channels, plan->mr);
    if (!locus__cpu_mul_size(pr->batch, plan->tiles, &(size_t){0}) ||
        pr->workers < 1)
        return 0;
    choose_grid(pr, plan);
    return 1;
}

int locus__cpu_implicit_loads(const locus__conv_problem *problem, size_t *loads)
{
    implicit_plan plan;
    if (!plan_grid(problem, &plan))
        return 0;
    const locus_services *sv = problem->state->services;
    for (int rank = 0; rank < problem->workers; rank++) {
        size_t i0, i1, t0, t1;
        sv->split(plan.panels, 1, rank / plan.wp, plan.wk, &i0, &i1);
        sv->split(problem->batch * plan.tiles, 1, rank % plan.wp, plan.wp, &t0,
                  &t1);
        loads[rank] = i1 > i0 ? (t1 - t0) * (i1 - i0 + PACK_CALLS) : 0;
    }
    return 1;
}

/* Returns 0 when a count overflows. Every product below is checked, so
 * the drivers may compute any of them unchecked afterwards. */
static int make_plan(const locus__conv_problem *pr, implicit_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    const locus_services *sv = pr->state->services;
    void *rt = pr->state->runtime;
    size_t page_floats = pr->state->page_size / sizeof(float);
    size_t l1 = sv->cache_bytes(rt, 1), l2 = sv->cache_bytes(rt, 2);
    int l2_sharing = sv->cache_sharing(rt, 2);
    if (l1 == 0)
        l1 = DEFAULT_L1;
    if (l2 == 0)
        l2 = DEFAULT_L2;
    if (l2_sharing > 1)
        l2 /= (size_t)l2_sharing;

    size_t rows;
    if (!plan_grid(pr, plan) ||
        !locus__cpu_mul_size(plan->panels, plan->mr, &rows) ||
        !locus__cpu_mul_size(rows, plan->crs, &plan->filter) ||
        plan->filter > SIZE_MAX - page_floats ||
        !locus__cpu_mul_size(pr->batch, plan->tiles, &(size_t){0}))
        return 0;
    plan->filter = round_up(plan->filter, page_floats);
    plan->kc = depth_block(plan->crs, plan->nr, l1);
    plan->blocks = ceil_div(plan->crs, plan->kc);
    /* The states of the (depth block, row panel) pieces, then on the next
     * cache line the workers' shares, in whole pages after the filter (so
     * the filter's alignment carries over to the parts). blocks * panels
     * <= the filter's floats: no overflow. */
    if (plan->blocks * plan->panels > SIZE_MAX / sizeof(atomic_int) / 2 ||
        (size_t)pr->workers > SIZE_MAX / 4 / sizeof(locus__share) ||
        pr->batch * plan->tiles > LOCUS__SHARE_MAX_UNITS)
        return 0;
    plan->flags =
        round_up(ceil_div(plan->blocks * plan->panels * sizeof(atomic_int) +
                              64 + (size_t)pr->workers * sizeof(locus__share),
                          sizeof(float)),
                 page_floats);

    /* The output slab one worker accumulates: its rows by the block's
     * columns, in a quarter of L2 (the packed filter block takes most of
     * the rest). */
    size_t share_rows = ceil_div(plan->panels, (size_t)plan->wk) * plan->mr;
    size_t slab_column = share_rows * plan->nr * sizeof(float);
    plan->block_tiles = share_rows > SIZE_MAX / plan->nr / sizeof(float)
                            ? 1
                            : max_size(1, l2 / 4 / slab_column);

    /* The output rows a block of positions spans, for its band. */
    size_t span = min_size(plan->pq, plan->block_tiles * plan->nr);
    size_t out_rows = min_size(sh->out_h, (span - 1) / sh->out_w + 2);
    plan->band = locus__cpu_implicit_band_floats(sh, plan->nr, out_rows);
    if (plan->band == 0 &&
        !(sh->kernel_h == 1 && sh->kernel_w == 1 && sh->stride_h == 1 &&
          sh->stride_w == 1 && sh->pad_h == 0 && sh->pad_w == 0))
        return 0;
    /* The B micro-panels, each with nr floats of slack, then the band. */
    plan->panel = round_up((plan->kc + 1) * plan->nr, 16);
    if (plan->panel > SIZE_MAX / LOCUS__IMPLICIT_PANELS)
        return 0;
    plan->panel *= LOCUS__IMPLICIT_PANELS;
    if (plan->band > SIZE_MAX - plan->panel - page_floats)
        return 0;
    size_t part = plan->panel + plan->band;
    plan->stride = round_up(part, page_floats);
    size_t floats;
    if (!locus__cpu_mul_size(plan->stride, (size_t)pr->workers, &floats) ||
        plan->filter > SIZE_MAX - plan->flags ||
        floats > SIZE_MAX - plan->filter - plan->flags)
        return 0;
    floats += plan->filter + plan->flags;
    /* Shared B: where several row groups would each pack the same
     * micro-panels (a small output over many workers: ResNet-50's 7x7
     * layers on 16 workers are a grid of 8 row groups by 2 columns, and
     * packing a micro-panel costs several kernel calls), they are packed
     * once, in pieces of one column by one depth block, into a workspace
     * all workers read. Not for the image read in place (nothing to pack
     * but a partial last panel), and only while it stays small. */
    size_t columns = pr->batch * plan->tiles;
    plan->shared_b = 0;
    plan->b_piece = round_up((plan->kc + 1) * plan->nr, 16);
    if (plan->wk > 1 && plan->band != 0 &&
        columns <= SHARED_B_FLOATS / plan->blocks / plan->b_piece) {
        plan->shared_b = 1;
        plan->b_floats =
            round_up(columns * plan->blocks * plan->b_piece, page_floats);
        plan->b_flags =
            round_up(ceil_div(columns * plan->blocks * sizeof(atomic_int),
                              sizeof(float)),
                     page_floats);
        floats += plan->b_floats + plan->b_flags; /* both bounded above */
    }
    if (!locus__cpu_mul_size(floats, sizeof(float), &plan->bytes))
        return 0;
    return 1;
}

int locus__cpu_implicit_workspace(const locus__conv_problem *problem,
                                  size_t *bytes)
{
    implicit_plan plan;
    if (locus__cpu_direct_fits(problem)) {
        *bytes = locus__cpu_direct_workspace(problem);
        return 1;
    }
    if (!make_plan(problem, &plan))
        return 0;
    *bytes = plan.bytes;
    return 1;
}

/* a[p * mr + row] = src[row][p], rows past `rows` zero: the portable
 * filter packing, where the ISA table has no vector one. */
static inline void interleave(float *a, const float *const *src, size_t kc,
                              size_t rows, size_t mr)
{
    for (size_t p = 0; p < kc; p++, a += mr) {
        for (size_t row = 0; row < rows; row++)
            a[row] = src[row][p];
        for (size_t row = rows; row < mr; row++)
            a[row] = 0.0f;
    }
}

/* Row panel i of depth block b (from depth pc, kcb deep): the block
 * starts at pc * panels * mr, panel i of it at i * mr * kcb, element
 * (p, row) at p * mr + row; rows past K are zero. */
static void pack_piece(const implicit_job *job, size_t b, size_t i)
{
    const locus__conv_problem *pr = job->problem;
    const implicit_plan *plan = &job->plan;
    const locus__cpu_isa *isa = &pr->state->isa;
    size_t mr = plan->mr, crs = plan->crs, k = pr->out_channels;
    size_t rows = min_size(mr, k - i * mr);
    size_t pc = b * plan->kc, kcb = min_size(plan->kc, crs - pc);
    /* Written in order, read as mr sequential streams. */
    float *a = job->filter + pc * plan->panels * mr + i * mr * kcb;
    const float *src[LOCUS__MAX_MR];
    for (size_t row = 0; row < rows; row++)
        src[row] = pr->filter + (i * mr + row) * crs + pc;
    if (isa->pack_a_panel) /* the AVX2 transpose */
        isa->pack_a_panel(a, src, kcb, rows, mr);
    else
        interleave(a, src, kcb, rows, mr);
}

/* Accounts the filter rows of row panels [first, end), every depth. */
static void account_panels(const implicit_job *job, size_t first, size_t end)
{
    const locus__conv_problem *pr = job->problem;
    size_t mr = job->plan.mr, crs = job->plan.crs;
    size_t r0 = first * mr, r1 = min_size(end * mr, pr->out_channels);
    job->services->account_read(pr->op, pr->filter + r0 * crs,
                                (r1 - r0) * crs * sizeof(float));
}

/* Makes row panels [i0, i1) of depth block b packed (see the top):
 * claims and packs the free pieces from panel `from` on, cyclically,
 * then waits for the ones others claimed. Called just before the block
 * is first used, so a piece is still in L2 when the kernel reads it. */
static void prepare_block(const implicit_job *job, size_t b, size_t i0,
                          size_t i1, size_t from)
{
    atomic_int *state = job->packing + b * job->plan.panels;
    size_t run = 0, end = 0; /* panels packed here, accounted by run */
    for (size_t n = 0, i = from; n < i1 - i0;
         n++, i = i + 1 == i1 ? i0 : i + 1) {
        if (!locus__piece_claim(&state[i]))
            continue;
        pack_piece(job, b, i);
        locus__piece_done(&state[i]);
        if (b != 0) /* block 0's packer accounts the whole rows */
            continue;
        if (i != end) {
            if (end > run)
                account_panels(job, run, end);
            run = i;
        }
        end = i + 1;
    }
    if (end > run)
        account_panels(job, run, end);
    locus__pieces_wait(state, i0, i1);
}

/* Shared B piece of micro-panel column t of image n, depth block b. */
static float *b_piece(const implicit_job *job, size_t n, size_t t, size_t b)
{
    const implicit_plan *plan = &job->plan;
    return job->shared_b +
           ((n * plan->tiles + t) * plan->blocks + b) * plan->b_piece;
}

/* Shared B: before depth block b of columns [tb, te) of image n is used,
 * claims and packs, for each column, the first free piece from block b
 * on (so that workers arriving together pack different blocks, and later
 * blocks are ready when they are reached), copying the band first if it
 * is not made yet; then waits for the block's pieces. */
static void prepare_b(const implicit_job *job, size_t n, size_t tb, size_t te,
                      size_t b, const float *image, float *band_buffer,
                      locus__implicit_band *band, int *band_ready)
{
    const locus__conv_problem *pr = job->problem;
    const implicit_plan *plan = &job->plan;
    size_t nr = plan->nr, pq = plan->pq;
    for (size_t t = tb; t < te; t++) {
        atomic_int *state =
            job->b_states + (n * plan->tiles + t) * plan->blocks;
        for (size_t blk = b; blk < plan->blocks; blk++) {
            if (!locus__piece_claim(&state[blk]))
                continue;
            if (!*band_ready) {
                locus__cpu_implicit_band(&pr->shape, &pr->state->isa, image, nr,
                                         tb * nr, min_size(te * nr, pq),
                                         band_buffer, band);
                *band_ready = 1;
            }
            size_t pc = blk * plan->kc,
                   kcb = min_size(plan->kc, plan->crs - pc);
            locus__cpu_implicit_pack_b(&pr->shape, band, nr, t * nr,
                                       min_size(nr, pq - t * nr), pc, kcb,
                                       b_piece(job, n, t, blk), plan->b_piece);
            locus__piece_done(&state[blk]);
            break;
        }
    }
    for (size_t t = tb; t < te; t++) {
        size_t first = (n * plan->tiles + t) * plan->blocks + b;
        locus__pieces_wait(job->b_states, first, first + 1);
    }
}

/* Micro-panel columns [t0, t1) of image n, row panels [i0, i1). */
static void run_share(const implicit_job *job, size_t n, size_t t0, size_t t1,
                      size_t i0, size_t i1, size_t from, float *bp,
                      float *band_buffer)
{
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    const implicit_plan *plan = &job->plan;
    const locus__cpu_isa *isa = &pr->state->isa;
    size_t mr = plan->mr, nr = plan->nr, pq = plan->pq, k = pr->out_channels;
    const float *image = pr->input + n * sh->channels * sh->height * sh->width;
    float *out = pr->output + n * k * pq;
    size_t image_n = n; /* n is a column count in the loop below */
    locus__cpu_conv_account_rows(job->problem, image, t0 * nr,
                                 min_size(t1 * nr, pq));

    for (size_t tb = t0; tb < t1; tb += plan->block_tiles) {
        size_t te = min_size(t1, tb + plan->block_tiles);
        locus__implicit_band band = {0};
        int band_ready = plan->shared_b == 0;
        if (band_ready)
            locus__cpu_implicit_band(sh, isa, image, nr, tb * nr,
                                     min_size(te * nr, pq), band_buffer, &band);
        for (size_t pc = 0; pc < plan->crs; pc += plan->kc) {
            size_t kcb = min_size(plan->kc, plan->crs - pc);
            const float *block = job->filter + pc * plan->panels * mr;
            float beta = pc == 0 ? 0.0f : 1.0f;
            int last = pc + kcb == plan->crs; /* the tiles are finished */
            /* Packs the worker's pieces on first use, else only checks. */
            prepare_block(job, pc / plan->kc, i0, i1, from);
            if (plan->shared_b)
                prepare_b(job, n, tb, te, pc / plan->kc, image, band_buffer,
                          &band, &band_ready);
            for (size_t t = tb; t < te; t += LOCUS__IMPLICIT_PANELS) {
                size_t j0 = t * nr;
                size_t n = min_size(LOCUS__IMPLICIT_PANELS * nr, pq - j0);
                size_t stride = plan->panel / LOCUS__IMPLICIT_PANELS;
                n = min_size(n, (te - t) * nr);
                /* The image is the column matrix (1x1): whole micro-panels
                 * are read in place, rows pq apart. */
                int in_place = band.direct && n % nr == 0;
                if (!in_place && !plan->shared_b)
                    locus__cpu_implicit_pack_b(sh, &band, nr, j0, n, pc, kcb,
                                               bp, stride);
                for (size_t g = 0; g * nr < n; g++) {
                    size_t cols = min_size(nr, n - g * nr);
                    const float *b = bp + g * stride;
                    if (plan->shared_b)
                        b = b_piece(job, image_n, t + g, pc / plan->kc);
                    if (in_place)
                        b = image + pc * pq + j0 + g * nr;
                    for (size_t i = i0; i < i1; i++) {
                        const float *a = block + i * mr * kcb;
                        float *c = out + i * mr * pq + j0 + g * nr;
                        size_t rows = min_size(mr, k - i * mr);
                        if (last && (in_place || cols == nr) &&
                            isa->sgemm_strided_epilogue) {
                            /* The bias and activation in registers: a
                             * pass of its own over the tile just stored
                             * cost as much as the tile's arithmetic at
                             * small depths (docs/PERFORMANCE.md). */
                            const float *bias = pr->epilogue.bias;
                            isa->sgemm_strided_epilogue(
                                kcb, a, b, in_place ? pq : nr, c, pq, beta,
                                bias ? bias + i * mr : NULL,
                                (int)pr->epilogue.activation, rows);
                            continue;
                        }
                        if (in_place && rows == mr)
                            isa->sgemm_strided(kcb, a, b, pq, c, pq, 1.0f,
                                               beta);
                        else if (rows == mr && cols == nr)
                            isa->sgemm(kcb, a, b, c, pq, 1.0f, beta);
                        else if (cols == nr && isa->sgemm_strided_rows)
                            /* The last row panel, partial: its rows only,
                             * faster than through a whole tile
                             * (docs/PERFORMANCE.md). */
                            isa->sgemm_strided_rows(kcb, a, b,
                                                    in_place ? pq : nr, c, pq,
                                                    1.0f, beta, rows);
                        else
                            locus__sgemm_edge_tile(isa, kcb, a, b,
                                                   in_place ? pq : nr, c, pq,
                                                   rows, cols, 1.0f, beta);
                        /* The layer's bias and activation while the tile
                         * is in L1 (conv_epilogue.h). */
                        if (last)
                            locus__conv_epilogue_apply(&pr->epilogue, c, pq,
                                                       i * mr, rows, cols);
                    }
                }
            }
        }
    }
}

/* Micro-panel columns [t0, t1) of the batch (image by image), row panels
 * [i0, i1). */
static void run_columns(const implicit_job *job, size_t t0, size_t t1,
                        size_t i0, size_t i1, size_t from, float *bp,
                        float *band_buffer)
{
    size_t tiles = job->plan.tiles;
    for (size_t t = t0; t < t1;) {
        size_t n = t / tiles, first = t % tiles;
        size_t end = min_size(tiles, first + (t1 - t));
        run_share(job, n, first, end, i0, i1, from, bp, band_buffer);
        t += end - first;
    }
}

static void compute_worker(void *arg, int rank, int ranks)
{
    const implicit_job *job = arg;
    const implicit_plan *plan = &job->plan;
    assert(ranks == plan->wk * plan->wp);
    (void)ranks;
    float *part = job->parts + (size_t)rank * plan->stride;
    float *bp = part, *band_buffer = part + plan->panel;

    size_t i0, i1;
    job->services->split(plan->panels, 1, rank / plan->wp, plan->wk, &i0, &i1);
    if (i0 >= i1)
        return;
    /* The workers sharing these rows start a share of them apart. */
    size_t from = i0 + (i1 - i0) * (size_t)(rank % plan->wp) / (size_t)plan->wp;
    /* Its own columns a block (or less, shares.h) at a time, then the
     * others' of the same rows. */
    int first = rank - rank % plan->wp, end = first + plan->wp;
    size_t t0, t1, limit;
    while (locus__share_take(&job->shares[rank], 0, plan->block_tiles, &t0, &t1,
                             &limit))
        run_columns(job, t0, t1, i0, i1, from, bp, band_buffer);
    for (int victim;
         (victim = locus__share_largest(job->shares, first, end)) >= 0;)
        if (locus__share_take(&job->shares[victim], 1, 0, &t0, &t1, &limit))
            run_columns(job, t0, t1, i0, i1, from, bp, band_buffer);
}

locus_status locus__cpu_conv2d_implicit(const locus__conv_problem *problem)
{
    const locus__cpu_state *s = problem->state;
    const locus_services *services = s->services;
    if (locus__cpu_direct_fits(problem))
        return locus__cpu_conv2d_direct(problem);
    implicit_job job = {.problem = problem, .services = services};
    if (!make_plan(problem, &job.plan))
        return services->fail(
            LOCUS_ERROR_SIZE_OVERFLOW,
            "conv2d implicit gemm of %zu filters over %zu x %zu x %zu taps "
            "and %zu x %zu positions overflows",
            problem->out_channels, problem->shape.channels,
            problem->shape.kernel_h, problem->shape.kernel_w,
            problem->shape.out_h, problem->shape.out_w);

    /* The packed filter from the cache where the filter buffer has a
     * content key (filter_cache.c): packed already, or to be packed there
     * by this call. Else in the workspace, first. */
    locus__filter_lease lease;
    locus__filter_cache_lease_problem(problem, job.plan.mr, job.plan.kc,
                                      job.plan.filter * sizeof(float), &lease);
    size_t own_filter = lease.entry ? 0 : job.plan.filter;
    int node = problem->node;
    size_t bytes =
        job.plan.bytes - (job.plan.filter - own_filter) * sizeof(float);
    locus__gemm_buffers buffers;
    locus_status status = locus__gemm_workspace_acquire(
        s->gemm_workspace, services, s->runtime, 1, &node, &bytes, &buffers);
    if (status != LOCUS_SUCCESS) {
        locus__filter_cache_return(s->filter_cache, &lease, 0);
        return status;
    }
    float *memory = buffers.memory[0];
    job.filter = lease.entry ? lease.memory : memory;
    job.packing = (atomic_int *)(void *)(memory + own_filter);
    job.parts = memory + own_filter + job.plan.flags;
    if (job.plan.shared_b) {
        job.shared_b = job.parts + job.plan.stride * (size_t)problem->workers;
        job.b_states = (atomic_int *)(void *)(job.shared_b + job.plan.b_floats);
        size_t b_pieces = problem->batch * job.plan.tiles * job.plan.blocks;
        for (size_t i = 0; i < b_pieces; i++)
            atomic_init(&job.b_states[i], LOCUS__PIECE_FREE);
    }
    size_t pieces = job.plan.blocks * job.plan.panels;
    for (size_t i = 0; i < pieces; i++)
        atomic_init(&job.packing[i],
                    lease.ready ? LOCUS__PIECE_DONE : LOCUS__PIECE_FREE);
    uintptr_t after = (uintptr_t)(void *)(job.packing + pieces);
    job.shares = (locus__share *)(void *)((after + 63) & ~(uintptr_t)63);
    for (int r = 0; r < problem->workers; r++) {
        size_t t0, t1;
        services->split(problem->batch * job.plan.tiles, 1, r % job.plan.wp,
                        job.plan.wp, &t0, &t1);
        locus__share_init(&job.shares[r], t0, t1);
    }
    if (problem->op && problem->op->record)
        problem->op->record->workspace_bytes = job.plan.bytes;

    status = locus__cpu_run(s, problem->node, locus__conv_is_tiny(problem),
                            compute_worker, &job);
    /* Every piece is packed by the time the workers end (each row group
     * has columns, so one of its workers packs its panels of every depth
     * block); checked all the same before the packing is kept. */
    int packed = status == LOCUS_SUCCESS;
    for (size_t i = 0; i < pieces && packed; i++)
        packed = atomic_load(&job.packing[i]) == LOCUS__PIECE_DONE;
    locus__gemm_workspace_release(services, s->runtime, &buffers);
    locus__filter_cache_return(s->filter_cache, &lease, packed);
    return status;
}
