/* MEC's pieces from inside (internal functions): the GEMM with an indexed
 * B (conv_gemm.h, gemm.h) against a float64 loop under every kernel set,
 * with offset tables of every kind the packing tells apart: runs of
 * consecutive columns (copied), panels straddling two runs, strided and
 * shuffled columns (gathered), including panels whose first and last
 * offsets are nr - 1 apart without being consecutive; then the identity
 * tables bit for bit against the stored B. Then MEC's choice between its
 * solutions A and B and its shared-lowering mode: the 3x3
 * 256->256 layer at batch 8 by its plans on 2 and 16 workers, and shapes
 * of known worker counts, each shape run
 * through the public API on a synthetic machine of that many cores under
 * every kernel set: the output against the direct float64 loop, poisoned
 * beforehand, and the workspace the record reports against
 * locus__cpu_mec_workspace for the same problem. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <locus/locus.h>

#include "conv2d.h"
#include "conv_gemm.h"
#include "conv_reference.h"
#include "cpu_contexts.h"
#include "cpu_conv_problem.h"
#include "isa.h"
#include "mec.h"
#include "test_buffers.h"
#include "test_util.h"

/* How a column table is laid out (see column_table). */
typedef enum columns_kind {
    COLUMNS_PLAIN,    /* j: one run, the stored B */
    COLUMNS_ROWS,     /* MEC's (p, q): runs of `run` columns, jumps between */
    COLUMNS_STRIDED,  /* 3 j: no two consecutive */
    COLUMNS_SWAPPED,  /* j, with j = 1, 2 (mod 16) swapped */
    COLUMNS_REVERSED, /* n - 1 - j, decreasing */
} columns_kind;

static const char *const columns_names[] = {"plain", "rows", "strided",
                                            "swapped", "reversed"};

/* The column offsets of a kind; returns the largest. COLUMNS_SWAPPED keeps
 * every aligned panel's first and last offset nr - 1 apart (for nr 16 and
 * 32) while its middle is out of order: a first-and-last test alone would
 * copy it as a run. */
static size_t column_table(columns_kind kind, size_t n, size_t run,
                           size_t *cols)
{
    size_t largest = 0;
    for (size_t j = 0; j < n; j++) {
        size_t c = j;
        switch (kind) {
        case COLUMNS_PLAIN:
            break;
        case COLUMNS_ROWS:
            c = j / run * (run + 5) + j % run;
            break;
        case COLUMNS_STRIDED:
            c = 3 * j;
            break;
        case COLUMNS_SWAPPED:
            if (j % 16 == 1 && j + 1 < n)
                c = j + 1;
            else if (j % 16 == 2)
                c = j - 1;
            break;
        case COLUMNS_REVERSED:
            c = n - 1 - j;
            break;
        }
        cols[j] = c;
        if (c > largest)
            largest = c;
    }
    return largest;
}

/* One indexed product of m x n x k with its tables, against float64:
 * every element within (k + 2) u of the sum of |terms| (twice that
 * allowed), the columns of C past n left as poisoned. */
