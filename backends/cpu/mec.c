/* MEC, memory-efficient convolution (Cho and Brand, ICML 2017), for NCHW
 * input, KCRS filters and NKPQ output.
 *
 * The paper (NHWC) lowers each image once to L, OW x (IH * KW * C), row w
 * holding the KW-wide vertical strip of the image under output column w,
 * and computes output row oh as the GEMM of the filter with the window of
 * every L row that starts at oh * stride_h * KW * C: consecutive output
 * rows use overlapping windows of the same L, so the image is copied KW
 * times (not KH * KW times, as im2col does).
 *
 * Layout for NCHW. We lower to the transpose of the paper's L, per image a
 * matrix of (Hp * C * S) rows by Q columns, Hp = H + 2 pad_h:
 *
 *     L[h][c][s][q] = Xpad[c][h][q * stride_w + s]
 *
 * (Xpad: the image with its zero padding). Row (h, c, s) is input row h of
 * channel c shifted by s and subsampled by stride_w: for stride 1 a plain
 * copy of the row, which is why this layout suits NCHW. Output element
 * (k, p, q) is
 *
 *     sum over (c, r, s) of F[k][c][r][s] * L[p * stride_h + r][c][s][q].
 *
 * The filter as given. Read as a GEMM, the contraction index is
 * kk = (c, r, s), the filter's own KCRS order, so A is the filter itself
 * (K x CRS, lda = CRS) and B[kk][(p, q)] is L[p * stride_h + r][c][s][q].
 * With L's rows Q' floats apart (Q', below, is Q or a few images' Q) that
 * element lies at
 *
 *     (r * C * S + c * S + s) * Q'  +  p * stride_h * C * S * Q' + q,
 *
 * a term of the row kk plus a term of the column (p, q). The GEMM's packing
 * takes B in exactly that form, through two offset tables (gemm.h,
 * "indexed B"): B[kk][j] = L[rows[kk] + cols[j]]. So nothing is copied to
 * line the contraction up with the lowering: the paper's overlapping
 * windows need a constant stride between B's rows, which holds only in
 * (r, c, s) order and would force a permuted copy of the filter
 * (K * C * R * S floats, 2.25 MiB for 3x3 256 -> 256); the row table
 * lists L's rows in (c, r, s) order instead, at no cost, since the
 * packing walks B row by row anyway. The column table goes further: the
 * windows of all of a worker's output rows are one B, so one GEMM covers
 * them all (n = rows * Q) where a GEMM per output row had n = Q, below the
 * register tile's 16 or 32 columns for small layers (Q = 14), and packed
 * the filter again for every row. Where a micro-panel's columns are
 * consecutive in L (inside one output row) the packing copies runs as
 * for a stored B; a panel straddling two rows is gathered.
 *
 * Solutions A and B. Solution B is one image per GEMM: the worker's
 * output rows p0 .. p1-1 of filter k are contiguous in NCHW, so C is the
 * output itself at output + p0 * Q, ldc = P * Q, n = (p1 - p0) * Q, no
 * copy. Each GEMM packs the whole filter once, so when n is small (few
 * short rows per worker: 7x7 layers, or 14x14 over many workers) that
 * packing and the register tile's ragged last panel dominate; solution A
 * then puts `group` images side by side, L[h][c][s][i][q] with
 * Q' = group * Q, and one GEMM covers all of them, n = group * (p1 - p0)
 * * Q, columns in (image, p, q) order. Its result is not one matrix of the
 * output (the images are K * P * Q apart), so it goes to per-worker
 * scratch and is scattered, each image's rows of a filter in one copy;
 * the price is `group` lowered bands and that result in the workspace.
 *
 * Rule: solution B when the batch is 1 or a worker's rows of one image
 * give at least MEC_MIN_COLUMNS (64) columns; else A with the fewest
 * images that reach 64 (the whole batch when even that does not). Why 64:
 * at 28 and 56 columns per image A is clearly faster than B; at 98 the two
 * are within noise of each other, A for twice the workspace, so B, which
 * keeps MEC's memory below im2col's there (docs/PERFORMANCE.md).
 *
 * Shared lowering. Where solution A would need more workspace than im2col
 * (batch 8 of the 3x3 256->256 layer at 14x14 on 16 workers: each worker
 * has one output row, so A lowers 5 images' bands per worker, 140% of
 * im2col's), or where a worker's GEMM has fewer than MEC_MIN_COLUMNS
 * columns even so (batch 1 of that layer on 16 workers: 14 columns each,
 * every worker packing the whole 2.25 MiB filter for them, slower than
 * im2col: docs/PERFORMANCE.md), MEC splits the filters instead: the workers
 * form `round_images` teams of `filter_ways`, each team one image of the
 * round, each member a K / filter_ways share of the filters over all of the
 * image's P * Q columns. The team lowers its image once, into L shared by
 * its members, one padded input row at a time as pieces (pieces.h: claimed,
 * lowered, waited for; no barrier), and each member multiplies its filter
 * rows by the whole of L. A round is one job of the pool, so the next round
 * may lower into the same L. filter_ways is the largest divisor of the
 * worker count that leaves each member at least MEC_SHARED_FILTERS filters
 * (two or three register tiles, so the GEMM keeps its efficiency), and the
 * round's images are the rest.
 *
 * Column chunks. A GEMM's packed B block grows with its columns (KC x n
 * floats, up to 2 MiB in gemm_tile.c) and is per-worker workspace, so the
 * columns are cut into even chunks of at most MEC_MAX_COLUMNS (256), and
 * the filter, packed again per chunk, is packed once per 256 columns
 * rather than once per output row. Larger chunks run no faster on the
 * 56x56 layers and take more workspace (docs/PERFORMANCE.md).
 *
 * Compact blocks. The GEMM runs with gemm.h's compact cache blocks (48
 * rows of A by 128 deep, against im2col's 144 by 256): 97 KiB of scratch
 * per worker on the 3x3 256->256 layer at 14x14 instead of 290, which
 * brings MEC's workspace there well below im2col's, for a little more
 * time on that layer (still less than im2col's) and none on the others
 * (docs/PERFORMANCE.md).
 *
 * Parallelism, as im2col: the images (or groups) are done one after the
 * other and the workers split the P output rows of each. A worker lowers
 * only the band of L rows its output rows read, [p0 * stride_h,
 * (p1 - 1) * stride_h + R), into its own slab, so lowering and GEMM need no
 * barrier, and the slab is first touched by its worker and lives on its
 * node; the price is R - stride_h halo rows lowered by two workers. The
 * workers write disjoint output rows, and read the filter as given.
 *
 * Workspace, per worker that has an output row, in whole pages: the two
 * offset tables (C*R*S + columns entries), the slab, the solution-A
 * result of one chunk and the GEMM scratch of one chunk.
 * record->workspace_bytes is that total, the bytes actually allocated.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "mec.h"

#include "conv_gemm.h"
#include "pieces.h"

/* Columns of one image's GEMM below which solution A batches images. */
#define MEC_MIN_COLUMNS 64
/* Most columns of one GEMM call, and the unit chunks are rounded to:
 * every register tile's nr divides it, so only a GEMM's last micro-panel
 * is ragged. */
