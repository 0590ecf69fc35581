/* A small timing program for scripts/device/h200-conv-layer.sh: conv2d
 * layers of ResNet-50 and MobileNetV2 on cuda:0 through the public API,
 * each by auto and im2col, the median wall time of REPEATS calls after a
 * warm-up (each call waits for the GPU, so this includes one launch and
 * one synchronization: the per-layer figures `locus bench conv --net`
 * puts beside cuDNN are the ones to quote), in GFLOP/s and, for the
 * depthwise layers, GB/s of the input, filter and output moved once.
 * `conv_layer_bench dw BATCH...` times MobileNetV2's ten depthwise shapes
 * (auto) at those batches instead: at large batches a layer is hundreds
 * of megabytes, so its GB/s is the kernel's, not the launch's.
 * Not a test: it prints, it checks nothing but the status. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <locus/locus.h>

#define REPEATS 20

typedef struct shape {
    const char *name;
    size_t c, h, w, k, r, s, g, stride, pad;
    int bias;
    locus_activation act;
    locus_tensor_layout layout;
} shape;

static const shape shapes[] = {
    {"mbv2 dw 32x112x112 3x3", 32, 112, 112, 32, 3, 3, 32, 1, 1, 1,
     LOCUS_ACTIVATION_RELU6, LOCUS_LAYOUT_NCHW},
    {"mbv2 dw 96x112x112 3x3 s2", 96, 112, 112, 96, 3, 3, 96, 2, 1, 1,
     LOCUS_ACTIVATION_RELU6, LOCUS_LAYOUT_NCHW},
    {"mbv2 dw 960x7x7 3x3", 960, 7, 7, 960, 3, 3, 960, 1, 1, 1,
     LOCUS_ACTIVATION_RELU6, LOCUS_LAYOUT_NCHW},
    {"mbv2 dw 32x112x112 nhwc", 32, 112, 112, 32, 3, 3, 32, 1, 1, 1,
     LOCUS_ACTIVATION_RELU6, LOCUS_LAYOUT_NHWC},
    {"r50 1x1 256->64 56x56", 256, 56, 56, 64, 1, 1, 1, 1, 0, 1,
     LOCUS_ACTIVATION_RELU, LOCUS_LAYOUT_NCHW},
    {"r50 1x1 256->64 nhwc", 256, 56, 56, 64, 1, 1, 1, 1, 0, 1,
     LOCUS_ACTIVATION_RELU, LOCUS_LAYOUT_NHWC},
    {"r50 3x3 64 56x56", 64, 56, 56, 64, 3, 3, 1, 1, 1, 1,
     LOCUS_ACTIVATION_RELU, LOCUS_LAYOUT_NCHW},
    {"r50 3x3 64 56x56 nhwc", 64, 56, 56, 64, 3, 3, 1, 1, 1, 1,
     LOCUS_ACTIVATION_RELU, LOCUS_LAYOUT_NHWC},
    {"resnext 3x3 128 g32 56x56", 128, 56, 56, 128, 3, 3, 32, 1, 1, 1,
     LOCUS_ACTIVATION_RELU, LOCUS_LAYOUT_NCHW},
};

/* MobileNetV2's depthwise layers (224 x 224 input): 3x3, multiplier 1,
 * bias and ReLU6 as the network folds them. */
#define MBV2_DW(c, h, stride)                                                  \
    {                                                                          \
        "mbv2 dw " #c "x" #h "x" #h " s" #stride, c, h, h, c, 3, 3, c, stride, \
            1, 1, LOCUS_ACTIVATION_RELU6, LOCUS_LAYOUT_NCHW                    \
    }
