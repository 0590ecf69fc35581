/* A conv layer's bias and activation, applied by the f32 convolution
 * kernels where they store a finished piece of the output (conv_layer.c
 * hands it to 0.2's implicit GEMM and direct kernels): a tile of
 * output rows just written is still in L1, so the epilogue costs a load
 * and a store per element there, not a second pass over the whole output
 * from memory.
 *
 * Each output becomes act(x + bias[k]), with bias 0 where there is none:
 * exactly the conv layer's separate epilogue pass (conv_layer_elem.h,
 * finish), so fused or not the answers are the same bits. The
 * activations keep NaN (x < 0 is false for NaN), as locus.h says. The
 * AVX2 GEMM kernel applies the same operations to a tile in registers
 * (isa.h, sgemm_strided_epilogue). */
#ifndef LOCUS_CPU_CONV_EPILOGUE_H
#define LOCUS_CPU_CONV_EPILOGUE_H

#include <stddef.h>

#include <locus/locus.h>

typedef struct locus__conv_epilogue {
    const float *bias; /* K values; NULL: none */
    locus_activation activation;
} locus__conv_epilogue;

static inline int locus__conv_epilogue_is_none(const locus__conv_epilogue *e)
{
    return !e->bias && e->activation == LOCUS_ACTIVATION_NONE;
}

/* Four values at a time through GCC's vector extensions, which every
 * x86-64 and Arm target has: written as the scalar x < 0.0f ? 0.0f : x,
 * the loop stayed scalar and branchy (a compare may trap, so GCC does not
 * if-convert it), and that pass cost as much as a small-depth tile's
 * arithmetic (docs/PERFORMANCE.md). A vector compare gives a mask
 * (false for NaN), so NaN and -0 pass as in the scalar form. */
typedef float locus__epilogue_f4 __attribute__((vector_size(16)));
typedef int locus__epilogue_i4 __attribute__((vector_size(16)));

static inline locus__epilogue_f4
locus__conv_epilogue_f4(locus__epilogue_f4 x, locus__epilogue_f4 bias,
                        locus_activation activation)
{
    x = x + bias;
    if (activation == LOCUS_ACTIVATION_NONE)
        return x;
    const locus__epilogue_f4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
    const locus__epilogue_f4 six = {6.0f, 6.0f, 6.0f, 6.0f};
    locus__epilogue_i4 bits = (locus__epilogue_i4)x;
    bits &= ~(x < zero); /* +0 where x < 0 */
    if (activation == LOCUS_ACTIVATION_RELU6) {
        locus__epilogue_i4 above = (locus__epilogue_f4)bits > six;
        bits = (bits & ~above) | ((locus__epilogue_i4)six & above);
    }
    return (locus__epilogue_f4)bits;
}

/* Rows [0, rows) of c (ldc apart, output channels k0, k0 + 1, ...),
 * columns [0, cols). */
static inline void locus__conv_epilogue_apply(const locus__conv_epilogue *e,
                                              float *c, size_t ldc, size_t k0,
                                              size_t rows, size_t cols)
{
    if (locus__conv_epilogue_is_none(e))
        return;
    for (size_t i = 0; i < rows; i++) {
        float b = e->bias ? e->bias[k0 + i] : 0.0f;
        const locus__epilogue_f4 bias = {b, b, b, b};
        float *row = c + i * ldc;
        size_t j = 0;
        for (; j + 4 <= cols; j += 4) {
            locus__epilogue_f4 x;
            __builtin_memcpy(&x, row + j, sizeof x);
            x = locus__conv_epilogue_f4(x, bias, e->activation);
            __builtin_memcpy(row + j, &x, sizeof x);
        }
        for (; j < cols; j++) {
            locus__epilogue_f4 x = {row[j], 0.0f, 0.0f, 0.0f};
            row[j] = locus__conv_epilogue_f4(x, bias, e->activation)[0];
        }
    }
}

#endif
