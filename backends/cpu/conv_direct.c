/* 2-D convolution computed directly: each output row of each image, for
 * each group of TF filters, as tiles of TP positions (the ISA's
 * conv_direct kernel: AVX-512 14 x 32, kernels/conv_direct_avx512.c; AVX2
 * 6 x 16, kernels/conv_direct_avx2.c). The kernel's vectors are TF
 * filters' weights of one tap, from the filter packed by groups of TF
 * (w[p * TF + j] for depth step p; taps in (c, r, s) order, or (r, c,
 * s) where the filter cache keeps the packing: see tap_major); the
 * positions are broadcasts read straight from the image, so nothing of
 * im2col's column is ever packed: depth step p of a tile is at
 * `offsets[p]` floats from its first position, position i `stride_w * i`
 * floats further.
 *
 * Padding. The image is read in place where the layer has no padding and
 * a row's last tile stays inside the row (1x1 layers whose output width
 * is a multiple of TP).
 * Otherwise each worker copies the input rows its next output rows read,
 * every channel, into its own band of zero-bordered rows, wx floats wide
 * so that the last tile's unused positions stay inside the row. A band is
 * the worker's alone: a padded image shared by all workers makes each wait
 * for the slowest to copy its share, a noticeable part of a short call
 * (docs/PERFORMANCE.md).
 *
 * Work. Units are (filter group, image, output row), ordered row-blocked
 * (image, block of a band's rows, group, row), so that a band of input
 * rows serves every group and a tile's 32 planes are written in runs of
 * a band's rows, or group-major (group, image, row), so that a group's
 * packed weights stay in L2 while a worker walks the rows, whichever
 * moves fewer bytes (choose_blocking). Each worker starts with an even,
 * contiguous share (services->split) and runs it from the front, a band
 * of up to BAND_ROWS output rows at a time (kept while the next units
 * need the same rows); then it takes half of the largest share left from
 * its back, until none is (compute_worker). Depth is cut into blocks only
 * where one group's packed filter would not fit half of L2; the later
 * blocks add to the output.
 *
 * The packed filter is the one shared workspace (unless the filter cache,
 * filter_cache.c, holds it from an earlier call), prepared inside the
 * compute job (conv_implicit.c says why not in a job of its own) in
 * pieces of one group and one depth chunk (pieces.h): before a worker
 * first uses a group it claims and packs the free pieces, starting a share
 * of them apart from the other workers of the group, then waits for those
 * others claimed.
 *
 * Every output element is computed by the same kernel calls whichever
 * worker owns it: results do not depend on the worker count. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "conv_direct.h"

#include "pieces.h"
#include "shares.h"

#define DEFAULT_L2 (256u << 10)
/* Depth steps per filter-packing piece. */
#define PACK_CHUNK 256
/* Output rows per band, at most. */
#define BAND_ROWS 16

typedef struct direct_plan {
    size_t positions, filters; /* the kernel's tile, TP x TF */
    size_t crs, pq;
    size_t groups;    /* filter groups of `filters` */
    size_t row_tiles; /* tiles per output row */
    size_t depth;     /* depth block: all of crs unless L2 is short */
    int row_blocked;  /* units (image, band_out rows, group, row), else
                         (group, image, row) */
    size_t chunks;    /* filter-packing pieces per group */
    int copy;         /* rows copied into padded bands */
    size_t band_out;  /* output rows per band, at most */
    size_t band_rows; /* a band's input rows (padded coordinates) */
    size_t wx;        /* floats per row as read */
    size_t plane;     /* floats between two channels as read */
    /* Workspace, in floats, each part in whole pages. */
    size_t filter_floats, offset_floats, state_floats;
    size_t band_floats; /* one worker's band */
    size_t bytes;
} direct_plan;

typedef struct direct_job {
    const locus__conv_problem *problem;
    const locus_services *services;
    direct_plan plan;
    float *filter; /* packed, groups x crs x TF */
    const ptrdiff_t *offsets;
    atomic_int *filter_states; /* groups x chunks */
    float *bands;              /* per worker, band_floats apart */
    locus__share *shares;      /* per worker (shares.h) */
    int tap_major;             /* the packing's order: see tap_major() */
} direct_job;

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Fraction of the kernel's lanes that compute real outputs, in both
 * orientations: the direct tile's (positions of a row by filters) and the
 * implicit GEMM's (filters by positions of the whole image). */
