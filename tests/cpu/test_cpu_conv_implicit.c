/* The implicit-GEMM convolution (LOCUS_CONV_IMPLICIT_GEMM) against a direct
 * float64 loop, under every ISA the CPU has (forced through the context
 * options; an ISA it lacks is skipped with a note): strides 1, 2 and 3,
 * padding 0, 1 and 3, kernels 1, 3, 5 and 7, non-square kernels, images
 * and strides, odd sizes, batch 1 and 3, input channels 1 to 64, filter
 * counts that are not multiples of the register tile's rows (1, 5, 13,
 * 47, 130) and 64 and 256 (many row panels, packed by claims), shapes deep and
 * wide enough to cross the depth blocks and the output blocks. The output is
 * poisoned with NaN before each run, so an element left unwritten fails; each
 * case runs twice and the two results must be bitwise identical.
 *
 * 1x1 stride-1 layers read their image in place (the strided kernel), but
 * where the table has a direct kernel the rule (locus__cpu_direct_fits,
 * internal) sends small ones down the direct path; so 1x1 layers whose
 * output share exceeds the default L2 also run on a synthetic machine of
 * three cores and no reported caches, asserted to take the GEMM first:
 * whole and partial micro-panels, filter counts with a partial row panel,
 * several depth blocks. */
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "conv_direct.h"
#include "conv_reference.h"
#include "cpu_contexts.h"
#include "cpu_conv_problem.h"
#include "test_buffers.h"
#include "test_util.h"

static const char *current_isa = "best";

/* Runs the convolution over a NaN-poisoned output into out and checks
 * that the record names the implicit GEMM and its workspace. */
static int run_once(locus_context *ctx, locus_device *dev,
                    const locus_conv2d_desc *desc, locus_buffer *bin,
                    locus_buffer *bf, locus_buffer *bout, float *out,
                    size_t out_count, const char *what)
{
    locus_record record;
    if (!conv_run_poisoned(ctx, dev, desc, bin, bf, bout, out, out_count,
                           &record, what))
        return 0;
    TEST_EXPECT(strcmp(record.algorithm, "implicit") == 0,
                "%s: record algorithm is \"%s\", expected \"implicit\"", what,
                record.algorithm);
    TEST_EXPECT(record.workspace_bytes > 0, "%s: record shows no workspace",
                what);
    return 1;
}

static void run_case(locus_context *ctx, locus_device *dev, const conv_case *cc)
{
    char what[224];
    snprintf(what, sizeof what,
             "implicit [%s] n=%zu c=%zu %zux%zu k=%zu kernel %zux%zu stride "
             "%zux%zu pad %zux%zu",
             current_isa, cc->n, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s,
             cc->sh, cc->sw, cc->ph, cc->pw);

    locus_conv2d_desc desc;
    conv_describe(cc, &desc);
    desc.algorithm = LOCUS_CONV_IMPLICIT_GEMM;
    size_t p_out = 0, q_out = 0;
    if (TEST_OK(locus_conv2d_output_shape(&desc, &p_out, &q_out)) !=
        LOCUS_SUCCESS)
        return;

    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    size_t out_count = cc->n * cc->k * p_out * q_out;
    float *in = test_random_floats(in_count);
    float *f = test_random_floats(f_count);
    float *out = malloc(out_count * sizeof *out);
    float *again = malloc(out_count * sizeof *again);
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f && out && again, "%s: out of memory", what))
        goto free_host;
    bin = test_upload_floats(ctx, in, in_count);
    bf = test_upload_floats(ctx, f, f_count);
    if (!bin || !bf ||
        TEST_OK(locus_buffer_create(ctx, out_count * sizeof *out, NULL,
                                    &bout)) != LOCUS_SUCCESS)
        goto destroy_buffers;

    if (!run_once(ctx, dev, &desc, bin, bf, bout, out, out_count, what))
        goto destroy_buffers;
    conv_check_output(cc, p_out, q_out, in, f, out, NULL, NULL, what);
    if (!run_once(ctx, dev, &desc, bin, bf, bout, again, out_count, what))
        goto destroy_buffers;
    TEST_EXPECT(memcmp(out, again, out_count * sizeof *out) == 0,
                "%s: two runs differ", what);

destroy_buffers:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
free_host:
    free(in);
    free(f);
    free(out);
    free(again);
}

/* Every kernel size, stride and padding, with batch, channels, filter
 * counts and odd image sizes varied along. */
static void test_square(locus_context *ctx, locus_device *dev)
{
    static const size_t filters[] = {1, 5, 13, 64};
    for (size_t index = 0; index < CONV_GRID_CASES; index++) {
        conv_case cc = conv_grid_case(index);
        cc.c = 1 + index % 17; /* 1 .. 17 */
        cc.k = filters[index % 4];
        run_case(ctx, dev, &cc);
    }
}