#define MEC_MAX_COLUMNS 256
#define MEC_COLUMN_UNIT 32
/* Floats from a worker part's start to its slab: the tables, rounded to a
 * cache line. */
#define MEC_LINE_FLOATS 16
/* Fewest filters a member of a shared-lowering team multiplies. */
#define MEC_SHARED_FILTERS 32
/* Most columns of one GEMM call in the shared mode: the packed B block
 * (depth block x columns) is most of a worker's scratch, and a call
 * repacks only its K / filter_ways filter rows, so short chunks cost
 * little (on the 3x3 256->256 layer at 14x14, 32 filter rows of 2304
 * taps per 64 columns). */
#define MEC_SHARED_COLUMNS 64

typedef struct mec_plan {
    size_t group;     /* images per GEMM: 1 is solution B */
    size_t band_rows; /* most padded input rows one worker lowers */
    size_t columns;   /* most GEMM columns per worker: group * rows * Q */
    size_t chunk;     /* most columns of one GEMM call */
    size_t tables;    /* floats holding a worker's offset tables */
    size_t slab;      /* floats of L per worker */
    size_t result;    /* floats of solution-A GEMM result per worker */
    size_t scratch;   /* floats of GEMM scratch per worker */
    size_t stride;    /* floats between two workers' parts: whole pages */
    /* The shared mode (filter_ways > 0; group is then 1, band_rows,
     * columns and slab unused): */
    size_t filter_ways;  /* workers per image */
    size_t round_images; /* images lowered at once, one per team */
    size_t lowered;      /* floats of one image's L, whole pages */
    size_t states;       /* floats holding the rounds' piece states */
    size_t bytes;        /* all of it */
} mec_plan;

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t round_up(size_t value, size_t unit)
{
    return (value + unit - 1) / unit * unit;
}