static void check_indexed(const locus__cpu_isa *isa,
                          locus__conv_gemm_blocks blocks, size_t m, size_t n,
                          size_t k, columns_kind kind, size_t run)
{
    char what[192];
    snprintf(what, sizeof what,
             "%s %s blocks indexed m=%zu n=%zu k=%zu columns %s/%zu",
             isa->sgemm_name,
             blocks == LOCUS__CONV_GEMM_COMPACT ? "compact" : "fast", m, n, k,
             columns_names[kind], run);
    size_t *rows = malloc(k * sizeof *rows);
    size_t *cols = malloc(n * sizeof *cols);
    size_t lda = k + 3, ldc = n + 5;
    float *a = test_random_floats(m * lda);
    float *c = malloc(m * ldc * sizeof *c);
    float *scratch = malloc(
        locus__cpu_conv_gemm_scratch_floats(blocks, m, n, k) * sizeof(float));
    float *b = NULL;
    if (!TEST_EXPECT(rows && cols && a && c && scratch, "%s: out of memory",
                     what))
        goto done;
    /* Rows out of order and overlapping one another (stride 7 < the row
     * length), as MEC's windows overlap. */
    size_t largest = column_table(kind, n, run, cols);
    size_t row_count = k / 2 + 1, row_stride = kind == COLUMNS_PLAIN ? n : 7;
    for (size_t p = 0; p < k; p++)
        rows[p] = kind == COLUMNS_PLAIN ? p * n : (p * 5 % row_count) * 7;
    size_t b_count =
        (kind == COLUMNS_PLAIN ? k : row_count) * row_stride + largest + 1;
    b = test_random_floats(b_count);
    if (!TEST_EXPECT(b != NULL, "%s: out of memory", what))
        goto done;
    test_fill_nan(c, m * ldc);
    locus__cpu_conv_gemm_indexed(isa, blocks, m, n, k, a, lda, b, rows, cols, c,
                                 ldc, scratch);
    double tolerance = 2.0 * ((double)k + 2.0) * 0x1.0p-24, worst = 0.0;
    size_t worst_i = 0, worst_j = 0, untouched = 0;
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++) {
            double ref = 0.0, mag = 0.0;
            for (size_t p = 0; p < k; p++) {
                double v = (double)a[i * lda + p] * b[rows[p] + cols[j]];
                ref += v;
                mag += fabs(v);
            }
            double err = fabs(c[i * ldc + j] - ref) / mag;
            if (!(err <= worst)) {
                worst = isnan(err) ? INFINITY : err;
                worst_i = i;
                worst_j = j;
            }
        }
        for (size_t j = n; j < ldc; j++)
            untouched += isnan(c[i * ldc + j]) != 0;
    }
    TEST_EXPECT(worst <= tolerance,
                "%s: relative error %.3g > %.3g at C[%zu][%zu] = %.9g", what,
                worst, tolerance, worst_i, worst_j,
                (double)c[worst_i * ldc + worst_j]);
    TEST_EXPECT(untouched == m * (ldc - n),
                "%s: %zu elements of C past column n written", what,
                m * (ldc - n) - untouched);

    /* The identity tables are the stored B: the same packing, the same
     * bits. */
    if (kind == COLUMNS_PLAIN) {
        float *stored = malloc(m * ldc * sizeof *stored);
        if (TEST_EXPECT(stored != NULL, "%s: out of memory", what)) {
            test_fill_nan(stored, m * ldc);
            locus__cpu_conv_gemm(isa, blocks, m, n, k, a, lda, b, n, stored,
                                 ldc, scratch);
            size_t differ = 0;
            for (size_t i = 0; i < m; i++)
                differ += memcmp(c + i * ldc, stored + i * ldc,
                                 n * sizeof(float)) != 0;
            TEST_EXPECT(differ == 0,
                        "%s: %zu rows differ from the stored B's product", what,
                        differ);
        }
        free(stored);
    }
done:
    free(rows);
    free(cols);
    free(a);
    free(b);
    free(c);
    free(scratch);
}

static void test_indexed(const locus__cpu_isa *isa)
{
    /* m: below and past a register tile's rows and the 48- and 144-row
     * blocks; k: past the 128- and 256-deep blocks; n: below, at and past
     * 16 and 32 columns, past the MEC chunk. Both blocks (MEC's compact,
     * im2col's fast): each must give the stored B's bits with identity
     * tables. */
    static const size_t shapes[][3] = {
        {1, 1, 1},    {7, 15, 9},    {13, 33, 27},  {6, 16, 5},
        {12, 32, 64}, {70, 98, 257}, {150, 65, 40}, {25, 300, 600},
    };
    static const size_t runs[] = {14, 5, 16, 35};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        size_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        for (int kind = COLUMNS_PLAIN; kind <= COLUMNS_REVERSED; kind++)
            for (int b = LOCUS__CONV_GEMM_FAST; b <= LOCUS__CONV_GEMM_COMPACT;
                 b++)
                check_indexed(isa, (locus__conv_gemm_blocks)b, m, n, k,
                              (columns_kind)kind,
                              kind == COLUMNS_ROWS ? runs[i % 4] : 0);
    }
}

/* A MEC case and the worker count it is run with. */
typedef struct mec_case {
    conv_case cc;
    int workers;
    size_t group; /* images per GEMM the rule must choose: 1 is B */
    size_t ways;  /* workers per image of the shared mode; 0: A or B */
} mec_case;

/* Runs MEC on cc in ctx (forced to mc->workers threads), checks it
 * against the direct loop and its record against the plan. */
