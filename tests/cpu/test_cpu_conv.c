/* locus_conv2d on the CPU devices against a direct float64 loop: strides 1
 * and 2, padding 0, 1 and 3, square and non-square kernels from 1 to 7,
 * batch 1 and 3, several input channels, odd image sizes, the output
 * poisoned with NaN beforehand; each algorithm (im2col, MEC, implicit
 * GEMM, auto); the record; winograd, which the CPU does not offer,
 * refused. test_cpu_mec.c and test_cpu_conv_implicit.c hold MEC's and the
 * implicit GEMM's own tests. */
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "conv_reference.h"
#include "cpu_contexts.h"
#include "test_buffers.h"
#include "test_util.h"

/* A geometry and the algorithm asked to compute it. */
typedef struct algo_case {
    conv_case shape;
    locus_conv_algorithm algorithm;
} algo_case;

static void run_case(locus_context *ctx, locus_device *dev, const algo_case *ac)
{
    const conv_case *cc = &ac->shape;
    char what[192];
    snprintf(what, sizeof what,
             "conv2d %s n=%zu c=%zu %zux%zu k=%zu kernel %zux%zu stride "
             "%zux%zu pad %zux%zu",
             locus_conv_algorithm_str(ac->algorithm), cc->n, cc->c, cc->h,
             cc->w, cc->k, cc->r, cc->s, cc->sh, cc->sw, cc->ph, cc->pw);

    locus_conv2d_desc desc;
    conv_describe(cc, &desc);
    desc.algorithm = ac->algorithm;
    size_t p_out = 0, q_out = 0;
    if (TEST_OK(locus_conv2d_output_shape(&desc, &p_out, &q_out)) !=
        LOCUS_SUCCESS)
        return;
    TEST_EXPECT(p_out == (cc->h + 2 * cc->ph - cc->r) / cc->sh + 1 &&
                    q_out == (cc->w + 2 * cc->pw - cc->s) / cc->sw + 1,
                "%s: output shape %zux%zu", what, p_out, q_out);

    size_t in_count = cc->n * cc->c * cc->h * cc->w;
    size_t f_count = cc->k * cc->c * cc->r * cc->s;
    size_t out_count = cc->n * cc->k * p_out * q_out;
    float *in = test_random_floats(in_count);
    float *f = test_random_floats(f_count);
    float *out = malloc(out_count * sizeof *out);
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f && out, "%s: out of memory", what))
        goto free_host;

    bin = test_upload_floats(ctx, in, in_count);
    bf = test_upload_floats(ctx, f, f_count);
    if (!bin || !bf ||
        TEST_OK(locus_buffer_create(ctx, out_count * sizeof *out, NULL,
                                    &bout)) != LOCUS_SUCCESS)
        goto destroy_buffers;

    /* The output is poisoned with NaN first: an unwritten element fails. */
    locus_record record;
    if (!conv_run_poisoned(ctx, dev, &desc, bin, bf, bout, out, out_count,
                           &record, what))
        goto destroy_buffers;
    double flops = 2.0 * (double)out_count * (double)(cc->c * cc->r * cc->s);
    TEST_EXPECT(strcmp(record.op, "conv2d") == 0,
                "%s: record op is \"%s\", expected \"conv2d\"", what,
                record.op);
    /* auto names what it ran, never "auto". */
    const char *expected = locus_conv_algorithm_str(ac->algorithm);
    if (ac->algorithm == LOCUS_CONV_AUTO)
        expected = strcmp(record.algorithm, "mec") == 0        ? "mec"
                   : strcmp(record.algorithm, "implicit") == 0 ? "implicit"
                                                               : "im2col";
    TEST_EXPECT(strcmp(record.algorithm, expected) == 0,
                "%s: record algorithm is \"%s\", expected \"%s\"", what,
                record.algorithm, expected);
    TEST_EXPECT(record.workspace_bytes > 0, "%s: record shows no workspace",
                what);
    TEST_EXPECT(record.flops == flops, "%s: record flops %.17g, expected %.17g",
                what, record.flops, flops);
    TEST_EXPECT(strncmp(record.device, "cpu", 3) == 0,
                "%s: record device is \"%s\", expected a cpu selector", what,
                record.device);
    conv_check_output(cc, p_out, q_out, in, f, out, NULL, NULL, what);

destroy_buffers:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
free_host:
    free(in);
    free(f);
    free(out);
}

/* Every combination of square kernel, stride and padding, with the other
 * dimensions varied along so batch, channels and odd sizes all appear. */
static void test_square(locus_context *ctx, locus_device *dev, int all)
{
    for (size_t index = 0; index < CONV_GRID_CASES; index++) {
        if (!all && index % 4 != 0)
            continue;
        conv_case cc = conv_grid_case(index);
        cc.c = 1 + index % 3 * 2; /* 1, 3, 5 */
        cc.k = 1 + index % 4;
        algo_case ac = {cc, (locus_conv_algorithm)(index % 4)};
        run_case(ctx, dev, &ac);
    }
}

