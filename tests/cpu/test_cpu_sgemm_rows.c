/* The partial-row-panel micro-kernel (isa.h: locus__sgemm_strided_rows_
 * kernel) and the narrow one (isa.h: sgemm_narrow) of every kernel table
 * that has them and this CPU runs, alone. The implicit GEMM calls the
 * first for a filter count's last row panel (conv_implicit.c), so it must
 * compute exactly the first `rows` rows of the whole tile and write
 * nothing else; the GEMMs call the second for a last micro-panel of at
 * most narrow_nr columns (gemm_macro.c, conv_implicit.c), so it must
 * compute exactly the first narrow_nr columns of all mr rows; and the
 * thin one (isa.h: sgemm_thin) for a last micro-panel of its column
 * counts, every one of them, exactly those columns of all mr rows.
 *
 * Each case: rows 1 to mr - 1 (every one of them, so the 4-, 8- and
 * 12-row tiles of AVX-512 are all reached), depth 1 to 70 (odd ones, and
 * past the 2 mr steps that prefetch C), B's rows ldb = nr or up to 300
 * floats apart, C's rows ldc = nr or up to 100 apart, alpha 1 or not,
 * beta 0 (C poisoned with NaN, which must not leak) or 0.75. The result
 * is checked against a float64 sum by relative error, and against the
 * full tile kernel (the same arithmetic) bit for bit; the rest of C (rows
 * past `rows`, the gaps between rows, a guard after) must come back
 * unchanged. The packed A holds nonzero values in the rows past `rows`,
 * so a tile that used them would be caught. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_table.h"
#include "test_util.h"

#define CASES 300
#define GUARD 64

static float random_float(void)
{
    return (float)test_rng_uniform(-1.0, 1.0);
}

typedef enum kernel { ROWS, NARROW, THIN } kernel;
static const char *const kernel_names[] = {"rows", "narrow", "thin"};

/* ROWS: the partial-row kernel on `rows` (< mr) rows; NARROW: the narrow
 * kernel; THIN: the thin one on `cols` columns (both all mr rows). */
static void run_case(const char *isa_name, const locus__cpu_isa *isa,
                     kernel which, size_t rows, size_t cols)
{
    size_t mr = isa->mr, nr = isa->nr;
    if (which != ROWS)
        rows = mr;
    if (which == ROWS)
        cols = nr;
    else if (which == NARROW)
        cols = isa->narrow_nr;
    size_t kc = test_rng_range(1, 70);
    size_t ldb = test_rng_range(0, 1) ? nr : test_rng_range(nr, 300);
    size_t ldc = test_rng_range(0, 1) ? nr : test_rng_range(nr, 100);
    float alpha = test_rng_range(0, 1) ? 1.0f : (float)test_rng_uniform(-2, 2);
    float beta = test_rng_range(0, 1) ? 0.0f : 0.75f;
    size_t c_floats = mr * ldc + GUARD;
    float *a = malloc(kc * mr * sizeof *a);
    float *b = malloc(((kc - 1) * ldb + nr) * sizeof *b);
    float *c = malloc(c_floats * sizeof *c);
    float *before = malloc(c_floats * sizeof *before);
    float *whole = malloc(mr * nr * sizeof *whole);
    if (!TEST_EXPECT(a && b && c && before && whole, "out of memory"))
        goto done;
    for (size_t i = 0; i < kc * mr; i++)
        a[i] = random_float(); /* rows past `rows` too: they must not count */
    for (size_t i = 0; i < (kc - 1) * ldb + nr; i++)
        b[i] = random_float();
    for (size_t i = 0; i < c_floats; i++)
        c[i] = beta == 0.0f ? NAN : random_float();
    memcpy(before, c, c_floats * sizeof *c);
    /* The whole tile, its rows nr apart, C's first rows copied in. */
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < nr; j++)
            whole[i * nr + j] = i < rows ? c[i * ldc + j] : 0.0f;
    isa->sgemm_strided(kc, a, b, ldb, whole, nr, alpha, beta);

    if (which == THIN)
        isa->sgemm_thin(kc, a, b, ldb, c, ldc, alpha, beta, cols);
    else if (which == NARROW)
        isa->sgemm_narrow(kc, a, b, ldb, c, ldc, alpha, beta);
    else
        isa->sgemm_strided_rows(kc, a, b, ldb, c, ldc, alpha, beta, rows);

    char what[160];
    snprintf(what, sizeof what,
             "%s %s rows %zu cols %zu kc %zu ldb %zu ldc %zu alpha %g beta %g",
             isa_name, kernel_names[which], rows, cols, kc, ldb, ldc,
             (double)alpha, (double)beta);
    size_t bad = 0;
    for (size_t at = 0; at < c_floats; at++) {
        size_t i = at / ldc, j = at % ldc;
        if (i < rows && j < cols) {
            double sum = 0.0, terms = 0.0;
            for (size_t p = 0; p < kc; p++) {
                double t = (double)a[p * mr + i] * (double)b[p * ldb + j];
                sum += t;
                terms += fabs(t);
            }
            double ref = (double)alpha * sum;
            double scale = fabs((double)alpha) * terms;
            if (beta != 0.0f) {
                ref += (double)beta * (double)before[at];
                scale += fabs((double)beta * (double)before[at]);
            }
            double err = fabs((double)c[at] - ref) / (scale > 0 ? scale : 1);
            if (!(err <= 1e-5) ||
                memcmp(&c[at], &whole[i * nr + j], sizeof(float)) != 0)
                bad++;
        } else if (memcmp(&c[at], &before[at], sizeof(float)) != 0) {
            bad++;
        }
    }
    TEST_EXPECT(bad == 0,
                "%s: %zu floats wrong (outside the rows and columns: changed; "
                "inside: off the float64 sum or not the whole tile's bits)",
                what, bad);
done:
    free(a);
    free(b);
    free(c);
    free(before);
    free(whole);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    int tested = 0, narrow_tested = 0, thin_tested = 0;
    for (size_t t = 0; t < TEST_CPU_ISA_COUNT; t++) {
        const char *name = test_cpu_isas[t];
        locus__cpu_isa isa;
        if (!test_cpu_table(name, &isa))
            continue;
        if (!isa.sgemm_strided_rows) {
            printf("%s: no partial-row kernel (whole tiles through a "
                   "buffer)\n",
                   name);
            continue;
        }
        printf("isa %s\n", name);
        fflush(stdout);
        for (int i = 0; i < CASES; i++)
            run_case(name, &isa, ROWS, 1 + (size_t)i % (isa.mr - 1), 0);
        if (isa.sgemm_narrow) {
            for (int i = 0; i < CASES / 4; i++)
                run_case(name, &isa, NARROW, 0, 0);
            narrow_tested++;
        } else {
            printf("%s: no narrow kernel\n", name);
        }
        /* Every column count the thin kernel takes, ten times each. */
        size_t thin_counts = 0;
        for (size_t cols = 1; cols <= isa.nr; cols++)
            if (locus__cpu_isa_thin_takes(&isa, cols)) {
                for (int i = 0; i < 10; i++)
                    run_case(name, &isa, THIN, 0, cols);
                thin_counts++;
            }
        printf("%s: the thin kernel on %zu column counts\n", name, thin_counts);
        thin_tested += thin_counts > 0;
        tested++;
    }
    if (!test_cpu_has_avx512f())
        printf("note: no AVX-512 here, so no table with the kernel ran\n");
    else
        TEST_EXPECT(tested > 0 && narrow_tested > 0 && thin_tested > 0,
                    "the avx512 table lacks the partial-row, narrow or thin "
                    "kernel");
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