static void run_mec(locus_context *ctx, const char *isa, const mec_case *mc)
{
    const conv_case *cc = &mc->cc;
    char what[192];
    snprintf(what, sizeof what,
             "mec %s %d workers: n=%zu c=%zu %zux%zu k=%zu kernel %zux%zu "
             "stride %zux%zu pad %zux%zu",
             isa, mc->workers, cc->n, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s,
             cc->sh, cc->sw, cc->ph, cc->pw);
    locus__cpu_state state;
    locus__conv_problem pr = test_conv_problem(cc, NULL, mc->workers, &state);
    size_t group = locus__cpu_mec_group(&pr), expected = 0;
    TEST_EXPECT(group == mc->group,
                "%s: %zu images per GEMM, expected %zu (solution %s)", what,
                group, mc->group, mc->group == 1 ? "B" : "A");
    size_t ways = locus__cpu_mec_filter_ways(&pr);
    TEST_EXPECT(ways == mc->ways,
                "%s: %zu workers per image in the shared mode, expected %zu",
                what, ways, mc->ways);
    TEST_EXPECT(locus__cpu_mec_workspace(&pr, &expected) && expected > 0,
                "%s: no workspace size", what);

    size_t p = pr.shape.out_h, q = pr.shape.out_w;
    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    size_t out_count = cc->n * cc->k * p * q;
    float *in = test_random_floats(in_count);
    float *f = test_random_floats(f_count);
    float *out = malloc(out_count * sizeof *out);
    locus_device *dev = NULL;
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f && out, "%s: out of memory", what) ||
        TEST_OK(locus_device_find(ctx, "cpu", &dev)) != LOCUS_SUCCESS)
        goto done;
    bin = test_upload_floats(ctx, in, in_count);
    bf = test_upload_floats(ctx, f, f_count);
    if (!bin || !bf ||
        TEST_OK(locus_buffer_create(ctx, out_count * sizeof(float), NULL,
                                    &bout)) != LOCUS_SUCCESS)
        goto done;
    locus_conv2d_desc desc;
    conv_describe(cc, &desc);
    desc.algorithm = LOCUS_CONV_MEC;
    locus_record record;
    if (!conv_run_poisoned(ctx, dev, &desc, bin, bf, bout, out, out_count,
                           &record, what))
        goto done;
    conv_check_output(cc, p, q, in, f, out, NULL, NULL, what);
    TEST_EXPECT(record.workspace_bytes == expected,
                "%s: record shows %llu bytes of workspace, the plan %zu", what,
                (unsigned long long)record.workspace_bytes, expected);
done:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
    free(in);
    free(f);
    free(out);
}

/* Columns per worker and image: rows = ceil(P / workers) times Q; B from
 * 64, else A with ceil(64 / columns) images, at most the batch. */
static const mec_case mec_cases[] = {
    /*  n  c   h   w   k  r  s sh sw ph pw   workers group ways */
    /* B: 7 rows of 14 per worker, K = 13 not a multiple of any tile */
    {{8, 4, 14, 14, 13, 3, 3, 1, 1, 1, 1}, 2, 1, 0},
    /* B: batch 1, short rows */
    {{1, 2, 5, 6, 9, 3, 3, 1, 1, 1, 1}, 3, 1, 0},
    /* B: 20 rows of 45, 900 columns in 4 chunks */
    {{2, 3, 40, 45, 7, 3, 3, 1, 1, 1, 1}, 2, 1, 0},
    /* B: stride 2, 5x3 kernel, 7 rows of 10 per worker */
    {{2, 3, 27, 19, 11, 5, 3, 2, 2, 1, 1}, 2, 1, 0},
    /* B: C = 1, 9 rows of 9 */
    {{3, 1, 20, 11, 7, 3, 3, 1, 1, 0, 0}, 2, 1, 0},
    /* A: 4 rows of 7 = 28 columns, 3 images, 5 = 3 + 2 */
    {{5, 3, 7, 7, 10, 3, 3, 1, 1, 1, 1}, 2, 3, 0},
    /* A: R = 1, one worker, 6 rows of 5 = 30 columns, the batch of 3 */
    {{3, 2, 6, 5, 7, 1, 3, 1, 1, 0, 1}, 1, 3, 0},
    /* A: C = 1, stride 2, 3 rows of 8 = 24 columns, 4 = 3 + 1 */
    {{4, 1, 9, 8, 11, 5, 3, 2, 1, 2, 1}, 2, 3, 0},
    /* A: more workers than output rows (3 of 4 busy), 1 row of 11 */
    {{3, 3, 3, 11, 6, 3, 3, 1, 1, 1, 1}, 4, 3, 0},
    /* A: 1x1 stride 2, 2 rows of 4 per worker, 8 images */
    {{9, 5, 7, 7, 13, 1, 1, 2, 2, 0, 0}, 2, 8, 0},
    /* A: 5 rows of 12 = 60 columns: 2 images */
    {{6, 7, 9, 12, 19, 3, 3, 1, 1, 1, 1}, 2, 2, 0},
    /* Shared lowering where A's bands would exceed im2col's workspace
     * (4 workers, 2 rows of 7 each, A with 5 images): teams of 2 with 32
     * filters each, 2 images a round, 3 rounds (the last with one team
     * idle) */
    {{5, 128, 7, 7, 64, 3, 3, 1, 1, 1, 1}, 4, 1, 2},
    /* K 100 split 50 / 50; batch 3: the second round's one image */
    {{3, 256, 7, 7, 100, 3, 3, 1, 1, 1, 1}, 4, 1, 2},
    /* stride 2, a 5x3 kernel, K 70 split 35 / 35 */
    {{3, 160, 9, 7, 70, 5, 3, 2, 2, 1, 1}, 4, 1, 2},
    /* Shared because narrow: batch 1, 2 rows of 7 = 14 columns a worker;
     * K 64 split 32 / 32, one team of the two idle */
    {{1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1}, 4, 1, 2},
};

