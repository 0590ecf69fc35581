/* The CPU gemm's dynamic work units (backends/cpu/gemm_units.c): which
 * worker claims a unit depends on timing, so the product must be bitwise
 * the same on 1, 2, 3 and 4 workers, f32 and f64, one-job (private) and
 * phased products, skinny ones whose units split the columns too, and a
 * synthetic two-node topology with tiny caches (many row units and
 * phases per group). Checked against a long double reference by relative
 * error, C poisoned with NaN before each run (beta = 0). Also the unit
 * plan's boundaries. Oversubscribed here: no timing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "gemm_units.h"
#include "test_util.h"

#define TINY_TWO_NODES                                                         \
    "synthetic:node:2 l3:1(size=64KB) l2:1(size=16KB) l1d:1(size=4KB) "        \
    "core:2 pu:1"

typedef struct gcase {
    size_t m, n, k;
    locus_transpose ta, tb;
} gcase;

static void check_plan(size_t rows, size_t panels, size_t mr, size_t nr,
                       size_t mc, int workers)
{
    locus__gemm_units u =
        locus__gemm_units_plan(rows, panels, mr, nr, mc, workers);
    size_t want = (size_t)workers * LOCUS__GEMM_UNITS_PER_WORKER;
    size_t most = mc / mr * mr < mr ? mr : mc / mr * mr;
    size_t least = (LOCUS__GEMM_UNIT_MIN_ROWS + mr - 1) / mr * mr;
    char what[160];
    snprintf(what, sizeof what,
             "plan rows %zu panels %zu mr %zu nr %zu mc %zu "
             "workers %d",
             rows, panels, mr, nr, mc, workers);
    if (rows == 0) {
        TEST_EXPECT(u.row_units == 0, "%s: %zu row units", what, u.row_units);
        return;
    }
    /* Every row and panel in exactly one unit, none empty. */
    TEST_EXPECT(u.row_step > 0 && u.row_units * u.row_step >= rows &&
                    (u.row_units - 1) * u.row_step < rows,
                "%s: row step %zu x %zu units", what, u.row_step, u.row_units);
    TEST_EXPECT(u.col_step > 0 && u.col_units * u.col_step >= panels &&
                    (u.col_units - 1) * u.col_step < panels,
                "%s: col step %zu x %zu units", what, u.col_step, u.col_units);
    /* Inner boundaries on micro-panels; an A block holds a unit. */
    TEST_EXPECT(u.row_units == 1 || u.row_step % mr == 0,
                "%s: row step %zu not of mr", what, u.row_step);
    TEST_EXPECT(u.row_step <= most, "%s: row step %zu > mc", what, u.row_step);
    /* Evened out (locus__gemm_even_block): at least half the minimum. */
    TEST_EXPECT(u.row_units == 1 ||
                    2 * u.row_step >= (least < most ? least : most),
                "%s: row step %zu below the minimum", what, u.row_step);
    if (u.col_units > 1) {
        TEST_EXPECT(u.row_units < want, "%s: columns split with %zu row units",
                    what, u.row_units);
        TEST_EXPECT(u.col_step * nr >= LOCUS__GEMM_UNIT_MIN_COLS,
                    "%s: column unit of %zu panels", what, u.col_step);
        TEST_EXPECT(u.row_units * u.col_units < 2 * want, "%s: %zu x %zu units",
                    what, u.row_units, u.col_units);
    }
    /* Several units per worker wherever the shape has them. */
    if (rows >= want * least && most >= rows)
        TEST_EXPECT(2 * u.row_units >= want, "%s: only %zu row units", what,
                    u.row_units);
    size_t step = locus__gemm_pack_step(panels, nr, workers);
    TEST_EXPECT(step >= 1 && step <= panels &&
                    (step * nr >= LOCUS__GEMM_PACK_MIN_COLS || step == panels),
                "%s: pack step %zu", what, step);
}

