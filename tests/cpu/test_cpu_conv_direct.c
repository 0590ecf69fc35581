/* The direct convolution (conv_direct.c, kernels/conv_direct_avx2.c and
 * kernels/conv_direct_avx512.c) from inside, under every kernel table
 * that has a direct kernel and that this CPU runs: "avx2" (6 positions x
 * 16 filters; the CPU needs AVX2 and FMA) and "avx512" (14 x 32;
 * AVX-512F). Each table in three parts.
 *
 * 1. The table's conv_direct kernel alone against a float64 loop: position
 *    counts 1, a middle one, the tile's less one and the whole tile (1, 3,
 *    5, 6 and 1, 7, 13, 14), filter counts 1, half the tile's less one,
 *    half, half and one, the whole less one and the whole (1, 7, 8, 9, 15,
 *    16 and 1, 15, 16, 17, 31, 32: the halves are where the kernels split
 *    their transposes), steps 1, 2 (the specializations) and 3 (the
 *    generic one), depths 1, 7, 64 and 300, with and without
 *    accumulation, and offset tables laid out as a convolution's,
 *    shuffled and decreasing (the kernel must not assume they grow). The
 *    input holds all of the tile's positions (the kernel reads them all,
 *    isa.h says so). The output's rows are ldo = 19 apart and the array
 *    starts off alignment; every element outside the tile (past the
 *    positions, past the filters, the gaps between rows, guards before
 *    and after) must come back bitwise unchanged, since the tile's
 *    masked, transposed stores are where an off-by-one would hide. The
 *    filter lanes past `filters` hold NaN: a lane mixed into another by
 *    the transpose shows.
 * 2. locus__cpu_direct_fits, the rule that sends conv_implicit.c's entry
 *    down the direct path (the direct tile's lane efficiency at least
 *    0.95 of the implicit GEMM's mr x nr tile's), with each expectation
 *    worked out from the rule's arithmetic: under avx512 true for the
 *    ResNet layers it was made for, false where 32-filter groups waste
 *    too many lanes; under avx2 true for the 56-wide 3x3 layer and the
 *    7x7 stem, false for the 14-wide 3x3 layer (tiles of 6 spend 18 lanes
 *    on 14 positions), the 1x1 64->256 layer and 7 filters. The generic
 *    table has no kernel: false, and no workspace.
 * 3. The public API (LOCUS_CONV_IMPLICIT_GEMM) on contexts forced to the
 *    table, on shapes chosen for its tile and asserted to take the direct
 *    path under it first (else the test would pass on the implicit GEMM
 *    without a word): partial filter groups (one under half a tile among
 *    them), partial tiles (down to one position), strides 1 to 3, padding
 *    0, 1 and 3, non-square kernels, the input read in place and copied
 *    into bands, several bands and several depth blocks. Each output is
 *    poisoned with NaN, checked against the float64 loop, repeated
 *    bitwise, and bitwise equal between one worker and several
 *    (conv_direct.c promises results that do not depend on the worker
 *    count); the record's workspace must be the direct plan's for the
 *    context's worker count.
 *
 * A table the CPU lacks is skipped with a note; the whole test is skipped
 * (77) only where the CPU runs neither (no AVX2 and FMA). A table the CPU
 * runs that has no direct kernel, or another tile than the one the
 * expectations were worked out for, is a failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <locus/locus.h>

#include "conv2d.h"
#include "conv_direct.h"
#include "conv_reference.h"
#include "cpu_contexts.h"
#include "cpu_conv_problem.h"
#include "isa.h"
#include "test_buffers.h"
#include "test_util.h"

/* ---- 1. The kernel alone ---- */

/* Rows of the output apart: wider than any table's tile (14 positions),
 * so the gaps show stray stores. */
#define TILE_LDO 19
/* Guard floats before the output (also putting it off the 64-byte
 * alignment malloc may give) and after its last row. */
#define GUARD_BEFORE 3
#define GUARD_AFTER TILE_LDO

#define COUNT(a) (sizeof(a) / sizeof *(a))

/* How a depth step's offsets are laid out (see make_offsets). */
typedef enum offsets_kind {
    OFFSETS_CONV,     /* c * plane + r * wx + s: what conv_direct.c builds */
    OFFSETS_RANDOM,   /* uniform, repeats and all */
    OFFSETS_REVERSED, /* the conv table backwards: decreasing */
} offsets_kind;

static const char *const offsets_names[] = {"conv", "random", "reversed"};

/* Fills offsets[0..depth) of a kind and returns one past the largest. The
 * conv layout is a 3x3 kernel over planes of 5 rows of 23 floats. */