static void test_odd_shapes(locus_context *ctx, locus_device *dev)
{
    static const conv_case cases[] = {
        /* n  c   h   w   k   r  s  sh sw ph pw */
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
        {1, 2, 1, 1, 5, 3, 3, 1, 1, 1, 1},
        {3, 3, 13, 9, 13, 1, 3, 1, 2, 0, 1},
        {1, 4, 11, 17, 5, 3, 1, 2, 1, 1, 0},
        {3, 2, 15, 8, 3, 5, 3, 2, 2, 3, 0},
        {1, 3, 9, 21, 2, 3, 7, 1, 1, 0, 3},
        {3, 1, 7, 7, 6, 7, 5, 2, 1, 3, 1},
        {1, 5, 6, 23, 13, 1, 7, 1, 2, 0, 3},
        /* stride 3: the packing's generic path */
        {1, 3, 20, 19, 7, 3, 3, 3, 3, 1, 1},
        {3, 2, 17, 23, 5, 5, 4, 3, 2, 2, 1},
        /* padding wider than the kernel: border outputs all padding */
        {3, 2, 5, 5, 2, 1, 1, 2, 2, 3, 3},
        /* kernel exactly the padded size: one output position */
        {1, 3, 5, 4, 4, 7, 6, 1, 1, 1, 1},
        /* images narrower than a micro-panel: several rows per panel */
        {3, 17, 3, 2, 13, 1, 1, 1, 1, 0, 0},
        {1, 6, 4, 3, 5, 3, 3, 1, 1, 1, 1},
        /* 1x1 stride 1 unpadded: the image is the column matrix */
        {3, 7, 13, 11, 9, 1, 1, 1, 1, 0, 0},
        {1, 16, 17, 19, 64, 1, 1, 1, 1, 0, 0},
        /* deep: several depth blocks (CRS 425, 576) */
        {1, 17, 9, 11, 13, 5, 5, 1, 1, 2, 2},
        {1, 64, 8, 9, 5, 3, 3, 1, 1, 1, 1},
        /* wide: several output blocks and every panel edge (PQ 3072) */
        {1, 3, 64, 48, 64, 3, 3, 1, 1, 1, 1},
        {3, 4, 33, 71, 13, 3, 3, 1, 1, 1, 1},
        /* the 7x7 stride-2 stem at a small size */
        {3, 3, 29, 31, 64, 7, 7, 2, 2, 3, 3},
        /* stride 2, output rows narrower than a micro-panel */
        {1, 3, 15, 14, 6, 3, 3, 2, 2, 1, 1},
        /* the filter packed by panel claims: many row panels split by K
         * (small image), and shared by a position split (batch 3), with
         * depth blocks that are not multiples of the 8-step transpose
         * (CRS 261) and a last panel of 5 rows */
        {1, 32, 5, 6, 256, 3, 3, 1, 1, 1, 1},
        {3, 29, 12, 11, 47, 3, 3, 1, 1, 1, 1},
        {3, 64, 20, 20, 130, 3, 3, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(ctx, dev, &cases[i]);
    for (int i = 0; i < 8; i++) {
        conv_case cc = conv_random_case(17, 25, 20);
        run_case(ctx, dev, &cc);
    }
}

/* See the top: 1x1 layers on the GEMM, whose image is read in place. */
static void test_in_place(const char *isa)
{
    static const conv_case cases[] = {
        /* n  c    h   w   k    r  s  sh sw ph pw */
        {2, 16, 31, 35, 130, 1, 1, 1, 1, 0, 0},  /* PQ 1085: a partial panel */
        {1, 300, 32, 64, 100, 1, 1, 1, 1, 0, 0}, /* PQ 2048, 3 depth blocks */
    };
    const int workers = 3;
    locus_context *ctx = test_cpu_context(isa, "synthetic:core:3 pu:1", "3");
    if (!ctx)
        return;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            locus__cpu_state state;
            locus__conv_problem pr =
                test_conv_problem(&cases[i], isa, workers, &state);
            if (TEST_EXPECT(!locus__cpu_direct_fits(&pr),
                            "[%s] case %zu: the rule sends it down the "
                            "direct path, not the GEMM under test",
                            isa, i))
                run_case(ctx, dev, &cases[i]);
        }
    }
    locus_context_destroy(ctx);
}

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    current_isa = isa;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_square(ctx, dev);
        test_odd_shapes(ctx, dev);
    }
    locus_context_destroy(ctx);
    test_in_place(isa);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