static void test_plan(void)
{
    static const size_t mrs[] = {4, 6, 8, 12}, nrs[] = {8, 16, 32};
    static const size_t mcs[] = {4, 48, 780, 4092};
    for (size_t rows = 0; rows < 5000; rows = rows * 3 + 1)
        for (size_t panels = 1; panels < 600; panels = panels * 5 + 2)
            for (size_t a = 0; a < 4; a++)
                for (size_t b = 0; b < 3; b++)
                    for (size_t c = 0; c < 4; c++)
                        for (int w = 1; w <= 17; w += 4)
                            check_plan(rows, panels, mrs[a], nrs[b],
                                       mcs[c] < mrs[a] ? mrs[a] : mcs[c], w);
    /* A skinny product on 4 workers splits the columns. */
    locus__gemm_units u = locus__gemm_units_plan(10, 200, 12, 16, 780, 4);
    TEST_EXPECT(u.row_units == 1 && u.col_units > 1, "skinny: %zu x %zu units",
                u.row_units, u.col_units);
    /* Too few columns to split: one column unit. */
    u = locus__gemm_units_plan(10, 15, 12, 16, 780, 4);
    TEST_EXPECT(u.col_units == 1, "narrow: %zu column units", u.col_units);
}

static double rnd(void)
{
    return test_rng_uniform(-1.0, 1.0);
}

/* One product on ctx in f32 (f64 == 0) or f64; C (m * n, tight) gets the
 * result as doubles. a, b hold the values in double. */
static int run_one(locus_context *ctx, const gcase *g, int f64, const double *a,
                   const double *b, double *out)
{
    size_t es = f64 ? sizeof(double) : sizeof(float);
    size_t na = g->m * g->k, nb = g->k * g->n, nc = g->m * g->n;
    char *ha = malloc(na * es), *hb = malloc(nb * es), *hc = malloc(nc * es);
    int ok = 0;
    locus_buffer *ba = NULL, *bb = NULL, *bc = NULL;
    locus_device *dev = NULL;
    if (!TEST_EXPECT(ha && hb && hc, "out of memory"))
        goto free_host;
    for (size_t i = 0; i < na; i++)
        f64 ? (((double *)ha)[i] = a[i]) : (((float *)ha)[i] = (float)a[i]);
    for (size_t i = 0; i < nb; i++)
        f64 ? (((double *)hb)[i] = b[i]) : (((float *)hb)[i] = (float)b[i]);
    for (size_t i = 0; i < nc; i++)
        f64 ? (((double *)hc)[i] = NAN) : (((float *)hc)[i] = NAN);
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) != LOCUS_SUCCESS ||
        TEST_OK(locus_buffer_create(ctx, na * es, NULL, &ba)) ||
        TEST_OK(locus_buffer_create(ctx, nb * es, NULL, &bb)) ||
        TEST_OK(locus_buffer_create(ctx, nc * es, NULL, &bc)) ||
        TEST_OK(locus_buffer_write(ba, 0, ha, na * es)) ||
        TEST_OK(locus_buffer_write(bb, 0, hb, nb * es)) ||
        TEST_OK(locus_buffer_write(bc, 0, hc, nc * es)))
        goto destroy;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = f64 ? LOCUS_DTYPE_F64 : LOCUS_DTYPE_F32;
    desc.trans_a = g->ta;
    desc.trans_b = g->tb;
    desc.m = g->m;
    desc.n = g->n;
    desc.k = g->k;
    desc.alpha = 1.25;
    desc.beta = 0.0;
    if (TEST_OK(locus_gemm(ctx, dev, &desc, ba, bb, bc, NULL)) ||
        TEST_OK(locus_buffer_read(bc, 0, hc, nc * es)))
        goto destroy;
    for (size_t i = 0; i < nc; i++)
        out[i] = f64 ? ((double *)hc)[i] : ((float *)hc)[i];
    ok = 1;
destroy:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    locus_buffer_destroy(bc);
free_host:
    free(ha);
    free(hb);
    free(hc);
    return ok;
}

