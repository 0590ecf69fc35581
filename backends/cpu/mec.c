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
 *     sum over (r, c, s) of F[k][c][r][s] * L[p * stride_h + r][c][s][q],
 *
 * and for a fixed p the rows (p * stride_h + r, c, s), r < R, are R*C*S
 * consecutive rows of L. So output row p, a K x Q matrix at output + p * Q
 * with leading dimension P * Q (NCHW needs no transpose), is
 *
 *     out_p (K x Q) = F' (K x RCS) * L[p * stride_h * C * S ...] (RCS x Q)
 *
 * with the B operand an (R*C*S) x Q window of L starting at row
 * p * stride_h * C * S, leading dimension Q: the paper's overlapping views,
 * turned by 90 degrees. The contraction runs in (r, c, s) order, so the
 * filter is permuted once per call to F'[k][r][c][s] (K*C*R*S floats, in
 * the workspace and counted); with R == 1 or C == 1 that is the KCRS order
 * already and the filter is used as given. No layout avoids the copy: the
 * windows can only overlap along the outermost contraction index, and KCRS
 * has c there.
 *
 * Solutions A and B. Solution B is one GEMM per (image, output row): the
 * above, n = Q. When Q is small those GEMMs are too narrow to run at speed
 * (the packed filter is reused over few columns), so solution A batches
 * `group` images per GEMM: L gets the images side by side,
 * L[h][c][s][i][q], leading dimension group * Q, and the GEMM of output row
 * p covers all of them, n = group * Q. Its result (K x group*Q) is in
 * per-worker scratch and scattered to NCHW, K * group * Q floats per row:
 * one copy of the output, counted in the workspace. Rule: solution B when
 * Q >= MEC_MIN_COLUMNS or batch 1, else A with the fewest images that
 * reach MEC_MIN_COLUMNS columns.
 *
 * Parallelism, as im2col: the images (or groups) are done one after the
 * other and the workers split the P output rows of each. A worker lowers
 * only the band of L rows its output rows read, [p0 * stride_h,
 * (p1 - 1) * stride_h + R), into its own slab, so lowering and GEMM need no
 * barrier, and the slab is first touched by its worker and lives on its
 * node; the price is R - stride_h halo rows lowered by two workers. The
 * workers write disjoint output rows. The filter permutation is a first
 * pool job (split over K), since every worker reads all of F'.
 *
 * Workspace: F' (when permuted) + per worker the slab, the solution-A
 * result rows and the GEMM scratch, each worker's part in whole pages;
 * record->workspace_bytes is that total, the bytes actually allocated.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "mec.h"

#include "conv_gemm.h"

/* Output columns below which solution A batches images into one GEMM. */
#define MEC_MIN_COLUMNS 32

typedef struct mec_plan {
    size_t group;     /* images per GEMM: 1 is solution B */
    size_t band_rows; /* most padded input rows one worker lowers */
    size_t slab;      /* floats of L per worker */
    size_t result;    /* floats of solution-A GEMM result per worker */
    size_t scratch;   /* floats of GEMM scratch per worker */
    size_t stride;    /* floats between two workers' parts: whole pages */
    size_t filter;    /* floats of F', whole pages; 0: used as given */
    size_t bytes;     /* all of it */
} mec_plan;

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t round_up(size_t value, size_t unit)
{
    return (value + unit - 1) / unit * unit;
}

static int needs_permuted_filter(const locus__conv_shape *sh)
{
    return sh->kernel_h > 1 && sh->channels > 1;
}

/* Returns 0 when a count overflows. Every product below is checked, so the
 * drivers may compute any of them unchecked afterwards. */
