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
 * loops have no data-dependent branch: the compiler turns each into a
 * compare and a select (or max and min) over vectors. */
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
        float *row = c + i * ldc;
        switch (e->activation) {
        case LOCUS_ACTIVATION_RELU:
            for (size_t j = 0; j < cols; j++) {
                float x = row[j] + b;
                row[j] = x < 0.0f ? 0.0f : x;
            }
            break;
        case LOCUS_ACTIVATION_RELU6:
            for (size_t j = 0; j < cols; j++) {
                float x = row[j] + b;
                x = x < 0.0f ? 0.0f : x;
                row[j] = x > 6.0f ? 6.0f : x;
            }
            break;
        case LOCUS_ACTIVATION_NONE:
        default:
            for (size_t j = 0; j < cols; j++)
                row[j] += b;
            break;
        }
    }
}

#endif