static double direct_efficiency(const locus__conv_problem *pr, size_t tp,
                                size_t tf)
{
    double q = (double)pr->shape.out_w, k = (double)pr->out_channels;
    return q / (double)(ceil_div(pr->shape.out_w, tp) * tp) * k /
           (double)(ceil_div(pr->out_channels, tf) * tf);
}

static double implicit_efficiency(const locus__conv_problem *pr, size_t mr,
                                  size_t nr)
{
    size_t pq = pr->shape.out_h * pr->shape.out_w;
    return (double)pq / (double)(ceil_div(pq, nr) * nr) *
           (double)pr->out_channels /
           (double)(ceil_div(pr->out_channels, mr) * mr);
}

/* Returns 0 where the kernel is missing or a count overflows. Reads the
 * problem and the ISA table alone (the tests build problems without a
 * runtime); the depth block and the order by choose_blocking. */
static int make_plan(const locus__conv_problem *pr, direct_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    const locus__cpu_isa *isa = &pr->state->isa;
    if (!isa->conv_direct)
        return 0;
    size_t page_floats = pr->state->page_size / sizeof(float);
    plan->positions = isa->direct_positions;
    plan->filters = isa->direct_filters;
    if (!locus__cpu_mul_size(sh->channels, sh->kernel_h, &plan->crs) ||
        !locus__cpu_mul_size(plan->crs, sh->kernel_w, &plan->crs) ||
        !locus__cpu_mul_size(sh->out_h, sh->out_w, &plan->pq) ||
        plan->crs > PTRDIFF_MAX / sizeof(float))
        return 0;
    plan->groups = ceil_div(pr->out_channels, plan->filters);
    plan->row_tiles = ceil_div(sh->out_w, plan->positions);
    /* Units (group, image, row) must fit a half of a share's word. */
    size_t units;
    if (!locus__cpu_mul_size(plan->groups, pr->batch, &units) ||
        !locus__cpu_mul_size(units, sh->out_h, &units) ||
        units > LOCUS__SHARE_MAX_UNITS)
        return 0;

    plan->chunks = ceil_div(plan->crs, PACK_CHUNK);

    /* The last tile of a row reads up to here, in floats from the row. */
    size_t reach;
    if (!locus__cpu_mul_size(plan->row_tiles * plan->positions - 1,
                             sh->stride_w, &reach) ||
        reach > SIZE_MAX - sh->kernel_w)
        return 0;
    reach += sh->kernel_w;
    plan->copy = sh->pad_h != 0 || sh->pad_w != 0 || reach > sh->width;
    plan->band_out = min_size(sh->out_h, BAND_ROWS);
    plan->band_rows = (plan->band_out - 1) * sh->stride_h + sh->kernel_h;
    plan->wx = plan->copy ? sh->width + 2 * sh->pad_w : sh->width;
    if (plan->wx < reach)
        plan->wx = reach;
    if (!locus__cpu_mul_size(plan->copy ? plan->band_rows : sh->height,
                             plan->wx, &plan->plane))
        return 0;

    /* Workspace: packed filter, offsets, piece states, the bands. */
    size_t rows, states;
    if (!locus__cpu_mul_size(plan->groups, plan->filters, &rows) ||
        !locus__cpu_mul_size(rows, plan->crs, &plan->filter_floats) ||
        !locus__cpu_mul_size(plan->groups, plan->chunks, &states) ||
        !locus__cpu_mul_size(plan->plane, sh->channels, &plan->band_floats))
        return 0;
    if (!plan->copy)
        plan->band_floats = 0;
    plan->offset_floats =
        ceil_div(plan->crs * sizeof(ptrdiff_t), sizeof(float));
    if (pr->workers < 1 || (size_t)pr->workers > SIZE_MAX / 256 ||
        states > SIZE_MAX / 256)
        return 0;
    plan->state_floats =
        ceil_div(states * sizeof(atomic_int) + 64 +
                     (size_t)pr->workers * sizeof(locus__share),
                 sizeof(float));
    size_t parts[4] = {plan->filter_floats, plan->offset_floats,
                       plan->state_floats, plan->band_floats};
    size_t floats = 0;
    for (int i = 0; i < 4; i++) {
        if (parts[i] > SIZE_MAX / 4 - page_floats)
            return 0;
        parts[i] = ceil_div(parts[i], page_floats) * page_floats;
        size_t count = i == 3 ? (size_t)pr->workers : 1;
        if (parts[i] > (SIZE_MAX / 4 - floats) / count)
            return 0;
        floats += parts[i] * count;
    }
    plan->filter_floats = parts[0];
    plan->offset_floats = parts[1];
    plan->state_floats = parts[2];
    plan->band_floats = parts[3];
    plan->bytes = floats * sizeof(float);
    return 1;
}

