/* f32 matrix product: portable C, blocked for the caches.
 *
 * Per block of C, op(B) is packed in KC x NC panels and alpha op(A) in
 * MC x KC panels, both contiguous whatever the transposes, so the inner
 * loop is always a unit-stride update of a row of C by rows of the B panel
 * (i-k-j order) that the compiler vectorizes. The microkernels of the speed
 * issue replace the inner loops; the packing and blocking stay.
 *
 * Each worker owns a block of rows of C (or, when C has fewer rows than
 * workers, a block of columns), so no two workers write the same element
 * and the result does not depend on scheduling.
 */
#include <assert.h>
#include <string.h>

#include "cpu_internal.h"
#include "gemm.h"

/* Panel sizes: an A panel (32 KiB) and a row of the B panel stay in L1/L2
 * while the B panel (256 KiB) streams from L2. */
#define MC 64
#define KC 128
#define NC 512
/* Columns per worker block come in multiples of a cache line of floats,
 * so two workers never write the same line of C. */
#define COLUMN_ALIGN 16

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Panels are cut to the problem, so a small product asks for little. */
static size_t a_panel_floats(size_t rows, size_t k)
{
    return min_size(MC, rows) * min_size(KC, k);
}

size_t locus__cpu_sgemm_scratch_floats(size_t rows, size_t cols, size_t k)
{
    return a_panel_floats(rows, k) + min_size(KC, k) * min_size(NC, cols);
}

static void scale_c(const locus__sgemm *g, size_t i0, size_t i1, size_t j0,
                    size_t j1)
{
    if (g->beta == 1.0f)
        return;
    for (size_t i = i0; i < i1; i++) {
        float *c = g->c + i * g->ldc;
        if (g->beta == 0.0f) {
            /* Stored, not multiplied: NaN or Inf in C must not survive. */
            for (size_t j = j0; j < j1; j++)
                c[j] = 0.0f;
        } else {
            for (size_t j = j0; j < j1; j++)
                c[j] *= g->beta;
        }
    }
}

/* ap[i * kc + p] = alpha op(A)[i0 + i][p0 + p] */
static void pack_a(const locus__sgemm *g, size_t i0, size_t mc, size_t p0,
                   size_t kc, float *ap)
{
    if (g->trans_a == LOCUS_NO_TRANS) {
        for (size_t i = 0; i < mc; i++) {
            const float *row = g->a + (i0 + i) * g->lda + p0;
            for (size_t p = 0; p < kc; p++)
                ap[i * kc + p] = g->alpha * row[p];
        }
    } else {
        /* Walk A as stored, row by row, so the reads are unit stride. */
        for (size_t p = 0; p < kc; p++) {
            const float *row = g->a + (p0 + p) * g->lda + i0;
            for (size_t i = 0; i < mc; i++)
                ap[i * kc + p] = g->alpha * row[i];
        }
    }
}

/* bp[p * nc + j] = op(B)[p0 + p][j0 + j] */
static void pack_b(const locus__sgemm *g, size_t p0, size_t kc, size_t j0,
                   size_t nc, float *bp)
{
    if (g->trans_b == LOCUS_NO_TRANS) {
        for (size_t p = 0; p < kc; p++)
            memcpy(bp + p * nc, g->b + (p0 + p) * g->ldb + j0,
                   nc * sizeof(float));
    } else {
        for (size_t j = 0; j < nc; j++) {
            const float *row = g->b + (j0 + j) * g->ldb + p0;
            for (size_t p = 0; p < kc; p++)
                bp[p * nc + j] = row[p];
        }
    }
}

static void axpy(size_t n, float a, const float *restrict x, float *restrict y)
{
    for (size_t j = 0; j < n; j++)
        y[j] += a * x[j];
}

/* Four axpys in one pass over y: a row of C is loaded and stored once per
 * four rows of B instead of once per row, which is what bounds the loop. */
static void axpy4(size_t n, const float *a, const float *restrict x, size_t ldx,
                  float *restrict y)
{
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    for (size_t j = 0; j < n; j++)
        y[j] += a[0] * x0[j] + a[1] * x1[j] + a[2] * x2[j] + a[3] * x3[j];
}

void locus__cpu_sgemm_tile(const locus__sgemm *g, size_t row_begin,
                           size_t row_end, size_t col_begin, size_t col_end,
                           float *scratch)
{
    assert(row_end <= g->m && col_end <= g->n);
    if (row_begin >= row_end || col_begin >= col_end)
        return;
    scale_c(g, row_begin, row_end, col_begin, col_end);
    if (g->alpha == 0.0f || g->k == 0)
        return;

    float *ap = scratch;
    float *bp = scratch + a_panel_floats(row_end - row_begin, g->k);
    for (size_t jc = col_begin; jc < col_end; jc += NC) {
        size_t nc = min_size(NC, col_end - jc);
        for (size_t pc = 0; pc < g->k; pc += KC) {
            size_t kc = min_size(KC, g->k - pc);
            pack_b(g, pc, kc, jc, nc, bp);
            for (size_t ic = row_begin; ic < row_end; ic += MC) {
                size_t mc = min_size(MC, row_end - ic);
                pack_a(g, ic, mc, pc, kc, ap);
                for (size_t i = 0; i < mc; i++) {
                    float *c = g->c + (ic + i) * g->ldc + jc;
                    const float *a = ap + i * kc;
                    size_t p = 0;
                    for (; p + 4 <= kc; p += 4)
                        axpy4(nc, a + p, bp + p * nc, nc, c);
                    for (; p < kc; p++)
                        axpy(nc, a[p], bp + p * nc, c);
                }
            }
        }
    }
}