static size_t make_offsets(offsets_kind kind, size_t depth, ptrdiff_t *offsets)
{
    const size_t wx = 23, plane = 5 * wx;
    size_t end = 0;
    for (size_t p = 0; p < depth; p++) {
        size_t q = kind == OFFSETS_REVERSED ? depth - 1 - p : p;
        size_t at = q / 9 * plane + q % 9 / 3 * wx + q % 3;
        if (kind == OFFSETS_RANDOM)
            at = test_rng_range(0, 4 * depth + 40);
        offsets[p] = (ptrdiff_t)at;
        if (at + 1 > end)
            end = at + 1;
    }
    return end;
}

/* One kernel call's arguments, and the table's tile (tile_positions x
 * tile_filters: the filter panel has tile_filters lanes a depth step). */
typedef struct tile_case {
    size_t depth, step, positions, filters;
    int accumulate;
    offsets_kind kind;
    size_t tile_positions, tile_filters;
} tile_case;

/* Compares the output array (out_floats from `array`, the tile at
 * GUARD_BEFORE) after the call with `before`: inside the tile against the
 * float64 loop, within 2 (depth + 2) u of the terms' magnitude plus the
 * start value's (a float sum of depth products and one addition); outside
 * bit for bit. */
static void check_tile(const tile_case *tc, const float *w, const float *in,
                       const ptrdiff_t *offsets, const float *array,
                       const float *before, size_t out_floats, const char *what)
{
    double tolerance = 2.0 * ((double)tc->depth + 2.0) * 0x1.0p-24;
    double worst = 0.0;
    size_t worst_at = 0, changed = 0, first_changed = 0;
    for (size_t at = 0; at < out_floats; at++) {
        /* Filter row and position of the element (the guard before the
         * tile counts as outside). */
        size_t row =
            at < GUARD_BEFORE ? SIZE_MAX : (at - GUARD_BEFORE) / TILE_LDO;
        size_t col =
            at < GUARD_BEFORE ? SIZE_MAX : (at - GUARD_BEFORE) % TILE_LDO;
        if (row >= tc->filters || col >= tc->positions) {
            if (memcmp(&array[at], &before[at], sizeof(float)) != 0 &&
                changed++ == 0)
                first_changed = at;
            continue;
        }
        double start = tc->accumulate ? before[at] : 0.0;
        double ref = start, mag = fabs(start);
        for (size_t p = 0; p < tc->depth; p++) {
            double v = (double)w[p * tc->tile_filters + row] *
                       in[(size_t)offsets[p] + col * tc->step];
            ref += v;
            mag += fabs(v);
        }
        double err = fabs(array[at] - ref) / (mag > 0.0 ? mag : 1.0);
        if (!(err <= worst)) {
            worst = isnan(err) ? INFINITY : err;
            worst_at = at;
        }
    }
    TEST_EXPECT(worst <= tolerance,
                "%s: relative error %.3g > %.3g at filter %zu position %zu: "
                "got %.9g",
                what, worst, tolerance, (worst_at - GUARD_BEFORE) / TILE_LDO,
                (worst_at - GUARD_BEFORE) % TILE_LDO, (double)array[worst_at]);
    TEST_EXPECT(changed == 0,
                "%s: %zu elements outside the tile changed, the first at "
                "array index %zu (filter row %zd, column %zd): %.9g, was %.9g",
                what, changed, first_changed,
                ((ptrdiff_t)first_changed - GUARD_BEFORE) / TILE_LDO,
                ((ptrdiff_t)first_changed - GUARD_BEFORE) % TILE_LDO,
                (double)array[first_changed], (double)before[first_changed]);
}