static void test_odd_shapes(locus_context *ctx, locus_device *dev)
{
    static const algo_case cases[] = {
        /* n  c   h   w   k   r  s  sh sw ph pw */
        {{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, LOCUS_CONV_AUTO},
        {{1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1}, LOCUS_CONV_AUTO},
        {{3, 3, 13, 9, 4, 1, 3, 1, 2, 0, 1}, LOCUS_CONV_AUTO},
        {{1, 4, 11, 17, 5, 3, 1, 2, 1, 1, 0}, LOCUS_CONV_MEC},
        {{3, 2, 15, 8, 3, 5, 3, 2, 2, 3, 0}, LOCUS_CONV_AUTO},
        {{1, 3, 9, 21, 2, 3, 7, 1, 1, 0, 3}, LOCUS_CONV_IM2COL},
        {{3, 1, 7, 7, 6, 7, 5, 2, 1, 3, 1}, LOCUS_CONV_MEC},
        {{1, 5, 6, 23, 3, 1, 7, 1, 2, 0, 3}, LOCUS_CONV_AUTO},
        /* padding wider than the kernel: border outputs are all padding */
        {{3, 2, 5, 5, 2, 1, 1, 2, 2, 3, 3}, LOCUS_CONV_AUTO},
        /* kernel exactly the padded size: one output position */
        {{1, 3, 5, 4, 4, 7, 6, 1, 1, 1, 1}, LOCUS_CONV_AUTO},
        /* large enough to cross the GEMM's blocks (CRS 144, K 70, PQ 2115)
         */
        {{2, 16, 47, 45, 70, 3, 3, 1, 1, 1, 1}, LOCUS_CONV_AUTO},
        {{2, 16, 47, 45, 70, 3, 3, 1, 1, 1, 1}, LOCUS_CONV_MEC},
        /* 1x1, stride 1, no padding: im2col reads the input in place */
        {{3, 7, 13, 11, 9, 1, 1, 1, 1, 0, 0}, LOCUS_CONV_IM2COL},
        {{3, 7, 13, 11, 9, 1, 1, 1, 1, 0, 0}, LOCUS_CONV_IMPLICIT_GEMM},
        {{2, 16, 47, 45, 70, 3, 3, 1, 1, 1, 1}, LOCUS_CONV_IMPLICIT_GEMM},
        {{1, 3, 9, 21, 2, 3, 7, 1, 1, 0, 3}, LOCUS_CONV_IMPLICIT_GEMM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(ctx, dev, &cases[i]);
    for (int i = 0; i < 8; i++) {
        algo_case ac = {conv_random_case(6, 25, 8),
                        (locus_conv_algorithm)(i % 4)};
        run_case(ctx, dev, &ac);
    }
}

/* Winograd is the GPU backends' only so far: the CPU refuses it by name, even
 * for the 3x3 stride-1 shape it applies to, and leaves the output alone. */
static void test_winograd_refused(locus_context *ctx, locus_device *dev)
{
    const conv_case cc = {1, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1};
    locus_conv2d_desc desc;
    conv_describe(&cc, &desc);
    desc.algorithm = LOCUS_CONV_WINOGRAD;
    TEST_EXPECT(strcmp(locus_conv_algorithm_str(desc.algorithm), "winograd") ==
                    0,
                "locus_conv_algorithm_str(LOCUS_CONV_WINOGRAD) is \"%s\"",
                locus_conv_algorithm_str(desc.algorithm));
    float *in = test_random_floats(cc.n * cc.c * cc.h * cc.w);
    float *f = test_random_floats(cc.k * cc.c * cc.r * cc.s);
    locus_buffer *bin = NULL, *bf = NULL, *bout = NULL;
    if (!TEST_EXPECT(in && f, "winograd refusal: out of memory"))
        goto free_host;
    bin = test_upload_floats(ctx, in, cc.n * cc.c * cc.h * cc.w);
    bf = test_upload_floats(ctx, f, cc.k * cc.c * cc.r * cc.s);
    if (!bin || !bf ||
        TEST_OK(locus_buffer_create(ctx, cc.n * cc.k * 6 * 6 * sizeof(float),
                                    NULL, &bout)) != LOCUS_SUCCESS)
        goto destroy_buffers;
    locus_status status = locus_conv2d(ctx, dev, &desc, bin, bf, bout, NULL);
    TEST_EXPECT(status == LOCUS_ERROR_NOT_SUPPORTED &&
                    strstr(locus_last_error(), "winograd") != NULL,
                "winograd conv2d on the cpu: %s (%s), expected "
                "LOCUS_ERROR_NOT_SUPPORTED naming winograd",
                locus_status_name(status), locus_last_error());

destroy_buffers:
    locus_buffer_destroy(bin);
    locus_buffer_destroy(bf);
    locus_buffer_destroy(bout);
free_host:
    free(in);
    free(f);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    locus_context *ctx = NULL;
    if (TEST_OK(locus_context_create(NULL, &ctx)) != LOCUS_SUCCESS)
        return 1;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS) {
        test_square(ctx, dev, 1);
        test_odd_shapes(ctx, dev);
        test_winograd_refused(ctx, dev);
    }

    size_t at = 0;
    for (locus_device *d; (d = test_next_other_cpu_device(ctx, dev, &at));)
        test_square(ctx, d, 0);

    locus_context_destroy(ctx);
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
