/* The CPU's conv2d entry: checks what the runtime leaves to backends,
 * describes the problem once, and runs the implicit GEMM
 * (conv_implicit.c), im2col + GEMM (conv_im2col.c) or MEC (mec.c), the
 * one asked for or, for `auto`, the one the rule below picks. Winograd
 * (LOCUS_CONV_WINOGRAD) is the GPU backends' only so far:
 * LOCUS_ERROR_NOT_SUPPORTED.
 *
 * The auto rule. The implicit GEMM does im2col's arithmetic with the same
 * register kernel but never writes the lowered matrix, so it is faster than
 * im2col and than MEC on every layer of the ResNet-50 set and on small and
 * 1x1 shapes (most where im2col lowers most, the 7x7 stem; least on 1x1
 * layers, where im2col lowers nothing; docs/PERFORMANCE.md), and its
 * workspace (the packed filter plus a few hundred KiB per worker) is the
 * smallest of the three except where the filter outweighs the image (3x3
 * 256->256 at 14x14). So `auto` runs it whenever its sizes do not overflow.
 * Where the ISA has a direct kernel and the shape fills its tiles, the
 * implicit GEMM runs in its other orientation (conv_direct.c: filters as
 * vectors, the input read in place). Otherwise it chooses between the two
 * lowerings: MEC lowers each input row S times where im2col lowers it R*S
 * times, so it saves memory when output rows share input rows (kernel_h >
 * stride_h), and with one GEMM over each worker's output rows it is as fast
 * as im2col or faster on every such layer of the set (docs/PERFORMANCE.md);
 * it is picked there when its workspace is smaller than im2col's, and
 * im2col otherwise (1x1 layers, which im2col reads in place).
 *
 * A conv layer's bias and activation (locus__cpu_conv2d_fused, from
 * conv_layer.c) ride along in the problem: the implicit GEMM and the
 * direct kernel apply them as they store the output; the other
 * algorithms leave them to the caller's epilogue pass.
 *
 * f64 has im2col alone (the f64 DGEMM's tile, conv_gemm.h): `auto` takes
 * it, and MEC or the implicit GEMM asked for by name in f64 is
 * LOCUS_ERROR_NOT_SUPPORTED (offers says 0 for them, so the scheduler never
 * picks them).
 */
#include "conv2d.h"
#include "conv_implicit.h"
#include "mec.h"

static locus_conv_algorithm choose(const locus__conv_problem *pr)
{
    const locus__conv_shape *sh = &pr->shape;
    size_t implicit = 0;
    if (locus__cpu_implicit_workspace(pr, &implicit))
        return LOCUS_CONV_IMPLICIT_GEMM;
    if (sh->kernel_h <= sh->stride_h)
        return LOCUS_CONV_IM2COL;
    size_t mec = 0, im2col = 0;
    if (!locus__cpu_mec_workspace(pr, &mec) ||
        !locus__cpu_im2col_workspace(pr, &im2col) || mec >= im2col)
        return LOCUS_CONV_IM2COL;
    return LOCUS_CONV_MEC;
}

locus_status locus__cpu_conv2d(void *state, size_t device,
                               const locus_conv2d_desc *desc, const void *input,
                               const void *filter, void *output,
                               locus_op_context *op)
{
    locus_conv2d_desc plain = *desc;
    plain.activation = LOCUS_ACTIVATION_NONE;
    int fused;
    return locus__cpu_conv2d_fused(state, device, &plain, input, filter, NULL,
                                   output, op, &fused);
}