static int make_plan(const locus__conv_problem *pr, mec_plan *plan)
{
    const locus__conv_shape *sh = &pr->shape;
    size_t page_floats = pr->state->page_size / sizeof(float);
    memset(plan, 0, sizeof *plan);

    plan->group = 1;
    if (sh->out_w < MEC_MIN_COLUMNS && pr->batch > 1)
        plan->group =
            min_size(pr->batch, (MEC_MIN_COLUMNS + sh->out_w - 1) / sh->out_w);
    size_t workers = (size_t)pr->workers;
    size_t rows = min_size(sh->out_h, (sh->out_h + workers - 1) / workers);
    plan->band_rows = (rows - 1) * sh->stride_h + sh->kernel_h;

    size_t cs, rcs, columns, filter;
    int fits = locus__cpu_mul_size(sh->channels, sh->kernel_w, &cs) &&
               locus__cpu_mul_size(cs, sh->kernel_h, &rcs) &&
               locus__cpu_mul_size(plan->group, sh->out_w, &columns) &&
               locus__cpu_mul_size(plan->band_rows, cs, &plan->slab) &&
               locus__cpu_mul_size(plan->slab, columns, &plan->slab) &&
               locus__cpu_mul_size(rcs, pr->out_channels, &filter);
    if (!fits)
        return 0;
    if (plan->group > 1 &&
        !locus__cpu_mul_size(pr->out_channels, columns, &plan->result))
        return 0;
    plan->scratch =
        locus__cpu_conv_gemm_scratch_floats(pr->out_channels, columns, rcs);
    size_t part = plan->slab;
    if (part > SIZE_MAX - plan->result - plan->scratch - page_floats)
        return 0;
    plan->stride = round_up(part + plan->result + plan->scratch, page_floats);
    if (needs_permuted_filter(sh)) {
        if (filter > SIZE_MAX - page_floats)
            return 0;
        plan->filter = round_up(filter, page_floats);
    }
    size_t floats;
    if (!locus__cpu_mul_size(plan->stride, workers, &floats) ||
        floats > SIZE_MAX - plan->filter ||
        !locus__cpu_mul_size(floats + plan->filter, sizeof(float),
                             &plan->bytes))
        return 0;
    return 1;
}

int locus__cpu_mec_workspace(const locus__conv_problem *problem, size_t *bytes)
{
    mec_plan plan;
    if (!make_plan(problem, &plan))
        return 0;
    *bytes = plan.bytes;
    return 1;
}

typedef struct mec_job {
    const locus__conv_problem *problem;
    const locus_services *services;
    mec_plan plan;
    const float *filter; /* F' or the filter as given */
    float *permuted;     /* F' being written by the first job */
    float *parts;        /* the workers' parts, plan.stride floats apart */
} mec_job;

/* F'[k][r][c][s] = F[k][c][r][s] for the worker's filters. */
static void permute_worker(void *arg, int rank, int ranks)
{
    const mec_job *job = arg;
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    size_t k0, k1;
    job->services->split(pr->out_channels, 1, rank, ranks, &k0, &k1);
    if (k0 >= k1)
        return;
    size_t r_count = sh->kernel_h, c_count = sh->channels, s = sh->kernel_w;
    size_t crs = c_count * r_count * s;
    job->services->account_read(pr->op, pr->filter + k0 * crs,
                                (k1 - k0) * crs * sizeof(float));
    for (size_t k = k0; k < k1; k++) {
        const float *src = pr->filter + k * crs;
        float *dst = job->permuted + k * crs;
        for (size_t r = 0; r < r_count; r++)
            for (size_t c = 0; c < c_count; c++, dst += s)
                memcpy(dst, src + (c * r_count + r) * s, s * sizeof(float));
    }
}

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
 * into slab: row (h - h0, c, s) holds, for each image i, the Q values
 * L[h][c][s][q] at column i * Q + q; leading dimension images * Q. */