/* One call of the kernel on fresh random data. */
static void run_tile(const locus__cpu_isa *isa, const tile_case *tc)
{
    char what[192];
    snprintf(what, sizeof what,
             "%s kernel depth %zu step %zu positions %zu filters %zu %s "
             "offsets %s",
             isa->name, tc->depth, tc->step, tc->positions, tc->filters,
             tc->accumulate ? "accumulate" : "write", offsets_names[tc->kind]);
    /* The tile's filter rows and one more (in the guard after), so that a
     * store to the row past the tile shows too. */
    size_t out_floats =
        GUARD_BEFORE + tc->tile_filters * TILE_LDO + GUARD_AFTER;
    ptrdiff_t *offsets = malloc(tc->depth * sizeof *offsets);
    float *w = test_random_floats(tc->depth * tc->tile_filters);
    float *array = malloc(out_floats * sizeof *array);
    float *before = malloc(out_floats * sizeof *before);
    float *in = NULL;
    if (!TEST_EXPECT(offsets && w && array && before, "%s: out of memory",
                     what))
        goto done;
    /* The kernel broadcasts all of the tile's positions' inputs whatever
     * `positions` is (conv_direct.c pads its rows to whole tiles), so the
     * input reaches the last one's. */
    size_t end = make_offsets(tc->kind, tc->depth, offsets);
    in = test_random_floats(end + (tc->tile_positions - 1) * tc->step);
    if (!TEST_EXPECT(in != NULL, "%s: out of memory", what))
        goto done;
    for (size_t p = 0; p < tc->depth; p++)
        for (size_t j = tc->filters; j < tc->tile_filters; j++)
            w[p * tc->tile_filters + j] = NAN;
    if (tc->accumulate)
        for (size_t i = 0; i < out_floats; i++)
            array[i] = (float)test_rng_uniform(-1.0, 1.0);
    else
        test_fill_nan(array, out_floats);
    memcpy(before, array, out_floats * sizeof *array);

    isa->conv_direct(tc->depth, w, in, offsets, tc->step, array + GUARD_BEFORE,
                     TILE_LDO, tc->positions, tc->filters, tc->accumulate);
    check_tile(tc, w, in, offsets, array, before, out_floats, what);
done:
    free(offsets);
    free(w);
    free(array);
    free(before);
    free(in);
}

/* The grid over the table's own tile (tp x tf): positions 1, an odd one
 * near the middle, tp - 1 and tp; filters 1, half - 1, half, half + 1,
 * tf - 1 and tf. */
static void test_kernel(const locus__cpu_isa *isa)
{
    static const size_t depths[] = {1, 7, 64, 300};
    static const size_t steps[] = {1, 2, 3};
    size_t tp = isa->direct_positions, tf = isa->direct_filters;
    if (!TEST_EXPECT(tp >= 4 && tp < TILE_LDO && tf >= 4 && tf % 2 == 0 &&
                         tf <= LOCUS__MAX_DIRECT_FILTERS,
                     "%s: kernel tile %zu x %zu is outside what the test "
                     "lays out",
                     isa->name, tp, tf))
        return;
    const size_t positions[] = {1, (tp / 2) | 1, tp - 1, tp};
    const size_t filters[] = {1, tf / 2 - 1, tf / 2, tf / 2 + 1, tf - 1, tf};
    for (size_t d = 0; d < COUNT(depths); d++)
        for (size_t s = 0; s < COUNT(steps); s++)
            for (size_t i = 0; i < COUNT(positions); i++)
                for (size_t j = 0; j < COUNT(filters); j++)
                    for (int acc = 0; acc <= 1; acc++)
                        for (int kind = OFFSETS_CONV; kind <= OFFSETS_REVERSED;
                             kind++) {
                            tile_case tc = {depths[d],    steps[s],
                                            positions[i], filters[j],
                                            acc,          (offsets_kind)kind,
                                            tp,           tf};
                            run_tile(isa, &tc);
                        }
}

/* ---- 2. The rule ---- */

static void describe(const char *prefix, const conv_case *cc, char *what,
                     size_t size)
{
    snprintf(what, size,
             "%s n=%zu c=%zu %zux%zu k=%zu kernel %zux%zu stride %zux%zu "
             "pad %zux%zu",
             prefix, cc->n, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s, cc->sh,
             cc->sw, cc->ph, cc->pw);
}

static void expect_fits(const conv_case *cc, const char *isa, int expected)
{
    char what[192];
    describe(isa, cc, what, sizeof what);
    locus__cpu_state state;
    locus__conv_problem pr = test_conv_problem(cc, isa, 1, &state);
    if (!TEST_EXPECT(strcmp(state.isa.name, isa) == 0,
                     "%s: the problem's table is %s", what, state.isa.name))
        return;
    int fits = locus__cpu_direct_fits(&pr);
    TEST_EXPECT(fits == expected, "%s: direct fits is %d, expected %d", what,
                fits, expected);
    size_t bytes = locus__cpu_direct_workspace(&pr);
    if (expected)
        TEST_EXPECT(bytes > 0, "%s: fits, but no workspace", what);
    else if (!pr.state->isa.conv_direct)
        TEST_EXPECT(bytes == 0, "%s: no kernel, but %zu bytes of workspace",
                    what, bytes);
}