/* The columns of one GEMM call when n are cut into chunks of at most
 * MEC_MAX_COLUMNS: as even as whole units allow, so no chunk is a sliver. */
static size_t chunk_columns(size_t n)
{
    size_t chunks = (n + MEC_MAX_COLUMNS - 1) / MEC_MAX_COLUMNS;
    size_t even = round_up((n + chunks - 1) / chunks, MEC_COLUMN_UNIT);
    return min_size(n, even);
}

/* Solutions A and B. Returns 0 when a count overflows. Every product
 * below is checked, so the drivers may compute any of them unchecked
 * afterwards. */
static int make_row_plan(const locus__conv_problem *pr, mec_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    size_t page_floats = pr->state->page_size / sizeof(float);
    memset(plan, 0, sizeof *plan);

    size_t workers = (size_t)pr->workers;
    size_t rows = min_size(sh->out_h, (sh->out_h + workers - 1) / workers);
    plan->band_rows = (rows - 1) * sh->stride_h + sh->kernel_h;

    size_t cs, rcs, per_image, ld, table_bytes;
    if (!locus__cpu_mul_size(sh->channels, sh->kernel_w, &cs) ||
        !locus__cpu_mul_size(cs, sh->kernel_h, &rcs) ||
        !locus__cpu_mul_size(rows, sh->out_w, &per_image))
        return 0;
    plan->group = 1;
    if (per_image < MEC_MIN_COLUMNS && pr->batch > 1)
        plan->group =
            min_size(pr->batch, (MEC_MIN_COLUMNS + per_image - 1) / per_image);
    if (!locus__cpu_mul_size(plan->group, per_image, &plan->columns) ||
        !locus__cpu_mul_size(plan->group, sh->out_w, &ld) ||
        !locus__cpu_mul_size(plan->band_rows, cs, &plan->slab) ||
        !locus__cpu_mul_size(plan->slab, ld, &plan->slab) ||
        plan->columns > SIZE_MAX - rcs ||
        !locus__cpu_mul_size(rcs + plan->columns, sizeof(size_t), &table_bytes))
        return 0;
    plan->chunk = chunk_columns(plan->columns);
    plan->tables = round_up((table_bytes + sizeof(float) - 1) / sizeof(float),
                            MEC_LINE_FLOATS);
    if (plan->group > 1 &&
        !locus__cpu_mul_size(pr->out_channels, plan->chunk, &plan->result))
        return 0;
    plan->scratch = locus__cpu_conv_gemm_scratch_floats(
        LOCUS__CONV_GEMM_COMPACT, pr->out_channels, plan->chunk, rcs);
    /* Summed on top of one page, each step checked, so that rounding the
     * sum up to whole pages cannot wrap. */
    size_t part = page_floats;
    const size_t terms[] = {plan->tables, plan->slab, plan->result,
                            plan->scratch};
    for (size_t i = 0; i < sizeof terms / sizeof *terms; i++) {
        if (terms[i] > SIZE_MAX - part)
            return 0;
        part += terms[i];
    }
    plan->stride = round_up(part - page_floats, page_floats);
    /* Workers past the P-th get no output row (the split gives each of the
     * first P one), so no part. */
    size_t floats;
    if (!locus__cpu_mul_size(plan->stride, min_size(workers, sh->out_h),
                             &floats) ||
        !locus__cpu_mul_size(floats, sizeof(float), &plan->bytes))
        return 0;
    return 1;
}

/* The shared mode's plan for `ways` workers per image; 0 when a count
 * overflows. */
