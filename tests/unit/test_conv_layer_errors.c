/* locus_conv2d_layer's checks and gating: every check of the 0.3 fields
 * with its message; a 0.2 descriptor (struct_size ending at math) still
 * accepted with the defaults; a device whose backend has no conv2d
 * features (the fake "cuda" module) refused by name, passed by when no
 * device is given, and still running the plain conv2d; MEC asked for with
 * a feature; the queue's entry with a bias. argv[1]: the fake module's
 * folder. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <locus/locus.h>

#include "expect_error.h"
#include "test_util.h"

static locus_buffer *filled(locus_context *ctx, size_t floats)
{
    locus_buffer *b = NULL;
    if (TEST_OK(locus_buffer_create(ctx, floats * sizeof(float), NULL, &b)) !=
        LOCUS_SUCCESS)
        return NULL;
    float *x = calloc(floats, sizeof *x);
    for (size_t i = 0; x && i < floats; i++)
        x[i] = (float)test_rng_uniform(-1, 1);
    if (x)
        TEST_OK(locus_buffer_write(b, 0, x, floats * sizeof *x));
    free(x);
    return b;
}

/* 1 x 4 x 6 x 6 input, 4 filters 3x3, groups 2: filter 4 x 2 x 3 x 3. */
static void grouped(locus_conv2d_desc *d)
{
    locus_conv2d_desc_init(d);
    d->batch = 1;
    d->in_channels = 4;
    d->in_height = d->in_width = 6;
    d->out_channels = 4;
    d->kernel_height = d->kernel_width = 3;
    d->groups = 2;
}