/* The layer, 3x3 256 -> 256 at 14x14, by the plans alone (a run
 * would take seconds under the sanitizers). Batch 8 on 16 workers (one
 * output row each): solution A would lower 5 images' bands per worker,
 * 140% of im2col's workspace; the shared mode takes teams of 8 and stays
 * within the 40%. Batch 1 on 16 workers: 14 columns a worker,
 * too narrow, so shared too. On 2 workers (7 rows, 98 columns each) B. */
static void test_shared_rule(void)
{
    static const struct {
        size_t batch;
        int workers;
        size_t ways;
    } plans[] = {{8, 16, 8}, {8, 2, 0}, {1, 16, 8}, {1, 2, 0}};
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        const conv_case layer = {
            plans[i].batch, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1};
        locus__cpu_state state;
        locus__conv_problem pr =
            test_conv_problem(&layer, NULL, plans[i].workers, &state);
        size_t mec = 0, im2col = 0;
        size_t ways = locus__cpu_mec_filter_ways(&pr);
        TEST_EXPECT(ways == plans[i].ways,
                    "3x3 256->256 @14 batch %zu, %d workers: %zu workers per "
                    "image in the shared mode, expected %zu",
                    plans[i].batch, plans[i].workers, ways, plans[i].ways);
        TEST_EXPECT(locus__cpu_mec_workspace(&pr, &mec) &&
                        locus__cpu_im2col_workspace(&pr, &im2col) &&
                        (double)mec <= 0.4 * (double)im2col,
                    "3x3 256->256 @14 batch %zu, %d workers: mec workspace "
                    "%zu bytes, over 40%% of im2col's %zu",
                    plans[i].batch, plans[i].workers, mec, im2col);
    }
}

static void test_solutions(const char *isa)
{
    for (int workers = 1; workers <= 4; workers++) {
        /* A synthetic machine of that many cores: its workers need not
         * have a cpu each, so 4 run on a 2-cpu machine. */
        char topology[64], threads[8];
        snprintf(topology, sizeof topology, "synthetic:core:%d pu:1", workers);
        snprintf(threads, sizeof threads, "%d", workers);
        int used = 0;
        for (size_t i = 0; i < sizeof mec_cases / sizeof *mec_cases; i++)
            used |= mec_cases[i].workers == workers;
        if (!used)
            continue;
        locus_context *ctx = test_cpu_context(isa, topology, threads);
        if (!ctx)
            return;
        for (size_t i = 0; i < sizeof mec_cases / sizeof *mec_cases; i++)
            if (mec_cases[i].workers == workers)
                run_mec(ctx, isa, &mec_cases[i]);
        locus_context_destroy(ctx);
    }
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    /* A level this CPU lacks leaves the best below it in the table: each
     * distinct table once. */
    const char *done[TEST_CPU_ISA_COUNT] = {NULL};
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++) {
        locus__cpu_isa isa;
        locus__cpu_isa_init(&isa, test_cpu_isas[i]);
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= done[j] && strcmp(done[j], isa.sgemm_name) == 0;
        done[i] = isa.sgemm_name;
        if (seen)
            continue;
        printf("isa %s (%s)\n", test_cpu_isas[i], isa.sgemm_name);
        fflush(stdout);
        test_indexed(&isa);
    }
    test_shared_rule();
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_solutions(test_cpu_isas[i]);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