static void test_case(locus_context *const *ctxs, int count, const char *where,
                      const gcase *g, int f64)
{
    size_t m = g->m, n = g->n, k = g->k;
    size_t na = m * k, nb = k * n, nc = m * n;
    double *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
    double *first = malloc(nc * sizeof *first),
           *again = malloc(nc * sizeof *again);
    if (!TEST_EXPECT(a && b && first && again, "out of memory"))
        goto free_all;
    /* Values exact in f32, so f32 and f64 multiply the same numbers. */
    for (size_t i = 0; i < na; i++)
        a[i] = (float)rnd();
    for (size_t i = 0; i < nb; i++)
        b[i] = (float)rnd();
    char what[160];
    snprintf(what, sizeof what, "%s %s %zux%zux%zu %c%c", where,
             f64 ? "f64" : "f32", m, n, k, g->ta ? 'T' : 'N',
             g->tb ? 'T' : 'N');
    for (int t = 0; t < count; t++) {
        if (!run_one(ctxs[t], g, f64, a, b, t == 0 ? first : again))
            goto free_all;
        if (t > 0) {
            size_t diff = 0;
            for (size_t i = 0; i < nc; i++)
                diff += memcmp(&first[i], &again[i], sizeof first[i]) != 0;
            TEST_EXPECT(diff == 0,
                        "%s: %zu elements differ bitwise between 1 and %d "
                        "workers",
                        what, diff, t + 1);
        }
    }
    /* The first run against long double, by relative error to the scale
     * of what was summed. */
    double tolerance = 2.0 * ((double)k + 3.0) * (f64 ? 0x1p-53 : 0x1p-24);
    double worst = 0.0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            long double dot = 0.0L, mag = 0.0L;
            for (size_t p = 0; p < k; p++) {
                long double x = g->ta ? a[p * m + i] : a[i * k + p];
                long double y = g->tb ? b[j * k + p] : b[p * n + j];
                dot += x * y;
                mag += fabsl(x * y);
            }
            double got = first[i * n + j];
            double err =
                mag > 0.0L ? (double)(fabsl(got - 1.25L * dot) / (1.25L * mag))
                           : (got == 0.0 ? 0.0 : INFINITY);
            if (!(err <= worst))
                worst = isnan(err) ? INFINITY : err;
        }
    TEST_EXPECT(worst <= tolerance, "%s: relative error %.3g > %.3g", what,
                worst, tolerance);
free_all:
    free(a);
    free(b);
    free(first);
    free(again);
}

static void test_products(const char *topology, const char *where,
                          const gcase *cases, size_t count)
{
    static const char *const threads[] = {"1", "2", "3", "4"};
    locus_context *ctxs[4] = {NULL};
    int made = 1;
    for (int t = 0; t < 4; t++)
        made &=
            (ctxs[t] = test_cpu_context(NULL, topology, threads[t])) != NULL;
    if (made)
        for (size_t i = 0; i < count; i++)
            for (int f64 = 0; f64 < 2; f64++)
                test_case(ctxs, 4, where, &cases[i], f64);
    for (int t = 0; t < 4; t++)
        locus_context_destroy(ctxs[t]);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    test_plan();
    /* One-job products (up to 512^3 multiply-adds), phased ones, and a
     * skinny phased one whose units split the columns. */
    static const gcase host[] = {
        {517, 389, 263, LOCUS_NO_TRANS, LOCUS_NO_TRANS},
        {1031, 77, 1200, LOCUS_TRANS, LOCUS_NO_TRANS},
        {1031, 389, 401, LOCUS_NO_TRANS, LOCUS_TRANS},
        {77, 1400, 1300, LOCUS_TRANS, LOCUS_TRANS},
    };
    /* Four cores (oversubscribed here) with typical caches. */
    test_products("synthetic:pack:1 core:4 pu:1", "four cores", host,
                  sizeof host / sizeof *host);
    static const gcase tiny[] = {
        {1031, 389, 401, LOCUS_TRANS, LOCUS_NO_TRANS},
    };
    test_products(TINY_TWO_NODES, "two tiny nodes", tiny, 1);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