static int make_shared_plan(const locus__conv_problem *pr, size_t ways,
                            mec_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    size_t page_floats = pr->state->page_size / sizeof(float);
    memset(plan, 0, sizeof *plan);
    plan->group = 1;
    plan->filter_ways = ways;
    plan->round_images = min_size((size_t)pr->workers / ways, pr->batch);
    size_t hp = sh->height + 2 * sh->pad_h, cs, rcs, pq, table_bytes, states;
    if (!locus__cpu_mul_size(sh->channels, sh->kernel_w, &cs) ||
        !locus__cpu_mul_size(cs, sh->kernel_h, &rcs) ||
        !locus__cpu_mul_size(sh->out_h, sh->out_w, &pq) ||
        !locus__cpu_mul_size(hp, cs, &plan->lowered) ||
        !locus__cpu_mul_size(plan->lowered, sh->out_w, &plan->lowered) ||
        plan->lowered > SIZE_MAX / 2 - page_floats || pq > SIZE_MAX - rcs ||
        !locus__cpu_mul_size(rcs + pq, sizeof(size_t), &table_bytes) ||
        !locus__cpu_mul_size(plan->round_images, hp, &states) ||
        states > SIZE_MAX / 2 / sizeof(atomic_int))
        return 0;
    plan->lowered = round_up(plan->lowered, page_floats);
    plan->states = round_up((states * sizeof(atomic_int) + sizeof(float) - 1) /
                                sizeof(float),
                            page_floats);
    plan->chunk = min_size(pq, MEC_SHARED_COLUMNS);
    plan->tables = round_up((table_bytes + sizeof(float) - 1) / sizeof(float),
                            MEC_LINE_FLOATS);
    size_t filters = (pr->out_channels + ways - 1) / ways;
    plan->scratch = locus__cpu_conv_gemm_scratch_floats(
        LOCUS__CONV_GEMM_COMPACT, filters, plan->chunk, rcs);
    if (plan->scratch > SIZE_MAX / 4 - plan->tables)
        return 0;
    plan->stride = round_up(plan->tables + plan->scratch, page_floats);
    size_t floats, parts;
    if (!locus__cpu_mul_size(plan->lowered, plan->round_images, &floats) ||
        !locus__cpu_mul_size(plan->stride, (size_t)pr->workers, &parts) ||
        floats > SIZE_MAX / 4 - parts - plan->states ||
        !locus__cpu_mul_size(floats + parts + plan->states, sizeof(float),
                             &plan->bytes))
        return 0;
    return 1;
}

/* Solution A or B, or the shared mode where A would need more than
 * im2col's workspace and the filters can be split (see the top). */
static int make_plan(const locus__conv_problem *pr, mec_plan *plan)
{
    if (!make_row_plan(pr, plan))
        return 0;
    size_t im2col;
    if (!locus__cpu_im2col_workspace(pr, &im2col))
        return 1;
    /* Shared where A's bands would exceed im2col's workspace, or where a
     * worker's GEMM stays narrow even so (too few images to group). */
    int over = plan->group > 1 && plan->bytes > im2col;
    int narrow = plan->columns < MEC_MIN_COLUMNS;
    if (!over && !narrow)
        return 1;
    size_t ways = 0;
    for (size_t d = 2; d <= (size_t)pr->workers; d++)
        if ((size_t)pr->workers % d == 0 &&
            pr->out_channels / d >= MEC_SHARED_FILTERS)
            ways = d;
    mec_plan shared;
    if (ways && make_shared_plan(pr, ways, &shared) &&
        (over ? shared.bytes < plan->bytes
              : shared.bytes <= plan->bytes || shared.bytes <= im2col))
        *plan = shared;
    return 1;
}

size_t locus__cpu_mec_filter_ways(const locus__conv_problem *problem)
{
    mec_plan plan;
    return make_plan(problem, &plan) ? plan.filter_ways : 0;
}

int locus__cpu_mec_workspace(const locus__conv_problem *problem, size_t *bytes)
{
    mec_plan plan;
    if (!make_plan(problem, &plan))
        return 0;
    *bytes = plan.bytes;
    return 1;
}

size_t locus__cpu_mec_group(const locus__conv_problem *problem)
{
    mec_plan plan;
    return make_plan(problem, &plan) ? plan.group : 0;
}

typedef struct mec_job {
    const locus__conv_problem *problem;
    const locus_services *services;
    mec_plan plan;
    float *parts; /* the workers' parts, plan.stride floats apart */
    /* The shared mode: */
    float *lowered;     /* round_images of L, plan.lowered floats apart */
    atomic_int *states; /* per image of the round, a state per padded row */
    size_t first_image; /* the round's */
} mec_job;