/* One worker's share of L2; DEFAULT_L2 where the topology does not say
 * (or, in the unit tests' problems, there is no runtime to ask). */
static size_t l2_per_worker(const locus__conv_problem *pr)
{
    const locus_services *sv = pr->state->services;
    if (!sv)
        return DEFAULT_L2;
    size_t l2 = sv->cache_bytes(pr->state->runtime, 2);
    int sharing = sv->cache_sharing(pr->state->runtime, 2);
    if (l2 == 0)
        l2 = DEFAULT_L2;
    if (sharing > 1)
        l2 /= (size_t)sharing;
    return l2;
}

/* One group's packed filter block in half of L2 (the kernel streams it
 * once per tile), all of the depth where it fits; and the units' order.
 * Row-blocked order (image, block of band_out rows, group, row) copies each
 * band of input rows once for every group and streams the whole packed
 * filter once per block; group-major order (group, image, row) streams each
 * group's filter once per worker and copies (or, read in place, reads)
 * every band once per group. Row-blocked where the whole packed filter fits
 * half of L2, so that streaming it is free, or where it moves fewer bytes,
 * a copy counting twice (read and written). Blocks of a band's rows rather
 * than of one row: a row at a time writes a tile's 32 planes interleaved
 * with all the others (256 planes on the 1x1 64->256 layer), blocks of rows
 * write them in runs, much faster; and where a band is the whole image (3x3
 * 256->256 at 14x14), row-blocked copies it once where group-major copies
 * it once per group (docs/PERFORMANCE.md). */
static void choose_blocking(const locus__conv_problem *pr, direct_plan *plan)
{
    size_t l2 = l2_per_worker(pr);
    size_t most = l2 / 2 / (plan->filters * sizeof(float)) / 8 * 8;
    plan->depth = most < 64 ? 64 : most;
    if (plan->depth >= plan->crs)
        plan->depth = plan->crs;
    /* Per band of rows; a band of the image read in place is its rows. */
    double filter_bytes = (double)plan->filter_floats * sizeof(float);
    double band_bytes = (double)plan->band_rows * (double)plan->wx *
                        (double)pr->shape.channels * sizeof(float) *
                        (plan->copy ? 2.0 : 1.0);
    plan->row_blocked = filter_bytes <= (double)(l2 / 2) ||
                        filter_bytes <= (double)plan->groups * band_bytes;
}

int locus__cpu_direct_fits(const locus__conv_problem *problem)
{
    const locus__cpu_isa *isa = &problem->state->isa;
    direct_plan plan;
    if (!make_plan(problem, &plan))
        return 0;
    /* 1x1 stride-1 layers go to the implicit GEMM (which reads an
     * unpadded one's image in place, conv_implicit.c) in two cases:
     *  - the output share does not fit a worker's L2: the direct tile
     *    stores into 32 planes at once, in pieces of a line and a half,
     *    which to memory is slower than the GEMM's whole output rows
     *    (docs/PERFORMANCE.md);
     *  - unpadded, with positions that fill the GEMM's micro-panels (95%
     *    of their lanes or more): then the GEMM reads whole micro-panels
     *    of the image, asking for the next one ahead, where the direct
     *    tile reads a line and a half of each of C planes, and the GEMM
     *    is the faster at 56x56 and 28x28. At 14x14 (196 positions, 88%
     *    of the lanes of 7 micro-panels of 32) the direct kernel is; at
     *    7x7 (77%) the two are even (the lane rule below picks the GEMM;
     *    docs/PERFORMANCE.md). */
    const locus__conv_shape *sh = &problem->shape;
    if (sh->kernel_h == 1 && sh->kernel_w == 1 && sh->stride_h == 1 &&
        sh->stride_w == 1) {
        double share = (double)problem->batch * (double)problem->out_channels *
                       (double)plan.pq * sizeof(float) /
                       (double)problem->workers;
        size_t nr = isa->nr;
        double lanes = (double)plan.pq / (double)(ceil_div(plan.pq, nr) * nr);
        if (share > (double)l2_per_worker(problem) ||
            (sh->pad_h == 0 && sh->pad_w == 0 && lanes >= 0.95))
            return 0;
    }
    /* The direct kernel saves the implicit GEMM's packing of the input (a
     * small part of its time, docs/PERFORMANCE.md), so it may waste a
     * little more of its lanes and still win, not much more. */
    return direct_efficiency(problem, plan.positions, plan.filters) >=
           0.95 * implicit_efficiency(problem, isa->mr, isa->nr);
}