static void lower_band(const locus__conv_shape *sh, const float *first,
                       size_t image_size, size_t images, size_t h0, size_t h1,
                       float *slab)
{
    size_t plane = sh->height * sh->width, q_count = sh->out_w;
    float *dst = slab;
    for (size_t h = h0; h < h1; h++) {
        int inside = h >= sh->pad_h && h - sh->pad_h < sh->height;
        for (size_t c = 0; c < sh->channels; c++) {
            for (size_t s = 0; s < sh->kernel_w; s++) {
                size_t lo, hi;
                inside_columns(sh, s, &lo, &hi);
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

/* The input rows a band of padded rows [h0, h1) reads, per image: one
 * range per channel, or one for the image when the band is every row. */
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
        if (y0 == 0 && y1 == sh->height) {
            job->services->account_read(job->problem->op, image,
                                        image_size * sizeof(float));
            continue;
        }
        for (size_t c = 0; c < sh->channels; c++)
            job->services->account_read(job->problem->op,
                                        image + c * plane + y0 * sh->width,
                                        (y1 - y0) * sh->width * sizeof(float));
    }
}

static void mec_worker(void *arg, int rank, int ranks)
{
    const mec_job *job = arg;
    const locus__conv_problem *pr = job->problem;
    const locus__conv_shape *sh = &pr->shape;
    assert(rank >= 0 && rank < pr->workers);

    size_t p0, p1;
    job->services->split(sh->out_h, 1, rank, ranks, &p0, &p1);
    if (p0 >= p1)
        return;
    float *slab = job->parts + (size_t)rank * job->plan.stride;
    float *result = slab + job->plan.slab;
    float *scratch = result + job->plan.result;

    size_t k_count = pr->out_channels, q_count = sh->out_w;
    size_t pq = sh->out_h * q_count;
    size_t cs = sh->channels * sh->kernel_w, rcs = sh->kernel_h * cs;
    size_t image_size = sh->channels * sh->height * sh->width;
    size_t h0 = p0 * sh->stride_h, h1 = (p1 - 1) * sh->stride_h + sh->kernel_h;
    assert(h1 - h0 <= job->plan.band_rows);

    if (!job->permuted)
        job->services->account_read(pr->op, pr->filter,
                                    k_count * rcs * sizeof(float));
    for (size_t n0 = 0; n0 < pr->batch; n0 += job->plan.group) {
        size_t images = min_size(job->plan.group, pr->batch - n0);
        size_t ld = images * q_count;
        const float *first = pr->input + n0 * image_size;
        account_band(job, first, image_size, images, h0, h1);
        lower_band(sh, first, image_size, images, h0, h1, slab);
        for (size_t p = p0; p < p1; p++) {
            const float *window = slab + (p * sh->stride_h - h0) * cs * ld;
            if (images == 1) {
                /* Solution B: straight into the NCHW output row. */
                locus__cpu_conv_gemm(
                    &pr->state->isa, k_count, q_count, rcs, job->filter, rcs,
                    window, ld, pr->output + n0 * k_count * pq + p * q_count,
                    pq, scratch);
                continue;
            }
            /* Solution A: every image's row p at once, then to NCHW. */
            locus__cpu_conv_gemm(&pr->state->isa, k_count, ld, rcs, job->filter,
                                 rcs, window, ld, result, ld, scratch);
            for (size_t k = 0; k < k_count; k++)
                for (size_t i = 0; i < images; i++)
                    memcpy(pr->output + ((n0 + i) * k_count + k) * pq +
                               p * q_count,
                           result + k * ld + i * q_count,
                           q_count * sizeof(float));
        }
    }
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

    locus_status status = LOCUS_SUCCESS;
    job.filter = problem->filter;
    job.parts = workspace + job.plan.filter;
    if (job.plan.filter > 0) {
        job.permuted = workspace;
        status = locus__cpu_run(s, problem->node, locus__conv_is_tiny(problem),
                                permute_worker, &job);
        job.filter = job.permuted;
    }
    if (status == LOCUS_SUCCESS)
        status = locus__cpu_run(s, problem->node, locus__conv_is_tiny(problem),
                                mec_worker, &job);

    services->host_free(s->runtime, workspace, job.plan.bytes);
    return status;
}