/* The layers the rule is checked on. */
static const conv_case layer_3x3_56 = {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1};
static const conv_case layer_1x1_56 = {1, 64, 56, 56, 256, 1, 1, 1, 1, 0, 0};
static const conv_case layer_1x1_s2 = {1, 64, 56, 56, 256, 1, 1, 2, 2, 0, 0};
static const conv_case layer_1x1_small = {1, 64, 14, 14, 32, 1, 1, 1, 1, 0, 0};
static const conv_case layer_1x1_28 = {1, 64, 28, 28, 32, 1, 1, 1, 1, 0, 0};
static const conv_case layer_1x1_28_pad = {1, 64, 26, 26, 32, 1, 1, 1, 1, 1, 1};
static const conv_case layer_1x1_7 = {1, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0};
static const conv_case layer_stem = {1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3};
static const conv_case layer_3x3_14 = {1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1};
static const conv_case layer_few = {1, 64, 56, 56, 7, 3, 3, 1, 1, 1, 1};

/* The rule compares two products of lane fractions: the direct tile's
 * Q / (ceil(Q / tp) tp) * K / (ceil(K / tf) tf) against 0.95 x the
 * implicit GEMM's PQ / (ceil(PQ / nr) nr) * K / (ceil(K / mr) mr). Under
 * avx512 tp x tf = 14 x 32 and mr x nr = 12 x 32:
 *   3x3 64->64 @56:  direct 56/56 * 64/64 = 1; GEMM PQ 3136 = 98 x 32,
 *                    64/72: 0.889, x 0.95 = 0.844. Fits.
 *   1x1 64->256 @56: direct 1 * 256/256 = 1; GEMM 1 * 256/264 = 0.970,
 *                    x 0.95 = 0.921, but 1x1 at stride 1 with an output
 *                    of 3.1 MiB a worker, over the L2 (256 KiB where
 *                    there is no topology, as here), and unpadded with
 *                    PQ 3136 = 98 x 32 filling the GEMM's lanes: the
 *                    implicit GEMM's (conv_direct.c says why). Does not
 *                    fit.
 *   1x1 64->32 @14: 25 KiB of output, inside L2; PQ 196 fills 88% of
 *                    the lanes of 7 micro-panels; direct 1 * 32/32 = 1;
 *                    GEMM 196/224 * 32/36 = 0.778 -> 0.739. Fits.
 *   1x1 64->32 @28: 98 KiB of output; PQ 784 fills 98% of the lanes of 25
 *                    micro-panels, unpadded: the GEMM's, though the lanes
 *                    favour the direct tile (1 against 0.95 * 784/800 *
 *                    32/36 = 0.827). Does not fit.
 *   the same from 26x26 with padding 1: the GEMM would pack it, so the
 *                    lanes decide. Fits.
 *   1x1 64->32 @7:   PQ 49 fills 77%: the lanes decide, direct 7/14 * 1 =
 *                    0.5 against 0.95 * 49/64 * 32/36 = 0.646. Does not
 *                    fit.
 *   1x1/2 64->256 @56: Q 28 = 2 x 14: direct 1; GEMM PQ 784 = 24.5 x 32,
 *                    784/800 * 256/264 = 0.950 -> 0.903. Fits.
 *   7x7/2 3->64 @224 pad 3: Q 112 = 8 x 14: direct 1; GEMM PQ 12544 =
 *                    392 x 32, 64/72: 0.889 -> 0.844. Fits.
 *   3x3 256->256 @14: direct 14/14 * 1 = 1; GEMM 196/224 * 256/264 =
 *                    0.848 -> 0.806. Fits.
 *   7 filters (3x3 64->7 @56): direct 1 * 7/32 = 0.219; GEMM 1 * 7/12 =
 *                    0.583 -> 0.554. Does not fit. */
static void test_fits_avx512(void)
{
    expect_fits(&layer_3x3_56, "avx512", 1);
    expect_fits(&layer_1x1_56, "avx512", 0);
    expect_fits(&layer_1x1_s2, "avx512", 1);
    expect_fits(&layer_1x1_small, "avx512", 1);
    expect_fits(&layer_1x1_28, "avx512", 0);
    expect_fits(&layer_1x1_28_pad, "avx512", 1);
    expect_fits(&layer_1x1_7, "avx512", 0);
    expect_fits(&layer_stem, "avx512", 1);
    expect_fits(&layer_3x3_14, "avx512", 1);
    expect_fits(&layer_few, "avx512", 0);
}