locus_status locus__cpu_conv2d_fused(void *state, size_t device,
                                     const locus_conv2d_desc *desc,
                                     const void *input, const void *filter,
                                     const void *bias, void *output,
                                     locus_op_context *op, int *fused)
{
    *fused = 0;
    const locus__cpu_state *s = state;
    const locus_services *services = s->services;

    int f64 = desc->dtype == LOCUS_DTYPE_F64;
    /* TF32 and 3XTF32 trade f32 precision for speed: no meaning in f64. */
    if (f64 && desc->math != LOCUS_MATH_FP32)
        return services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                              "conv2d math mode %d is f32-only: dtype f64 "
                              "takes the default math mode",
                              (int)desc->math);
    if (!f64) {
        locus_status status = locus__cpu_check_dtype(s, "conv2d", desc->dtype);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    switch (desc->algorithm) {
    case LOCUS_CONV_AUTO:
    case LOCUS_CONV_IM2COL:
        break;
    case LOCUS_CONV_MEC:
    case LOCUS_CONV_IMPLICIT_GEMM:
        if (f64)
            return services->fail(
                LOCUS_ERROR_NOT_SUPPORTED,
                "conv2d algorithm %s is f32-only on the cpu (f64 has im2col "
                "and auto)",
                desc->algorithm == LOCUS_CONV_MEC ? "mec" : "implicit");
        break;
    case LOCUS_CONV_WINOGRAD:
        return services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                              "conv2d algorithm winograd is not offered on "
                              "the cpu (im2col, mec, implicit, auto are)");
    default:
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d algorithm %d is unknown",
                              (int)desc->algorithm);
    }
    if (desc->stride_h == 0 || desc->stride_w == 0)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d stride %zux%zu must be at least 1",
                              desc->stride_h, desc->stride_w);
    if (desc->in_height + 2 * desc->pad_h < desc->kernel_height ||
        desc->in_width + 2 * desc->pad_w < desc->kernel_width)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d kernel %zux%zu does not fit the padded "
                              "input %zux%zu",
                              desc->kernel_height, desc->kernel_width,
                              desc->in_height + 2 * desc->pad_h,
                              desc->in_width + 2 * desc->pad_w);

    locus__conv_problem problem = {
        .state = s,
        .shape =
            {
                .channels = desc->in_channels,
                .height = desc->in_height,
                .width = desc->in_width,
                .kernel_h = desc->kernel_height,
                .kernel_w = desc->kernel_width,
                .stride_h = desc->stride_h,
                .stride_w = desc->stride_w,
                .pad_h = desc->pad_h,
                .pad_w = desc->pad_w,
                .out_h =
                    (desc->in_height + 2 * desc->pad_h - desc->kernel_height) /
                        desc->stride_h +
                    1,
                .out_w =
                    (desc->in_width + 2 * desc->pad_w - desc->kernel_width) /
                        desc->stride_w +
                    1,
            },
        .batch = desc->batch,
        .out_channels = desc->out_channels,
        .input = f64 ? NULL : input,
        .filter = f64 ? NULL : filter,
        .output = f64 ? NULL : output,
        .dtype = desc->dtype,
        .input_f64 = f64 ? input : NULL,
        .filter_f64 = f64 ? filter : NULL,
        .output_f64 = f64 ? output : NULL,
        .epilogue = {f64 ? NULL : bias,
                     f64 ? LOCUS_ACTIVATION_NONE : desc->activation},
        .op = op,
    };
    locus_status status =
        locus__cpu_device_workers(s, device, &problem.node, &problem.workers);
    if (status != LOCUS_SUCCESS)
        return status;

    /* The runtime refuses these; the drivers' size arithmetic relies on
     * it. */
    if (desc->batch == 0 || desc->out_channels == 0 || desc->in_channels == 0)
        return services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                              "conv2d batch %zu, in_channels %zu and "
                              "out_channels %zu must be at least 1",
                              desc->batch, desc->in_channels,
                              desc->out_channels);

    locus__cpu_conv_flatten_1x1(&problem);
    locus_conv_algorithm algorithm = desc->algorithm;
    if (algorithm == LOCUS_CONV_AUTO)
        algorithm = f64 ? LOCUS_CONV_IM2COL : choose(&problem);
    if (algorithm == LOCUS_CONV_IMPLICIT_GEMM) {
        locus__cpu_set_algorithm(op, "implicit");
        *fused = !f64;
        return locus__cpu_conv2d_implicit(&problem);
    }
    problem.epilogue = (locus__conv_epilogue){NULL, LOCUS_ACTIVATION_NONE};
    if (algorithm == LOCUS_CONV_MEC) {
        locus__cpu_set_algorithm(op, "mec");
        return locus__cpu_conv2d_mec(&problem);
    }
    locus__cpu_set_algorithm(op, "im2col");
    return locus__cpu_conv2d_im2col(&problem);
}