/* The output columns q whose tap s falls inside the image: [lo, hi). */
static void inside_columns(const locus__conv_shape *sh, size_t s, size_t *lo,
                           size_t *hi)
{
    /* Padded x = q * stride_w + s is inside when pad_w <= x < pad_w + W. */
    size_t first =
        s >= sh->pad_w ? 0 : (sh->pad_w - s + sh->stride_w - 1) / sh->stride_w;
    size_t end =
        sh->pad_w + sh->width > s
            ? (sh->pad_w + sh->width - s + sh->stride_w - 1) / sh->stride_w
            : 0;
    *hi = min_size(end, sh->out_w);
    *lo = min_size(first, *hi);
}

/* Lowers padded rows [h0, h1) of `images` images (image_size floats apart)
 * into slab: row (h - h0, c, s), ld floats long, holds for each image i
 * the Q values L[h][c][s][q] at column i * Q + q. */
static void lower_band(const locus__conv_shape *sh, const float *first,
                       size_t image_size, size_t images, size_t h0, size_t h1,
                       float *slab, size_t ld)
{
    size_t plane = sh->height * sh->width, q_count = sh->out_w;
    float *line = slab;
    for (size_t h = h0; h < h1; h++) {
        int inside = h >= sh->pad_h && h - sh->pad_h < sh->height;
        for (size_t c = 0; c < sh->channels; c++) {
            for (size_t s = 0; s < sh->kernel_w; s++, line += ld) {
                size_t lo, hi;
                inside_columns(sh, s, &lo, &hi);
                float *dst = line;
                for (size_t i = 0; i < images; i++, dst += q_count) {
                    if (!inside) {
                        memset(dst, 0, q_count * sizeof(float));
                        continue;
                    }
                    /* Column q reads x = q * stride_w + s - pad_w, inside
                     * the row for q in [lo, hi). The pointer is formed from
                     * the first of those only: with a wide padding, the
                     * row's start minus pad_w lies outside any object. */
                    const float *row = first + i * image_size + c * plane +
                                       (h - sh->pad_h) * sh->width;
                    memset(dst, 0, lo * sizeof(float));
                    if (lo < hi) {
                        const float *x =
                            row + (lo * sh->stride_w + s - sh->pad_w);
                        if (sh->stride_w == 1)
                            memcpy(dst + lo, x, (hi - lo) * sizeof(float));
                        else
                            for (size_t q = lo; q < hi; q++)
                                dst[q] = x[(q - lo) * sh->stride_w];
                    }
                    memset(dst + hi, 0, (q_count - hi) * sizeof(float));
                }
            }
        }
    }
}

/* The input rows a band of padded rows [h0, h1) reads: one record per
 * image for its rows of every channel (services->account_read_rows; the
 * whole image when the band is every row). */
static void account_band(const mec_job *job, const float *first,
                         size_t image_size, size_t images, size_t h0, size_t h1)
{
    const locus__conv_shape *sh = &job->problem->shape;
    size_t y0 = h0 > sh->pad_h ? h0 - sh->pad_h : 0;
    size_t y1 = h1 > sh->pad_h ? min_size(h1 - sh->pad_h, sh->height) : 0;
    if (y0 >= y1)
        return;
    size_t plane = sh->height * sh->width;
    for (size_t i = 0; i < images; i++) {
        const float *image = first + i * image_size;
        job->services->account_read_rows(job->problem->op,
                                         image + y0 * sh->width,
                                         (y1 - y0) * sh->width * sizeof(float),
                                         plane * sizeof(float), sh->channels);
    }
}

/* The offset tables of a worker's B (see the top comment), L's rows ld
 * floats apart: rows[(c, r, s)] in the filter's KCRS order, and
 * cols[(i, p - p0, q)] for `group` images of output rows [p0, p1). */
static void fill_tables(const locus__conv_shape *sh, size_t ld, size_t group,
                        size_t out_rows, size_t *rows, size_t *cols)
{
    size_t cs = sh->channels * sh->kernel_w;
    for (size_t c = 0; c < sh->channels; c++)
        for (size_t r = 0; r < sh->kernel_h; r++)
            for (size_t s = 0; s < sh->kernel_w; s++)
                *rows++ = (r * cs + c * sh->kernel_w + s) * ld;
    for (size_t i = 0; i < group; i++)
        for (size_t p = 0; p < out_rows; p++)
            for (size_t q = 0; q < sh->out_w; q++)
                *cols++ = i * sh->out_w + p * sh->stride_h * cs * ld + q;
}

