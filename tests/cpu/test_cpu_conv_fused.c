/* A dense NCHW f32 conv layer with a bias and an activation (BN folded,
 * as in ResNet-50) runs 0.2's implicit GEMM or direct kernel with the
 * bias and activation applied where they store the output
 * (backends/cpu/conv_epilogue.h). Its answers must be the very bits of the
 * plain convolution followed by act(x + bias) in f32, as the separate
 * epilogue pass gave: on shapes that take each path and each edge (1x1
 * read in place, padded and strided 3x3 and 7x7, filters past the last
 * whole row panel or filter group, positions past the last whole tile,
 * several depth blocks), with and without a bias, each activation, every
 * ISA, the output poisoned with NaN, and inputs holding NaN and
 * infinities (which the activations must pass on as the f32 arithmetic
 * gives them: NaN stays NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "cpu_contexts.h"
#include "test_util.h"

typedef struct dense_case {
    size_t c, h, k, r, stride, pad;
} dense_case;

/* Each above the inline size, so 0.2's kernels run on the workers. */
static const dense_case cases[] = {
    {48, 20, 37, 1, 1, 0},  /* 1x1 in place, 400 positions, K % 12, 32 */
    {256, 7, 50, 1, 1, 0},  /* 7x7: two tiles of 32, one partial */
    {16, 14, 62, 3, 1, 1},  /* 3x3 padded, the direct tile's 14 wide, K % 32 */
    {20, 13, 64, 3, 1, 1},  /* the direct kernel's last tile partial */
    {40, 15, 29, 3, 2, 1},  /* strided */
    {3, 30, 20, 7, 2, 3},   /* the stem's 7x7/2 */
    {128, 7, 20, 3, 1, 1},  /* 1152 deep: several depth blocks */
    {64, 17, 110, 1, 2, 0}, /* 1x1 strided: packed, not in place */
};
#define CASE_COUNT (sizeof cases / sizeof *cases)

static size_t out_size(const dense_case *dc)
{
    return (dc->h + 2 * dc->pad - dc->r) / dc->stride + 1;
}

static float activate(locus_activation act, float x)
{
    if (act != LOCUS_ACTIVATION_NONE)
        x = x < 0.0f ? 0.0f : x;
    if (act == LOCUS_ACTIVATION_RELU6)
        x = x > 6.0f ? 6.0f : x;
    return x;
}

static locus_buffer *filled(locus_context *ctx, size_t count, int specials)
{
    float *x = malloc(count * sizeof *x);
    locus_buffer *buffer = NULL;
    if (!x)
        return NULL;
    for (size_t i = 0; i < count; i++)
        x[i] = (float)test_rng_uniform(-1.0, 1.0);
    /* A few NaN and infinities, which reach some outputs alone and some
     * together (inf - inf: NaN). */
    for (int i = 0; specials && i < 3; i++) {
        x[test_rng_range(0, count - 1)] = NAN;
        x[test_rng_range(0, count - 1)] = INFINITY;
        x[test_rng_range(0, count - 1)] = -INFINITY;
    }
    if (TEST_OK(locus_buffer_create(ctx, count * sizeof *x, NULL, &buffer)) ==
        LOCUS_SUCCESS)
        TEST_OK(locus_buffer_write(buffer, 0, x, count * sizeof *x));
    free(x);
    return buffer;
}

static void poison(locus_buffer *buffer, size_t count)
{
    float *x = malloc(count * sizeof *x);
    if (!x)
        return;
    for (size_t i = 0; i < count; i++)
        x[i] = NAN;
    TEST_OK(locus_buffer_write(buffer, 0, x, count * sizeof *x));
    free(x);
}

static int saw_fused;

/* One case, one bias choice, one activation: the layer against the plain
 * convolution of the same buffers plus the epilogue done here. */