/* Under avx2 tp x tf = 6 x 16 and mr x nr = 6 x 16:
 *   3x3 64->64 @56:  Q 56 in 10 tiles (60 lanes): direct 56/60 * 64/64 =
 *                    0.933; GEMM PQ 3136 = 196 x 16, 64/66: 0.970, x 0.95
 *                    = 0.921. Fits.
 *   7x7/2 3->64 @224 pad 3: Q 112 in 19 tiles (114): direct 0.982; GEMM
 *                    PQ 12544 = 784 x 16, 64/66: 0.970 -> 0.921. Fits.
 *   3x3 256->256 @14: Q 14 in 3 tiles (18): direct 14/18 * 1 = 0.778;
 *                    GEMM 196/208 * 256/258 = 0.942 * 0.992 = 0.935 ->
 *                    0.888. Does not fit.
 *   1x1 64->256 @56: direct 56/60 * 1 = 0.933; GEMM 1 * 256/258 = 0.992
 *                    -> 0.943. Does not fit (by 1%).
 *   7 filters (3x3 64->7 @56): direct 0.933 * 7/16 = 0.408; GEMM 1 * 7/12
 *                    = 0.583 -> 0.554. Does not fit. */
static void test_fits_avx2(void)
{
    expect_fits(&layer_3x3_56, "avx2", 1);
    expect_fits(&layer_stem, "avx2", 1);
    expect_fits(&layer_3x3_14, "avx2", 0);
    expect_fits(&layer_1x1_56, "avx2", 0);
    expect_fits(&layer_few, "avx2", 0);
}

/* The generic table has no direct kernel: nothing fits, and there is no
 * plan to give a workspace. Any CPU runs it. */
static void test_fits_generic(void)
{
    const conv_case *layers[] = {&layer_3x3_56, &layer_1x1_56, &layer_stem,
                                 &layer_3x3_14};
    for (size_t i = 0; i < COUNT(layers); i++)
        expect_fits(layers[i], "generic", 0);
}

/* ---- 3. Through the public API ---- */

/* A context, its cpu device and the device's worker count; name says
 * which in the messages. */
typedef struct test_target {
    const char *name;
    locus_context *ctx;
    locus_device *dev;
    int workers;
} test_target;

/* The real machine with its default workers and with one; a synthetic
 * 3-core machine with three workers and with one (more workers than
 * hardware threads is an error, and this machine may have 2). Bitwise
 * equality is asked within a machine only: the depth block follows the
 * L2 the topology reports, so two machines may cut the depth differently
 * and sum in another order. */
enum { REAL_DEFAULT, REAL_ONE, SYNTHETIC_THREE, SYNTHETIC_ONE, TARGETS };

/* Contexts forced to isa, the table run_case asks the rule about, so that
 * a LOCUS_CPU_ISA in the environment cannot change the kernel. */
static int open_targets(test_target *t, const char *isa)
{
    static const char *const names[TARGETS] = {"default workers", "1 worker",
                                               "synthetic 3 workers",
                                               "synthetic 1 worker"};
    const char *synthetic = "synthetic:core:3 pu:1";
    t[REAL_DEFAULT].ctx = test_cpu_context(isa, NULL, NULL);
    t[REAL_ONE].ctx = test_cpu_context(isa, NULL, "1");
    t[SYNTHETIC_THREE].ctx = test_cpu_context(isa, synthetic, "3");
    t[SYNTHETIC_ONE].ctx = test_cpu_context(isa, synthetic, "1");
    int ok = 1;
    for (int i = 0; i < TARGETS; i++) {
        t[i].name = names[i];
        t[i].dev = NULL;
        /* The backend's problem.workers, which the workspace counts (a
         * band per worker): the device's compute units. */
        locus_device_info info;
        locus_device_info_init(&info);
        ok &=
            TEST_EXPECT(t[i].ctx != NULL, "%s: no context forced to %s",
                        names[i], isa) &&
            TEST_OK(locus_device_find(t[i].ctx, "cpu", &t[i].dev)) ==
                LOCUS_SUCCESS &&
            TEST_OK(locus_device_get_info(t[i].dev, &info)) == LOCUS_SUCCESS &&
            TEST_EXPECT(info.compute_units > 0, "%s: %d compute units",
                        names[i], info.compute_units);
        t[i].workers = info.compute_units;
    }
    return ok;
}

/* Runs cc on one target over a NaN-poisoned output into out; checks that
 * the record shows the direct plan's workspace under isa for the target's
 * workers (the implicit GEMM's is another size: the sign the direct path
 * ran). 0 on a failure. */