/* Solution A: columns [j0, j1) of the GEMM, in (image, p, q) order with
 * `width` columns per image, from result (ldr floats a row) to the
 * output rows p0 onward of images n0 onward. */
static void scatter(const locus__conv_problem *pr, const float *result,
                    size_t ldr, size_t j0, size_t j1, size_t width, size_t n0,
                    size_t p0)
{
    size_t k_count = pr->out_channels;
    size_t pq = pr->shape.out_h * pr->shape.out_w;
    for (size_t k = 0; k < k_count; k++) {
        for (size_t j = j0; j < j1;) {
            size_t i = j / width, end = min_size(j1, (i + 1) * width);
            memcpy(pr->output + ((n0 + i) * k_count + k) * pq +
                       p0 * pr->shape.out_w + (j - i * width),
                   result + k * ldr + (j - j0), (end - j) * sizeof(float));
            j = end;
        }
    }
}

static void mec_worker(void *arg, int rank, int ranks)
{
    const mec_job *job = arg;
    const mec_plan *plan = &job->plan;
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    assert(rank >= 0 && rank < pr->workers);

    size_t p0, p1;
    job->services->split(sh->out_h, 1, rank, ranks, &p0, &p1);
    if (p0 >= p1)
        return;
    assert((size_t)rank < sh->out_h);
    float *part = job->parts + (size_t)rank * plan->stride;
    size_t *rows = (size_t *)(void *)part;
    float *slab = part + plan->tables;
    float *result = slab + plan->slab;
    float *scratch = result + plan->result;

    size_t k_count = pr->out_channels, q_count = sh->out_w;
    size_t pq = sh->out_h * q_count;
    size_t rcs = sh->kernel_h * sh->channels * sh->kernel_w;
    size_t *cols = rows + rcs;
    size_t image_size = sh->channels * sh->height * sh->width;
    size_t h0 = p0 * sh->stride_h, h1 = (p1 - 1) * sh->stride_h + sh->kernel_h;
    size_t ld = plan->group * q_count, width = (p1 - p0) * q_count;
    assert(h1 - h0 <= plan->band_rows);
    assert(plan->group * width <= plan->columns);

    fill_tables(sh, ld, plan->group, p1 - p0, rows, cols);
    job->services->account_read(pr->op, pr->filter,
                                k_count * rcs * sizeof(float));
    for (size_t n0 = 0; n0 < pr->batch; n0 += plan->group) {
        size_t images = min_size(plan->group, pr->batch - n0);
        size_t n = images * width;
        const float *first = pr->input + n0 * image_size;
        account_band(job, first, image_size, images, h0, h1);
        lower_band(sh, first, image_size, images, h0, h1, slab, ld);
        for (size_t j0 = 0; j0 < n; j0 += plan->chunk) {
            size_t j1 = min_size(n, j0 + plan->chunk);
            if (plan->group == 1) {
                /* Solution B: straight into the NCHW output rows. */
                locus__cpu_conv_gemm_indexed(
                    &pr->state->isa, LOCUS__CONV_GEMM_COMPACT, k_count, j1 - j0,
                    rcs, pr->filter, rcs, slab, rows, cols + j0,
                    pr->output + n0 * k_count * pq + p0 * q_count + j0, pq,
                    scratch);
                continue;
            }
            /* Solution A: every image's rows at once, then to NCHW. */
            locus__cpu_conv_gemm_indexed(
                &pr->state->isa, LOCUS__CONV_GEMM_COMPACT, k_count, j1 - j0,
                rcs, pr->filter, rcs, slab, rows, cols + j0, result, j1 - j0,
                scratch);
            scatter(pr, result, j1 - j0, j0, j1, width, n0, p0);
        }
    }
}

/* One padded input row of a team's image, lowered into its shared L. */
typedef struct shared_image {
    const mec_job *job;
    const float *image;
    float *lowered;
} shared_image;

static void lower_row(const void *context, size_t h)
{
    const shared_image *si = context;
    const locus__conv_shape *sh = &si->job->problem->shape;
    size_t image_size = sh->channels * sh->height * sh->width;
    account_band(si->job, si->image, image_size, 1, h, h + 1);
    lower_band(sh, si->image, image_size, 1, h, h + 1,
               si->lowered + h * sh->channels * sh->kernel_w * sh->out_w,
               sh->out_w);
}

