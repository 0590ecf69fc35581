/* The depthwise conv2d layer (groups = C, K = m C) on the CPU: the driver
 * (depthwise.c) and the vector kernels of each instruction set
 * (kernels/depthwise_simd.h, compiled once per ISA with its flags).
 *
 * NCHW: a job is output rows of one plane (n, k), which reads only the
 * plane (n, k / m) of the input; the kernels vectorise along the output
 * row (stride 2 by deinterleaving two loads), keep the taps in registers
 * and handle the padding with masked loads and masked multiply-adds on the
 * chunks that reach it, so the interior is branch-free. NHWC (multiplier
 * 1): channels are innermost, so the kernels vectorise over them, with
 * the filter transposed to taps x channels. */
#ifndef LOCUS_CPU_DEPTHWISE_H
#define LOCUS_CPU_DEPTHWISE_H

#include <stddef.h>
#include <stdint.h>

#include <locus/locus.h>

/* One plane's geometry (the layer's, resolved). */
typedef struct locus__depthwise_geometry {
    size_t height, width, out_h, out_w; /* H, W, P, Q */
    size_t kernel_h, kernel_w;          /* R, S */
    size_t stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
    locus_activation activation;
    /* The bytes [input_begin, input_end) of the whole input, readable: a
     * border load that lies inside them reads a whole vector and masks it
     * after (AVX2's vmaskmov loads are slow on AMD's cores). */
    uintptr_t input_begin, input_end;
} locus__depthwise_geometry;

/* The vector kernels take at most this many taps (R S), in registers. */
#define LOCUS__DEPTHWISE_MAX_TAPS 25

/* NCHW: output rows [p0, p1) of `planes` consecutive planes (input
 * plane i at in + i H W, its taps at taps + i R S, its bias bias[i] (bias
 * NULL: none), its output at out + i P Q), out[p Q + q] = activation(bias
 * + the sum over taps (r, s) inside the image of taps[r S + s] in[y W +
 * x]), y = p stride_h + r dilation_h - pad_top, likewise x. Taps falling
 * in the padding are skipped, not multiplied by zero (an infinite tap
 * there leaves the output finite, as the definition says). Stride_w 1 or
 * 2, at most LOCUS__DEPTHWISE_MAX_TAPS taps. A call of several planes
 * computes its border masks once for all of them. */
typedef void (*locus__depthwise_rows_f32)(const locus__depthwise_geometry *g,
                                          const float *in, const float *taps,
                                          const float *bias, float *out,
                                          size_t planes, size_t p0, size_t p1);
typedef void (*locus__depthwise_rows_f64)(const locus__depthwise_geometry *g,
                                          const double *in, const double *taps,
                                          const double *bias, double *out,
                                          size_t planes, size_t p0, size_t p1);

/* NHWC, multiplier 1: output rows [p0, p1) of one image of C channels,
 * out[(p Q + q) C + c], from in[(y W + x) C + c] and the transposed taps
 * taps[(r S + s) C + c]; bias NULL for none. Any stride, dilation and
 * number of taps. */
typedef void (*locus__depthwise_nhwc_f32)(const locus__depthwise_geometry *g,
                                          size_t channels, const float *in,
                                          const float *taps, const float *bias,
                                          float *out, size_t p0, size_t p1);
typedef void (*locus__depthwise_nhwc_f64)(const locus__depthwise_geometry *g,
                                          size_t channels, const double *in,
                                          const double *taps,
                                          const double *bias, double *out,
                                          size_t p0, size_t p1);

struct locus__conv_layer;

/* Whether locus__cpu_layer_depthwise (conv_layer.h) runs the layer's
 * layouts in place: NCHW in and out, or NHWC in and out with multiplier
 * 1 where the vector kernels exist. Other layers go through NCHW copies
 * (conv_layer.c). */
int locus__cpu_depthwise_in_place(const struct locus__conv_layer *l);

/* AVX-512F (kernels/depthwise_avx512.c) and AVX2 + FMA
 * (kernels/depthwise_avx2.c); called only where the CPU has them. */
#define LOCUS__DEPTHWISE_DECLARE(isa)                                          \
    void locus__depthwise_rows_f32_##isa(const locus__depthwise_geometry *g,   \
                                         const float *in, const float *taps,   \
                                         const float *bias, float *out,        \
                                         size_t planes, size_t p0, size_t p1); \
    void locus__depthwise_rows_f64_##isa(const locus__depthwise_geometry *g,   \
                                         const double *in, const double *taps, \
                                         const double *bias, double *out,      \
                                         size_t planes, size_t p0, size_t p1); \
    void locus__depthwise_nhwc_f32_##isa(const locus__depthwise_geometry *g,   \
                                         size_t channels, const float *in,     \
                                         const float *taps, const float *bias, \
                                         float *out, size_t p0, size_t p1);    \
    void locus__depthwise_nhwc_f64_##isa(                                      \
        const locus__depthwise_geometry *g, size_t channels, const double *in, \
        const double *taps, const double *bias, double *out, size_t p0,        \
        size_t p1);
LOCUS__DEPTHWISE_DECLARE(avx512)
LOCUS__DEPTHWISE_DECLARE(avx2)

#endif