typedef struct gemm_job {
    const locus_services *services;
    locus_op_context *op;
    const locus__sgemm *g;
    int by_rows;
    float *scratch;
    size_t scratch_stride; /* floats between two workers' scratch */
    int capacity;
} gemm_job;

/* Accounts the stored rows [r0, r1) x columns [c0, c1) of a matrix as one
 * range: the span, gaps between rows included. Cheap, and exact whenever
 * the block is whole rows of a tight matrix, the common case. */
static void account_block(const gemm_job *job, const float *base, size_t ld,
                          size_t r0, size_t r1, size_t c0, size_t c1)
{
    if (r0 >= r1 || c0 >= c1)
        return;
    size_t floats = (r1 - r0 - 1) * ld + (c1 - c0);
    job->services->account_read(job->op, base + r0 * ld + c0,
                                floats * sizeof(float));
}

static void account_gemm(const gemm_job *job, size_t i0, size_t i1, size_t j0,
                         size_t j1)
{
    const locus__sgemm *g = job->g;
    if (g->alpha != 0.0f && g->k != 0) {
        if (g->trans_a == LOCUS_NO_TRANS)
            account_block(job, g->a, g->lda, i0, i1, 0, g->k);
        else
            account_block(job, g->a, g->lda, 0, g->k, i0, i1);
        if (g->trans_b == LOCUS_NO_TRANS)
            account_block(job, g->b, g->ldb, 0, g->k, j0, j1);
        else
            account_block(job, g->b, g->ldb, j0, j1, 0, g->k);
    }
    if (g->beta != 0.0f)
        account_block(job, g->c, g->ldc, i0, i1, j0, j1);
}

static void gemm_worker(void *arg, int rank, int ranks)
{
    const gemm_job *job = arg;
    const locus__sgemm *g = job->g;
    assert(rank >= 0 && rank < job->capacity);
    size_t i0 = 0, i1 = g->m, j0 = 0, j1 = g->n;
    if (job->by_rows)
        job->services->split(g->m, 1, rank, ranks, &i0, &i1);
    else
        job->services->split(g->n, COLUMN_ALIGN, rank, ranks, &j0, &j1);
    if (i0 >= i1 || j0 >= j1)
        return;
    account_gemm(job, i0, i1, j0, j1);
    float *scratch =
        job->scratch ? job->scratch + (size_t)rank * job->scratch_stride : NULL;
    locus__cpu_sgemm_tile(g, i0, i1, j0, j1, scratch);
}

locus_status locus__cpu_gemm(void *state, size_t device,
                             const locus_gemm_desc *desc, const void *a,
                             const void *b, void *c, locus_op_context *op)
{
    const locus__cpu_state *s = state;
    const locus_services *services = s->services;

    /* LOCUS_MATH_TF32 and 3XTF32 permit less precision for speed; the CPU
     * has no faster path, so it honours them with full f32. */
    locus_status status = locus__cpu_check_dtype(s, "gemm", desc->dtype);
    if (status != LOCUS_SUCCESS)
        return status;
    int node, workers;
    status = locus__cpu_device_workers(s, device, &node, &workers);
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
    };
    gemm_job job = {
        .services = services,
        .op = op,
        .g = &g,
        .by_rows = g.m >= (size_t)workers,
        .capacity = workers,
    };
    locus__cpu_set_algorithm(op, "blocked");
    if (g.m == 0 || g.n == 0)
        return LOCUS_SUCCESS;

    size_t bytes = 0;
    if (g.alpha != 0.0f && g.k != 0) {
        /* Whole pages per worker, so each worker's first touch places its
         * own scratch on its node. */
        size_t page_floats = s->page_size / sizeof(float);
        size_t floats = locus__cpu_sgemm_scratch_floats(g.m, g.n, g.k);
        job.scratch_stride =
            (floats + page_floats - 1) / page_floats * page_floats;
        bytes = job.scratch_stride * sizeof(float) * (size_t)workers;
        job.scratch = services->host_alloc(s->runtime, bytes, node);
        if (!job.scratch)
            return services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                  "cannot allocate %zu bytes of gemm scratch",
                                  bytes);
    }
    if (op && op->record)
        op->record->workspace_bytes = bytes;

    status = services->run(s->runtime, node, gemm_worker, &job);

    if (job.scratch)
        services->host_free(s->runtime, job.scratch, bytes);
    return status;
}