static const shape depthwise_shapes[] = {
    MBV2_DW(32, 112, 1), MBV2_DW(96, 112, 2), MBV2_DW(144, 56, 1),
    MBV2_DW(144, 56, 2), MBV2_DW(192, 28, 1), MBV2_DW(192, 28, 2),
    MBV2_DW(384, 14, 1), MBV2_DW(576, 14, 1), MBV2_DW(576, 14, 2),
    MBV2_DW(960, 7, 1),
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static locus_buffer *zeros(locus_context *ctx, size_t bytes)
{
    locus_buffer *b = NULL;
    void *host = calloc(1, bytes);
    if (host && locus_buffer_create(ctx, bytes, NULL, &b) == LOCUS_SUCCESS)
        locus_buffer_write(b, 0, host, bytes);
    free(host);
    return b;
}

static void bench(locus_context *ctx, locus_device *dev, const shape *s,
                  size_t batch, locus_conv_algorithm algorithm)
{
    locus_conv2d_desc d;
    locus_conv2d_desc_init(&d);
    d.dtype = LOCUS_DTYPE_F32;
    d.batch = batch;
    d.in_channels = s->c, d.in_height = s->h, d.in_width = s->w;
    d.out_channels = s->k, d.kernel_height = s->r, d.kernel_width = s->s;
    d.groups = s->g, d.stride_h = d.stride_w = s->stride;
    d.pad_h = d.pad_w = s->pad;
    d.activation = s->act;
    d.input_layout = d.output_layout = s->layout;
    d.algorithm = algorithm;
    size_t p = 0, q = 0;
    if (locus_conv2d_output_shape(&d, &p, &q) != LOCUS_SUCCESS) {
        printf("%-28s b%-3zu: %s\n", s->name, batch, locus_last_error());
        return;
    }
    const size_t in_bytes = batch * s->c * s->h * s->w * 4;
    const size_t f_bytes = s->k * (s->c / s->g) * s->r * s->s * 4;
    const size_t out_bytes = batch * s->k * p * q * 4;
    locus_buffer *in = zeros(ctx, in_bytes), *f = zeros(ctx, f_bytes);
    locus_buffer *bias = s->bias ? zeros(ctx, s->k * 4) : NULL;
    locus_buffer *out = zeros(ctx, out_bytes);
    double times[REPEATS];
    locus_record record;
    locus_record_init(&record);
    locus_status status =
        locus_conv2d_layer(ctx, dev, &d, in, f, bias, out, &record);
    for (int i = 0; i < REPEATS && status == LOCUS_SUCCESS; i++) {
        const double t0 = now();
        status = locus_conv2d_layer(ctx, dev, &d, in, f, bias, out, &record);
        times[i] = now() - t0;
    }
    if (status != LOCUS_SUCCESS) {
        printf("%-28s b%-3zu %-7s: %s\n", s->name, batch,
               locus_conv_algorithm_str(algorithm), locus_last_error());
    } else {
        qsort(times, REPEATS, sizeof times[0], compare);
        const double t = times[REPEATS / 2];
        const double flops =
            2.0 * (double)batch * s->k * p * q * (s->c / s->g) * s->r * s->s;
        printf("%-28s b%-3zu %-7s %-10s %9.4f ms %9.1f GFLOP/s %8.1f GB/s\n",
               s->name, batch, locus_conv_algorithm_str(algorithm),
               record.algorithm, t * 1e3, flops / t * 1e-9,
               (double)(in_bytes + f_bytes + out_bytes) / t * 1e-9);
    }
    locus_buffer_destroy(in);
    locus_buffer_destroy(f);
    locus_buffer_destroy(bias);
    locus_buffer_destroy(out);
}

int main(int argc, char **argv)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.backends = "cpu,cuda";
    options.plugin_path = getenv("LOCUS_PLUGIN_PATH");
    locus_context *ctx = NULL;
    locus_device *dev = NULL;
    if (locus_context_create(&options, &ctx) != LOCUS_SUCCESS ||
        locus_device_find(ctx, "cuda:0", &dev) != LOCUS_SUCCESS) {
        fprintf(stderr, "no cuda:0: %s\n", locus_last_error());
        locus_context_destroy(ctx);
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "dw") == 0) {
        for (int a = 2; a < argc; a++)
            for (size_t i = 0;
                 i < sizeof depthwise_shapes / sizeof depthwise_shapes[0]; i++)
                bench(ctx, dev, &depthwise_shapes[i],
                      strtoul(argv[a], NULL, 10), LOCUS_CONV_AUTO);
        locus_context_destroy(ctx);
        return 0;
    }
    static const size_t batches[] = {1, 32};
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            bench(ctx, dev, &shapes[i], batches[b], LOCUS_CONV_AUTO);
            bench(ctx, dev, &shapes[i], batches[b], LOCUS_CONV_IM2COL);
        }
    locus_context_destroy(ctx);
    return 0;
}