size_t locus__cpu_direct_workspace(const locus__conv_problem *problem)
{
    direct_plan plan;
    return make_plan(problem, &plan) ? plan.bytes : 0;
}

int locus__cpu_direct_loads(const locus__conv_problem *problem, size_t *loads)
{
    direct_plan plan;
    if (!make_plan(problem, &plan))
        return 0;
    /* The units as locus__cpu_conv2d_direct splits them. */
    size_t units = plan.groups * problem->batch * problem->shape.out_h;
    for (int r = 0; r < problem->workers; r++) {
        size_t u0, u1;
        problem->state->services->split(units, 1, r, problem->workers, &u0,
                                        &u1);
        loads[r] = (u1 - u0) * plan.row_tiles;
    }
    return 1;
}

/* Where original depth step p = (c, r, s) goes in a tap-major packing:
 * order (r, c, s), so that the taps of one filter row r are contiguous
 * and an output row whose top or bottom taps fall in the padding skips
 * them (run_rows): a twentieth of the 3x3 layer at 14x14. */
static size_t tap_major(const locus__conv_shape *sh, size_t p)
{
    size_t rs = sh->kernel_h * sh->kernel_w;
    size_t c = p / rs, r = p % rs / sh->kernel_w, s = p % sh->kernel_w;
    return (r * sh->channels + c) * sh->kernel_w + s;
}

/* Filter piece: group g, original depth steps [h * PACK_CHUNK, ...)
 * (piece = g * chunks + h), transposed by the ISA's routine, which wants
 * contiguous depth as the (c, r, s) order has it. A tap-major packing
 * goes TRANSPOSE_STEPS steps at a time through a small buffer, each
 * step's TF floats then put at their place: the scattered stores cost
 * a tenth of a call on the 256-channel layer, so only a packing the
 * cache keeps (filter_cache.c) is tap-major. */
#define TRANSPOSE_STEPS 64
static void pack_filter_piece(const void *context, size_t piece)
{
    const direct_job *job = context;
    const locus__conv_problem *pr = job->problem;
    const direct_plan *plan = &job->plan;
    const locus__cpu_isa *isa = &pr->state->isa;
    size_t g = piece / plan->chunks, h = piece % plan->chunks;
    size_t tf = plan->filters, crs = plan->crs;
    size_t first = g * tf, rows = min_size(tf, pr->out_channels - first);
    size_t end = min_size(crs, (h + 1) * PACK_CHUNK);
    float *group = job->filter + g * tf * crs;
    float buffer[TRANSPOSE_STEPS * LOCUS__MAX_DIRECT_FILTERS];
    const float *src[LOCUS__MAX_DIRECT_FILTERS];
    size_t most = job->tap_major ? TRANSPOSE_STEPS : PACK_CHUNK;
    for (size_t p0 = h * PACK_CHUNK; p0 < end; p0 += most) {
        size_t count = min_size(most, end - p0);
        float *to = job->tap_major ? buffer : group + p0 * tf;
        for (size_t j = 0; j < rows; j++)
            src[j] = pr->filter + (first + j) * crs + p0;
        if (isa->pack_a_panel)
            isa->pack_a_panel(to, src, count, rows, tf);
        else
            for (size_t p = 0; p < count; p++)
                for (size_t j = 0; j < tf; j++)
                    to[p * tf + j] = j < rows ? src[j][p] : 0.0f;
        for (size_t p = 0; job->tap_major && p < count; p++) {
            float *place = group + tap_major(&pr->shape, p0 + p) * tf;
            for (size_t j = 0; j < tf; j++)
                place[j] = buffer[p * tf + j];
        }
    }
    if (h == 0) /* the whole rows, once */
        job->services->account_read(pr->op, pr->filter + first * crs,
                                    rows * crs * sizeof(float));
}