static int run_on(const test_target *t, const char *isa, const conv_case *cc,
                  const float *in, const float *f, float *out, size_t out_count,
                  const char *case_what)
{
    char what[320];
    snprintf(what, sizeof what, "%s [%s]", case_what, t->name);
    locus__cpu_state state;
    locus__conv_problem pr = test_conv_problem(cc, isa, t->workers, &state);
    size_t direct_bytes = locus__cpu_direct_workspace(&pr);
    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    locus_conv2d_desc desc;
    conv_describe(cc, &desc);
    desc.algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    locus_buffer *bin = test_upload_floats(t->ctx, in, in_count);
    locus_buffer *bf = test_upload_floats(t->ctx, f, f_count);
    locus_buffer *bout = NULL;
    locus_record record;
    int ok = bin && bf &&
             TEST_OK(locus_buffer_create(t->ctx, out_count * sizeof *out, NULL,
                                         &bout)) == LOCUS_SUCCESS &&
             conv_run_poisoned(t->ctx, t->dev, &desc, bin, bf, bout, out,
                               out_count, &record, what);
    if (ok) {
        TEST_EXPECT(strcmp(record.algorithm, "implicit") == 0,
                    "%s: record algorithm \"%s\", expected \"implicit\"", what,
                    record.algorithm);
        TEST_EXPECT(record.workspace_bytes == direct_bytes,
                    "%s: record shows %llu bytes of workspace, the direct "
                    "plan %zu",
                    what, (unsigned long long)record.workspace_bytes,
                    direct_bytes);
    }
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
    return ok;
}

static void expect_same(const float *a, const float *b, size_t count,
                        const char *what, const char *a_name,
                        const char *b_name)
{
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0 && differ++ == 0)
            first = i;
    TEST_EXPECT(differ == 0,
                "%s: %s and %s differ in %zu elements, the first %zu: %.9g "
                "vs %.9g",
                what, a_name, b_name, differ, first, (double)a[first],
                (double)b[first]);
}

static void run_case(const test_target *t, const char *isa, const conv_case *cc)
{
    char what[192], prefix[32];
    snprintf(prefix, sizeof prefix, "%s direct", isa);
    describe(prefix, cc, what, sizeof what);
    locus__cpu_state state;
    locus__conv_problem pr = test_conv_problem(cc, isa, 1, &state);
    if (!TEST_EXPECT(locus__cpu_direct_fits(&pr),
                     "%s: the direct path does not take it", what))
        return;
    size_t p = pr.shape.out_h, q = pr.shape.out_w;
    size_t out_count = cc->n * cc->k * p * q;
    float *in = test_random_floats(cc->n * cc->c * cc->h * cc->w);
    float *f = test_random_floats(cc->k * cc->c * cc->r * cc->s);
    float *out[TARGETS + 1] = {NULL};
    int ok = in && f;
    for (int i = 0; i <= TARGETS; i++)
        ok &= (out[i] = malloc(out_count * sizeof(float))) != NULL;
    if (!TEST_EXPECT(ok, "%s: out of memory", what))
        goto done;
    /* out[TARGETS]: the default target's second run. */
    for (int i = 0; i <= TARGETS; i++)
        if (!run_on(&t[i < TARGETS ? i : REAL_DEFAULT], isa, cc, in, f, out[i],
                    out_count, what))
            goto done;
    conv_check_output(cc, p, q, in, f, out[REAL_DEFAULT], NULL, NULL, what);
    conv_check_output(cc, p, q, in, f, out[SYNTHETIC_THREE], NULL, NULL, what);
    expect_same(out[REAL_DEFAULT], out[TARGETS], out_count, what,
                "the first default run", "the second");
    expect_same(out[REAL_DEFAULT], out[REAL_ONE], out_count, what,
                t[REAL_DEFAULT].name, t[REAL_ONE].name);
    expect_same(out[SYNTHETIC_THREE], out[SYNTHETIC_ONE], out_count, what,
                t[SYNTHETIC_THREE].name, t[SYNTHETIC_ONE].name);
done:
    free(in);
    free(f);
    for (int i = 0; i <= TARGETS; i++)
        free(out[i]);
}

/* Each shape fits the direct rule under its table (asserted in run_case),
 * and each is above the 1 MFLOP below which the whole call runs on the
 * calling thread (cpu_inline.h), so the worker counts differ for real.
 * Where the input is read in place: no padding and a row's last tile
 * inside the row, (tp ceil(Q / tp) - 1) stride + S <= W. */