static void test_checks(locus_context *ctx, locus_device *cpu)
{
    printf("checks\n");
    locus_buffer *in = filled(ctx, 4 * 36), *f = filled(ctx, 4 * 2 * 9);
    locus_buffer *bias = filled(ctx, 4), *small = filled(ctx, 3);
    locus_buffer *out = filled(ctx, 4 * 36);
    locus_conv2d_desc d;
    size_t p, q;

    grouped(&d);
    d.groups = 3;
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "groups 3 must divide");
    grouped(&d);
    d.dilation_h = 3; /* spans 7 rows of a 6-row image */
    TEST_ERROR(locus_conv2d_output_shape(&d, &p, &q),
               LOCUS_ERROR_INVALID_ARGUMENT, "spanning 7 x 3");
    d.pad_h = 1; /* top 1, bottom 1: 8 rows */
    TEST_OK(locus_conv2d_output_shape(&d, &p, &q));
    TEST_EXPECT(p == 2 && q == 4, "dilated output %zu x %zu, not 2 x 4", p, q);
    grouped(&d);
    d.pad_h = 2;
    d.pad_bottom = 0;
    d.pad_right = 1;
    TEST_OK(locus_conv2d_output_shape(&d, &p, &q));
    TEST_EXPECT(p == 6 && q == 5, "asymmetric output %zu x %zu, not 6 x 5", p,
                q);
    grouped(&d);
    d.activation = (locus_activation)3;
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "activation 3 is unknown");
    grouped(&d);
    d.output_layout = (locus_tensor_layout)2;
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "layouts 0 (input) and 2");
    grouped(&d);
    d.pad_bottom = SIZE_MAX - 2;
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, "padded");
    grouped(&d);
    d.dilation_w = SIZE_MAX / 2 + 1;
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, "dilated");
    grouped(&d);
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, small, out, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "bias needs 16 bytes");
    d.groups = 1; /* the filter now needs 4 x 4 x 3 x 3 */
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "filter needs 576 bytes");
    grouped(&d);
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, out, out, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "bias are the same buffer");
    d.algorithm = LOCUS_CONV_MEC;
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, bias, out, NULL),
               LOCUS_ERROR_NOT_SUPPORTED, "mec does not take groups, bias");
    grouped(&d);
    d.struct_size = offsetof(locus_conv2d_desc, math);
    TEST_ERROR(locus_conv2d_layer(ctx, cpu, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");

    /* A 0.2 caller's struct ends at math: the rest reads as the defaults
     * (groups 1, symmetric padding), whatever lies past it. */
    struct {
        locus_conv2d_desc desc;
    } old;
    grouped(&old.desc);
    old.desc.groups = 4; /* past the old end: must be ignored */
    old.desc.pad_h = old.desc.pad_w = 1;
    old.desc.struct_size =
        offsetof(locus_conv2d_desc, math) + sizeof old.desc.math;
    TEST_OK(locus_conv2d_output_shape(&old.desc, &p, &q));
    TEST_EXPECT(p == 6 && q == 6, "0.2 struct: output %zu x %zu", p, q);
    TEST_ERROR(locus_conv2d(ctx, cpu, &old.desc, in, f, out, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "filter"); /* groups read as 1 */

    locus_buffer_destroy(in);
    locus_buffer_destroy(f);
    locus_buffer_destroy(bias);
    locus_buffer_destroy(small);
    locus_buffer_destroy(out);
}

/* The fake "cuda" backend has conv2d but no features. */
static void test_gating(locus_context *ctx, locus_device *cpu,
                        locus_device *fake)
{
    printf("gating\n");
    locus_buffer *in = filled(ctx, 4 * 36), *f = filled(ctx, 4 * 4 * 9);
    locus_buffer *bias = filled(ctx, 4), *out = filled(ctx, 4 * 16);
    locus_conv2d_desc d;
    grouped(&d);
    d.groups = 1;
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_conv2d_layer(ctx, fake, &d, in, f, NULL, out, &record));
    TEST_EXPECT(strcmp(record.algorithm, "fake") == 0,
                "a plain conv2d on the fake device ran %s", record.algorithm);
    TEST_ERROR(locus_conv2d_layer(ctx, fake, &d, in, f, bias, out, NULL),
               LOCUS_ERROR_NOT_SUPPORTED,
               "conv2d with bias is not offered on cuda:0");
    d.groups = 2;
    d.dilation_h = 2;
    d.pad_h = 1;
    TEST_ERROR(locus_conv2d_layer(ctx, fake, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_NOT_SUPPORTED,
               "conv2d with groups, dilation is not offered on cuda:0");
    grouped(&d);
    d.input_layout = LOCUS_LAYOUT_NHWC;
    TEST_ERROR(locus_conv2d_layer(ctx, fake, &d, in, f, NULL, out, NULL),
               LOCUS_ERROR_NOT_SUPPORTED, "with groups, nhwc is not offered");
    /* No device: the scheduler passes the fake one by. */
    grouped(&d);
    d.activation = LOCUS_ACTIVATION_RELU6;
    locus_record_init(&record);
    TEST_OK(locus_conv2d_layer(ctx, NULL, &d, in, f, bias, out, &record));
    TEST_EXPECT(strcmp(record.device, "cpu") == 0, "a grouped conv2d ran on %s",
                record.device);
    /* The queue's entry, with a bias, gives the synchronous result. */
    float sync[64], queued[64];
    TEST_OK(locus_buffer_read(out, 0, sync, sizeof sync));
    locus_buffer *out2 = filled(ctx, 64);
    locus_queue *queue = NULL;
    if (TEST_OK(locus_queue_create(ctx, cpu, &queue)) == LOCUS_SUCCESS) {
        TEST_OK(locus_enqueue_conv2d_layer(queue, &d, in, f, bias, out2, NULL,
                                           NULL));
        TEST_ERROR(locus_enqueue_conv2d_layer(queue, &d, in, f, out2, out2,
                                              NULL, NULL),
                   LOCUS_ERROR_INVALID_ARGUMENT, "same buffer");
        TEST_OK(locus_queue_finish(queue));
        locus_queue_destroy(queue);
        TEST_OK(locus_buffer_read(out2, 0, queued, sizeof queued));
        TEST_EXPECT(memcmp(sync, queued, sizeof sync) == 0,
                    "the queued layer differs from the synchronous one");
        for (size_t i = 0; i < 64; i++)
            TEST_EXPECT(sync[i] >= 0 && sync[i] <= 6, "relu6 output %g",
                        sync[i]);
    }
    locus_buffer_destroy(out2);
    locus_buffer_destroy(in);
    locus_buffer_destroy(f);
    locus_buffer_destroy(bias);
    locus_buffer_destroy(out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FAKE_MODULE_DIR\n", argv[0]);
        return 1;
    }
    test_seed(0, NULL);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.calibration = "nominal";
    options.backends = "cpu,cuda";
    options.plugin_path = argv[1];
    locus_context *ctx = NULL;
    if (TEST_OK(locus_context_create(&options, &ctx)) != LOCUS_SUCCESS)
        return test_exit_code();
    locus_device *cpu = NULL, *fake = NULL;
    if (TEST_OK(locus_device_find(ctx, "cpu", &cpu)) == LOCUS_SUCCESS &&
        TEST_OK(locus_device_find(ctx, "cuda:0", &fake)) == LOCUS_SUCCESS) {
        test_checks(ctx, cpu);
        test_gating(ctx, cpu, fake);
    }
    locus_context_destroy(ctx);
    return test_exit_code();
}