/* A worker's band: padded rows [row0, row0 + rows) of image n, every
 * channel, plane floats apart; the rows inside the image by the ISA's
 * padded copy (isa.h), the padding rows zeroed. */
static void pad_band(const direct_job *job, size_t n, size_t row0, size_t rows,
                     float *band)
{
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    const direct_plan *plan = &job->plan;
    size_t wx = plan->wx, w = sh->width, hw = sh->height * w;
    const float *image = pr->input + n * sh->channels * hw;
    /* Band rows [lo, hi) are inside the image: padded row y is input row
     * y - pad_h. */
    size_t ph = sh->pad_h;
    size_t lo = row0 < ph ? min_size(ph - row0, rows) : 0;
    size_t hi =
        ph + sh->height > row0 ? min_size(rows, ph + sh->height - row0) : 0;
    if (hi < lo)
        hi = lo;
    for (size_t c = 0; c < sh->channels; c++) {
        float *dst = band + c * plan->plane;
        memset(dst, 0, lo * wx * sizeof *dst);
        if (hi > lo)
            pr->state->isa.pad_rows(dst + lo * wx, wx,
                                    image + c * hw + (row0 + lo - ph) * w, w,
                                    hi - lo, sh->pad_w, w, wx);
        memset(dst + hi * wx, 0, (rows - hi) * wx * sizeof *dst);
    }
}

/* What a worker keeps between its runs: the band it last copied. */
typedef struct worker_band {
    float *memory;
    size_t image, row0, rows; /* image SIZE_MAX: none yet */
} worker_band;

/* Output rows [oh0, oh1) of image n for filter group g: the band (copied
 * unless the worker's last one holds the rows; a copy reaches on to row
 * `ahead`, the end of what the worker expects to do next in this image;
 * an image read in place has its band only accounted, so once per pass
 * of a group, not per call), then every depth block of every row's
 * tiles. */
static void run_rows(const direct_job *job, worker_band *wb, size_t g, size_t n,
                     size_t oh0, size_t oh1, size_t ahead)
{
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    const direct_plan *plan = &job->plan;
    const locus__cpu_isa *isa = &pr->state->isa;
    size_t tp = plan->positions, tf = plan->filters, k = pr->out_channels;
    size_t filters = min_size(tf, k - g * tf), sh_h = sh->stride_h;
    size_t row0 = oh0 * sh_h, rows = (oh1 - 1 - oh0) * sh_h + sh->kernel_h;
    const float *image = pr->input + n * sh->channels * sh->height * sh->width;
    /* The band: rows copied, or (read in place) rows accounted. */
    if (wb->image != n || row0 < wb->row0 ||
        row0 + rows > wb->row0 + wb->rows) {
        size_t end = min_size(ahead, oh0 + plan->band_out);
        size_t span = (end - 1 - oh0) * sh_h + sh->kernel_h;
        if (plan->copy)
            pad_band(job, n, row0, span, wb->memory);
        locus__cpu_conv_account_rows(pr, image, oh0 * sh->out_w,
                                     end * sh->out_w);
        *wb = (worker_band){wb->memory, n, row0, span};
    }
    const float *base = plan->copy ? wb->memory + (row0 - wb->row0) * plan->wx
                                   : image + row0 * plan->wx;

    /* Depth blocks outermost (the group's block stays in L2 across the
     * rows); in each, a row's taps [lo, hi): in a tap-major packing the
     * filter rows r whose input rows are inside the image, else all. */
    const float *w = job->filter + g * tf * plan->crs;
    size_t cs = sh->channels * sh->kernel_w;
    for (size_t p0 = 0; p0 < plan->crs; p0 += plan->depth) {
        size_t p1 = min_size(plan->crs, p0 + plan->depth);
        for (size_t oh = oh0; oh < oh1; oh++) {
            size_t top = oh * sh_h; /* padded input row of tap row 0 */
            size_t r_lo = top >= sh->pad_h ? 0 : sh->pad_h - top;
            size_t r_hi =
                min_size(sh->kernel_h, sh->height + sh->pad_h > top
                                           ? sh->height + sh->pad_h - top
                                           : 0);
            size_t lo = r_lo * cs, hi = r_hi > r_lo ? r_hi * cs : lo;
            if (!job->tap_major) {
                lo = 0;
                hi = plan->crs;
            }
            size_t q0 = lo > p0 ? lo : p0, q1 = min_size(hi, p1);
            float *out =
                pr->output + ((n * k + g * tf) * sh->out_h + oh) * sh->out_w;
            /* nothing of this row in the block, else (all padding) the
             * tile is written as zeros */
            int skip = q0 >= q1 && !(lo >= hi && p0 == 0);
            if (q0 > q1)
                q1 = q0;
            const float *row = base + (oh - oh0) * sh_h * plan->wx;
            for (size_t t = 0; !skip && t < plan->row_tiles; t++)
                isa->conv_direct(
                    q1 - q0, w + q0 * tf, row + t * tp * sh->stride_w,
                    job->offsets + q0, sh->stride_w, out + t * tp, plan->pq,
                    min_size(tp, sh->out_w - t * tp), filters, q0 > lo);
            /* After the last block the row is finished (written here or
             * in an earlier block): the layer's bias and activation
             * while it is in cache (conv_epilogue.h). */
            if (p1 == plan->crs)
                locus__conv_epilogue_apply(&pr->epilogue, out, plan->pq, g * tf,
                                           filters, sh->out_w);
        }
    }
}