/* avx512, 14 x 32 tiles. */
static const conv_case api_cases_avx512[] = {
    /* n  c     h   w   k    r  s  sh sw ph pw */
    /* K 62: a group of 30; Q 27: tiles of 14 and 13 */
    {1, 3, 27, 27, 62, 3, 3, 1, 1, 1, 1},
    /* K 94, Q 13 (one partial tile per row), batch 3, C 64 */
    {3, 64, 13, 13, 94, 3, 3, 1, 1, 1, 1},
    /* K 270: a last group of 14 filters, under the tile's second half */
    {1, 3, 14, 14, 270, 3, 3, 1, 1, 1, 1},
    /* K 30: one partial group, stride 2 */
    {1, 16, 28, 28, 30, 3, 3, 2, 2, 1, 1},
    /* pad 0 read in place: 3x3 on rows of 16 (Q 14), C 1, batch 3 */
    {3, 1, 30, 16, 64, 3, 3, 1, 1, 0, 0},
    /* pad 0 read in place: 1x3, Q 28 (a 1x1 stride-1 layer's path
     * depends on the machine's L2) */
    {3, 64, 28, 30, 64, 1, 3, 1, 1, 0, 0},
    /* pad 0 read in place at strides 2 (1x1 and 3x3) and 3 (1x1) */
    {3, 32, 14, 28, 64, 1, 1, 2, 2, 0, 0},
    {1, 16, 20, 29, 64, 3, 3, 2, 2, 0, 0},
    {2, 32, 40, 40, 64, 1, 1, 3, 3, 0, 0},
    /* pad 0 copied: a 1x3 row of 27 ends in a partial tile */
    {1, 64, 10, 29, 32, 1, 3, 1, 1, 0, 0},
    /* the 7x7 stride-2 pad-3 stem at a small size */
    {3, 3, 20, 28, 64, 7, 7, 2, 2, 3, 3},
    /* stride 3, pad 1, K 62 */
    {2, 8, 17, 41, 62, 3, 3, 3, 3, 1, 1},
    /* non-square: 3x5 pad 1x2; 1x7 stride 1x2 pad 0x3 */
    {1, 4, 12, 28, 32, 3, 5, 1, 1, 1, 2},
    {3, 3, 10, 27, 64, 1, 7, 1, 2, 0, 3},
    /* more output rows than a band holds (16): one worker's bands are of
     * 16, 16 and 1 rows, and of 16 and 1 at stride 2 with two filter
     * groups (the band kept from one group to the next) */
    {2, 8, 33, 14, 64, 3, 3, 1, 1, 1, 1},
    {1, 8, 34, 28, 62, 3, 3, 2, 2, 1, 1},
    /* CRS 18432: several depth blocks for any L2 up to 4 MiB (the block
     * is half the L2 over 128 bytes a step), the later ones adding */
    {1, 2048, 2, 14, 32, 3, 3, 1, 1, 1, 1},
};

/* avx2, 6 x 16 tiles: output widths at or near multiples of 6, filter
 * counts at or near multiples of 16. Most of the shapes above do not fit
 * here (14-wide rows waste 4 of 18 lanes). */
static const conv_case api_cases_avx2[] = {
    /* n  c     h   w   k    r  s  sh sw ph pw */
    /* K 62: groups of 16, 16, 16 and 14; Q 17: tiles of 6, 6 and 5 */
    {1, 4, 17, 17, 62, 3, 3, 1, 1, 1, 1},
    /* K 94 (a last group of 14), Q 12, batch 3, C 64 */
    {3, 64, 12, 12, 94, 3, 3, 1, 1, 1, 1},
    /* K 68: a last group of 4 filters, under the tile's second half (its
     * second transpose stores nothing) */
    {1, 64, 3, 12, 68, 3, 3, 1, 1, 1, 1},
    /* Q 25: tiles of 6, 6, 6, 6 and 1 */
    {1, 128, 3, 25, 32, 3, 3, 1, 1, 1, 1},
    /* K 30: groups of 16 and 14, stride 2, Q 12 */
    {1, 16, 25, 24, 30, 3, 3, 2, 2, 1, 1},
    /* Q 56: nine tiles of 6 and one of 2; K 16: one whole group */
    {1, 4, 56, 56, 16, 3, 3, 1, 1, 1, 1},
    /* pad 0 read in place: 3x3 on rows of 14 (Q 12), C 1, batch 3 */
    {3, 1, 30, 14, 64, 3, 3, 1, 1, 0, 0},
    /* pad 0 read in place: 1x3, Q 30 */
    {2, 64, 30, 32, 64, 1, 3, 1, 1, 0, 0},
    /* pad 0 read in place at strides 2 (1x1 and 3x3) and 3 (1x1), Q 12 */
    {3, 32, 24, 24, 64, 1, 1, 2, 2, 0, 0},
    {1, 16, 21, 25, 64, 3, 3, 2, 2, 0, 0},
    {2, 32, 36, 34, 64, 1, 1, 3, 3, 0, 0},
    /* pad 0 copied: a 1x3 row of 17 ends in a partial tile */
    {1, 64, 16, 19, 32, 1, 3, 1, 1, 0, 0},
    /* the 7x7 stride-2 pad-3 stem at a small size (Q 12) */
    {3, 3, 20, 24, 64, 7, 7, 2, 2, 3, 3},
    /* stride 3, pad 1, K 62, Q 17 */
    {2, 8, 17, 50, 62, 3, 3, 3, 3, 1, 1},
    /* non-square: 3x5 pad 1x2 (Q 30); 1x7 stride 1x2 pad 0x3 (Q 12) */
    {1, 4, 12, 30, 32, 3, 5, 1, 1, 1, 2},
    {3, 3, 11, 24, 64, 1, 7, 1, 2, 0, 3},
    /* more output rows than a band holds (16): bands of 16, 16 and 1
     * rows, and of 16 and 1 at stride 2 with four filter groups (the band
     * kept from one group to the next) */
    {2, 8, 33, 12, 64, 3, 3, 1, 1, 1, 1},
    {1, 8, 34, 24, 62, 3, 3, 2, 2, 1, 1},
    /* CRS 36864: several depth blocks for any L2 up to 4 MiB (the block
     * is half the L2 over 64 bytes a step), the later ones adding */
    {1, 4096, 2, 12, 16, 3, 3, 1, 1, 1, 1},
};