static void run_one(locus_context *ctx, locus_device *dev, const dense_case *dc,
                    int with_bias, locus_activation act, int specials)
{
    size_t p = out_size(dc), out_count = dc->k * p * p;
    size_t bytes = out_count * sizeof(float);
    locus_buffer *in = filled(ctx, dc->c * dc->h * dc->h, specials);
    locus_buffer *f = filled(ctx, dc->k * dc->c * dc->r * dc->r, 0);
    locus_buffer *bias = with_bias ? filled(ctx, dc->k, 0) : NULL;
    locus_buffer *plain = NULL, *layer = NULL;
    float *want = malloc(bytes), *got = malloc(bytes), *b = malloc(dc->k * 4);
    TEST_OK(locus_buffer_create(ctx, bytes, NULL, &plain));
    TEST_OK(locus_buffer_create(ctx, bytes, NULL, &layer));
    if (!in || !f || (with_bias && !bias) || !plain || !layer || !want ||
        !got || !b) {
        TEST_EXPECT(0, "setup failed");
        goto release;
    }
    poison(plain, out_count);
    poison(layer, out_count);
    locus_conv2d_desc d;
    locus_conv2d_desc_init(&d);
    d.batch = 1;
    d.in_channels = dc->c;
    d.in_height = d.in_width = dc->h;
    d.out_channels = dc->k;
    d.kernel_height = d.kernel_width = dc->r;
    d.stride_h = d.stride_w = dc->stride;
    d.pad_h = d.pad_w = dc->pad;
    if (TEST_OK(locus_conv2d(ctx, dev, &d, in, f, plain, NULL)) !=
        LOCUS_SUCCESS)
        goto release;
    d.activation = act;
    locus_record record;
    locus_record_init(&record);
    if (TEST_OK(locus_conv2d_layer(ctx, dev, &d, in, f, bias, layer,
                                   &record)) != LOCUS_SUCCESS)
        goto release;
    int fused = strstr(record.algorithm, "+fused") != NULL;
    saw_fused |= fused;
    TEST_EXPECT(fused,
                "c%zu %zux%zu k%zu %zux%zu/%zu: algorithm %s, not "
                "fused",
                dc->c, dc->h, dc->h, dc->k, dc->r, dc->r, dc->stride,
                record.algorithm);
    TEST_OK(locus_buffer_read(plain, 0, want, bytes));
    TEST_OK(locus_buffer_read(layer, 0, got, bytes));
    for (size_t k = 0; k < dc->k; k++)
        b[k] = 0.0f;
    if (bias)
        TEST_OK(locus_buffer_read(bias, 0, b, dc->k * sizeof *b));
    for (size_t i = 0; i < out_count; i++) {
        float w = activate(act, want[i] + b[i / (p * p)]);
        int same =
            isnan(w) ? isnan(got[i]) != 0 : memcmp(&w, &got[i], sizeof w) == 0;
        if (!TEST_EXPECT(same,
                         "c%zu %zux%zu k%zu %zux%zu/%zu pad %zu bias %d act "
                         "%d specials %d: output %zu (channel %zu) %.9g, "
                         "expected %.9g",
                         dc->c, dc->h, dc->h, dc->k, dc->r, dc->r, dc->stride,
                         dc->pad, with_bias, (int)act, specials, i, i / (p * p),
                         (double)got[i], (double)w))
            break;
    }
release:
    locus_buffer_destroy(in);
    locus_buffer_destroy(f);
    locus_buffer_destroy(bias);
    locus_buffer_destroy(plain);
    locus_buffer_destroy(layer);
    free(want);
    free(got);
    free(b);
}

static void test_isa(const char *isa)
{
    locus_context *ctx = test_cpu_isa_context(isa);
    if (!ctx)
        return;
    locus_device *dev = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &dev)) == LOCUS_SUCCESS)
        for (size_t i = 0; i < CASE_COUNT; i++)
            for (int act = 0; act < 3; act++)
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    if (!with_bias && act == LOCUS_ACTIVATION_NONE)
                        continue; /* no feature: plain conv2d */
                    run_one(ctx, dev, &cases[i], with_bias,
                            (locus_activation)act, (int)(i + act) % 2);
                }
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < TEST_CPU_ISA_COUNT; i++)
        test_isa(test_cpu_isas[i]);
    TEST_EXPECT(saw_fused, "no layer ran fused");
    return test_exit_code();
}