/* Units [u0, u1), the worker expecting to go on to `limit`: per unit its
 * group's packed weights (prepared when the group changes), then its
 * rows, at most band_out at a time. */
static void run_units(const direct_job *job, worker_band *wb, size_t u0,
                      size_t u1, size_t limit, int rank, int ranks)
{
    const locus__conv_problem *pr = job->problem;
    const direct_plan *plan = &job->plan;
    size_t oh_count = pr->shape.out_h, groups = plan->groups;
    size_t per_group = pr->batch * oh_count;
    size_t prepared = SIZE_MAX;
    for (size_t u = u0; u < u1;) {
        /* The unit's group, image and row, the rows of the same group
         * that follow it in [u, u1) (count), and how far the worker's
         * rows of this image go (ahead). */
        size_t g, n, oh, count, ahead;
        if (plan->row_blocked) {
            /* The unit's block holds rows [first, first + rows) of image
             * n, its units group by group. */
            size_t per_image = groups * oh_count, rb = plan->band_out;
            n = u / per_image;
            size_t first = u % per_image / (rb * groups) * rb;
            size_t rows = min_size(rb, oh_count - first);
            size_t in_block = u % per_image - first * groups;
            g = in_block / rows;
            oh = first + in_block % rows;
            count = min_size(u1 - u, first + rows - oh);
            /* The band reaches to the block's end only if the worker's
             * units go on to another group of it (which restarts at the
             * block's first row). */
            ahead = min_size(first + rows, oh + (limit - u));
        } else {
            g = u / per_group;
            n = u % per_group / oh_count;
            oh = u % oh_count;
            size_t image_end = u - oh + oh_count;
            count = min_size(u1, image_end) - u;
            ahead = min_size(limit, image_end) - (u - oh);
        }
        if (g != prepared) {
            locus__pieces_prepare(job->filter_states, g * plan->chunks,
                                  plan->chunks,
                                  plan->chunks * (size_t)rank / (size_t)ranks,
                                  pack_filter_piece, job);
            prepared = g;
        }
        for (size_t o = oh; o < oh + count; o += plan->band_out)
            run_rows(job, wb, g, n, o, min_size(oh + count, o + plan->band_out),
                     ahead);
        u += count;
    }
}

/* Each worker runs its own share from the front, a band at a time, then
 * steals (shares.h). */