static void test_api(const char *isa, const conv_case *cases, size_t count)
{
    /* LOCUS_TEST_ISAS=best (CI's ThreadSanitizer stage) gives no context
     * forced to a set below the best: on an AVX-512 machine the avx2
     * table's kernel and rule are checked above, its API cases not. */
    if (test_cpu_isa_left_out(isa))
        return;
    test_target t[TARGETS] = {{0}};
    if (open_targets(t, isa))
        for (size_t i = 0; i < count; i++)
            run_case(t, isa, &cases[i]);
    for (int i = 0; i < TARGETS; i++)
        locus_context_destroy(t[i].ctx);
}

/* ---- The tables ---- */

/* A table with a direct kernel: whether this CPU runs it, the tiles the
 * expectations of parts 2 and 3 were worked out for (direct positions x
 * filters, the implicit GEMM's mr x nr), and those expectations. */
typedef struct direct_table {
    const char *name;
    int (*cpu_runs)(void);
    size_t positions, filters, mr, nr;
    void (*test_fits)(void);
    const conv_case *api_cases;
    size_t api_count;
} direct_table;

static const direct_table tables[] = {
    {"avx2", test_cpu_has_avx2_fma, 6, 16, 6, 16, test_fits_avx2,
     api_cases_avx2, COUNT(api_cases_avx2)},
    {"avx512", test_cpu_has_avx512f, 14, 32, 12, 32, test_fits_avx512,
     api_cases_avx512, COUNT(api_cases_avx512)},
};

/* Parts 1-3 under one table the CPU runs. */
static void test_table(const direct_table *dt)
{
    locus__cpu_isa isa;
    locus__cpu_isa_init(&isa, dt->name);
    printf("isa %s\n", dt->name);
    fflush(stdout);
    if (!TEST_EXPECT(strcmp(isa.name, dt->name) == 0 && isa.conv_direct,
                     "%s: the CPU runs it, but the table is %s and %s a "
                     "direct kernel",
                     dt->name, isa.name, isa.conv_direct ? "has" : "lacks"))
        return;
    if (!TEST_EXPECT(isa.direct_positions == dt->positions &&
                         isa.direct_filters == dt->filters &&
                         isa.mr == dt->mr && isa.nr == dt->nr,
                     "%s: direct tile %zu x %zu and GEMM tile %zu x %zu, "
                     "the test's expectations are for %zu x %zu and %zu x "
                     "%zu",
                     dt->name, isa.direct_positions, isa.direct_filters, isa.mr,
                     isa.nr, dt->positions, dt->filters, dt->mr, dt->nr))
        return;
    test_kernel(&isa);
    dt->test_fits();
    test_api(dt->name, dt->api_cases, dt->api_count);
}

int main(int argc, char **argv)
{
    int runs[COUNT(tables)], any = 0;
    for (size_t i = 0; i < COUNT(tables); i++)
        any |= runs[i] = tables[i].cpu_runs();
    if (!any) {
        printf("skipping: the CPU runs no kernel table with a direct kernel "
               "(avx2 needs AVX2 and FMA, avx512 AVX-512F)\n");
        return TEST_EXIT_SKIP;
    }
    test_seed(argc, argv);
    for (size_t i = 0; i < COUNT(tables); i++) {
        if (runs[i])
            test_table(&tables[i]);
        else
            printf("skipping %s: not supported by this CPU\n", tables[i].name);
    }
    test_fits_generic();
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