/* The shared mode's worker: member `way` of team `team` (see the top). */
static void shared_worker(void *arg, int rank, int ranks)
{
    (void)ranks;
    const mec_job *job = arg;
    const mec_plan *plan = &job->plan;
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    size_t team = (size_t)rank / plan->filter_ways,
           way = (size_t)rank % plan->filter_ways;
    size_t n = job->first_image + team;
    if (team >= plan->round_images || n >= pr->batch)
        return;
    size_t hp = sh->height + 2 * sh->pad_h, q_count = sh->out_w;
    size_t cs = sh->channels * sh->kernel_w, rcs = sh->kernel_h * cs;
    size_t image_size = sh->channels * sh->height * sh->width;
    size_t pq = sh->out_h * q_count, k_count = pr->out_channels;
    const float *image = pr->input + n * image_size;
    float *lowered = job->lowered + team * plan->lowered;
    atomic_int *states = job->states + team * hp;

    /* The image's L, padded row by padded row, a share apart. */
    shared_image si = {job, image, lowered};
    locus__pieces_prepare(states, 0, hp, way * hp / plan->filter_ways,
                          lower_row, &si);

    size_t k0, k1;
    job->services->split(k_count, 1, (int)way, (int)plan->filter_ways, &k0,
                         &k1);
    if (k0 >= k1)
        return;
    float *part = job->parts + (size_t)rank * plan->stride;
    size_t *rows = (size_t *)(void *)part, *cols = rows + rcs;
    float *scratch = part + plan->tables;
    fill_tables(sh, q_count, 1, sh->out_h, rows, cols);
    job->services->account_read(pr->op, pr->filter + k0 * rcs,
                                (k1 - k0) * rcs * sizeof(float));
    for (size_t j0 = 0; j0 < pq; j0 += plan->chunk) {
        size_t j1 = min_size(pq, j0 + plan->chunk);
        locus__cpu_conv_gemm_indexed(
            &pr->state->isa, LOCUS__CONV_GEMM_COMPACT, k1 - k0, j1 - j0, rcs,
            pr->filter + k0 * rcs, rcs, lowered, rows, cols + j0,
            pr->output + (n * k_count + k0) * pq + j0, pq, scratch);
    }
}

/* The shared mode: one job per round of images. */
static locus_status run_shared(mec_job *job, float *workspace)
{
    const locus__conv_problem *pr = job->problem;
    const mec_plan *plan = &job->plan;
    size_t hp = pr->shape.height + 2 * pr->shape.pad_h;
    job->lowered = workspace;
    job->states =
        (atomic_int *)(void *)(workspace + plan->lowered * plan->round_images);
    job->parts = workspace + plan->lowered * plan->round_images + plan->states;
    locus_status status = LOCUS_SUCCESS;
    for (size_t n0 = 0; n0 < pr->batch && status == LOCUS_SUCCESS;
         n0 += plan->round_images) {
        for (size_t i = 0; i < plan->round_images * hp; i++)
            atomic_init(&job->states[i], LOCUS__PIECE_FREE);
        job->first_image = n0;
        status = locus__cpu_run(pr->state, pr->node, locus__conv_is_tiny(pr),
                                shared_worker, job);
    }
    return status;
}

locus_status locus__cpu_conv2d_mec(const locus__conv_problem *problem)
{
    const locus__cpu_state *s = problem->state;
    const locus_services *services = s->services;
    mec_job job = {.problem = problem, .services = services};
    if (!make_plan(problem, &job.plan))
        return services->fail(LOCUS_ERROR_SIZE_OVERFLOW,
                              "conv2d mec workspace for %zu channels of "
                              "%zux%zu overflows",
                              problem->shape.channels, problem->shape.height,
                              problem->shape.width);

    /* Bound to the device's node (none for device 0), as im2col's. */
    float *workspace =
        services->host_alloc(s->runtime, job.plan.bytes, problem->node);
    if (!workspace)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                              "cannot allocate %zu bytes of conv2d mec "
                              "workspace",
                              job.plan.bytes);
    if (problem->op && problem->op->record)
        problem->op->record->workspace_bytes = job.plan.bytes;

    locus_status status;
    if (job.plan.filter_ways) {
        status = run_shared(&job, workspace);
    } else {
        job.parts = workspace;
        status = locus__cpu_run(s, problem->node, locus__conv_is_tiny(problem),
                                mec_worker, &job);
    }

    services->host_free(s->runtime, workspace, job.plan.bytes);
    return status;
}