static void compute_worker(void *arg, int rank, int ranks)
{
    const direct_job *job = arg;
    const direct_plan *plan = &job->plan;
    worker_band wb = {job->bands + (size_t)rank * plan->band_floats, SIZE_MAX,
                      0, 0};
    size_t u0, u1, limit;
    while (locus__share_take(&job->shares[rank], 0, plan->band_out, &u0, &u1,
                             &limit))
        run_units(job, &wb, u0, u1, limit, rank, ranks);
    for (int victim;
         (victim = locus__share_largest(job->shares, 0, ranks)) >= 0;)
        if (locus__share_take(&job->shares[victim], 1, 0, &u0, &u1, &limit))
            run_units(job, &wb, u0, u1, limit, rank, ranks);
}

locus_status locus__cpu_conv2d_direct(const locus__conv_problem *problem)
{
    const locus__cpu_state *s = problem->state;
    const locus_services *services = s->services;
    const locus__conv_shape *sh = &problem->shape;
    direct_job job = {.problem = problem, .services = services};
    if (!make_plan(problem, &job.plan))
        return services->fail(LOCUS_ERROR_SIZE_OVERFLOW,
                              "conv2d direct of %zu filters over %zu x %zu x "
                              "%zu taps overflows",
                              problem->out_channels, sh->channels, sh->kernel_h,
                              sh->kernel_w);
    choose_blocking(problem, &job.plan);
    const direct_plan *plan = &job.plan;

    /* The packed filter from the cache where the filter buffer has a
     * content key (filter_cache.c): packed already, or to be packed there
     * by this call. Else in the workspace, first. */
    locus__filter_lease lease;
    locus__filter_cache_lease_problem(
        problem, plan->filters, 0, plan->filter_floats * sizeof(float), &lease);
    size_t own_filter = lease.entry ? 0 : plan->filter_floats;
    int node = problem->node;
    size_t bytes =
        plan->bytes - (plan->filter_floats - own_filter) * sizeof(float);
    locus__gemm_buffers buffers;
    locus_status status = locus__gemm_workspace_acquire(
        s->gemm_workspace, services, s->runtime, 1, &node, &bytes, &buffers);
    if (status != LOCUS_SUCCESS) {
        locus__filter_cache_return(s->filter_cache, &lease, 0);
        return status;
    }
    float *memory = (float *)buffers.memory[0] + own_filter;
    job.filter = lease.entry ? lease.memory : buffers.memory[0];
    ptrdiff_t *offsets = (ptrdiff_t *)(void *)memory;
    job.offsets = offsets;
    atomic_int *states = (atomic_int *)(void *)(memory + plan->offset_floats);
    job.filter_states = states;
    job.bands = memory + plan->offset_floats + plan->state_floats;
    /* After the piece states, on the next cache line. */
    uintptr_t after = (uintptr_t)(void *)(states + plan->groups * plan->chunks);
    job.shares = (locus__share *)(void *)((after + 63) & ~(uintptr_t)63);
    size_t units = plan->groups * problem->batch * sh->out_h;
    for (int r = 0; r < problem->workers; r++) {
        size_t u0, u1;
        services->split(units, 1, r, problem->workers, &u0, &u1);
        locus__share_init(&job.shares[r], u0, u1);
    }
    for (size_t i = 0; i < plan->groups * plan->chunks; i++)
        atomic_init(&states[i],
                    lease.ready ? LOCUS__PIECE_DONE : LOCUS__PIECE_FREE);
    job.tap_major = lease.entry != NULL;
    /* Step p = (c, r, q) goes to tap_major(sh, p), written out: its
     * divisions, per step of a deep layer's thousands, are serial time
     * every call pays before the workers start (docs/PERFORMANCE.md). */
    for (size_t c = 0, p = 0; c < sh->channels; c++)
        for (size_t r = 0; r < sh->kernel_h; r++)
            for (size_t q = 0; q < sh->kernel_w; q++, p++)
                offsets[job.tap_major
                            ? (r * sh->channels + c) * sh->kernel_w + q
                            : p] =
                    (ptrdiff_t)(c * plan->plane + r * plan->wx + q);
    if (problem->op && problem->op->record)
        problem->op->record->workspace_bytes = plan->bytes;

    status = locus__cpu_run(s, problem->node, locus__conv_is_tiny(problem),
                            compute_worker, &job);
    locus__gemm_workspace_release(services, s->runtime, &buffers);
    locus__filter_cache_return(s->filter_cache, &lease,
                               status == LOCUS_SUCCESS);
    return status;
}
