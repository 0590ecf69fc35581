/* What the SGEMM kernels' fused conv epilogue does to a row of the tile
 * (isa.h, sgemm_strided_epilogue), shared by the AVX2 and AVX-512
 * kernels: each applies it with its own vectors, the same operations in
 * the same order as conv_epilogue.h's separate pass (act(x + bias), bias
 * 0 where there is none, nothing at all where there is neither), so fused
 * or not the bits agree. */
#ifndef LOCUS_CPU_SGEMM_EPILOGUE_H
#define LOCUS_CPU_SGEMM_EPILOGUE_H

#include <locus/locus.h>

typedef struct row_epilogue {
    int apply;     /* a bias or an activation */
    int clamp_low; /* relu and relu6 */
    int clamp_six; /* relu6 */
} row_epilogue;

static const row_epilogue no_epilogue = {0, 0, 0},
                          epilogue_bias_only = {1, 0, 0},
                          epilogue_relu = {1, 1, 0}, epilogue_relu6 = {1, 1, 1};

static inline row_epilogue row_epilogue_of(int activation, const float *bias)
{
    return activation == LOCUS_ACTIVATION_RELU    ? epilogue_relu
           : activation == LOCUS_ACTIVATION_RELU6 ? epilogue_relu6
           : bias                                 ? epilogue_bias_only
                                                  : no_epilogue;
}

/* The kernel's entry: one inlined tile per case for whole tiles, so the
 * loop's registers and the epilogue's are laid out at compile time, and
 * the flags tested at run time in a partial row panel (one per layer's
 * column). TILE(bias, e) and TILE_PARTIAL(bias, e) are the includer's. */
#define SGEMM_EPILOGUE_DISPATCH(activation, bias, whole, TILE, TILE_PARTIAL)   \
    do {                                                                       \
        row_epilogue e_ = row_epilogue_of(activation, bias);                   \
        if (!(whole))                                                          \
            TILE_PARTIAL(bias, e_);                                            \
        else if (e_.clamp_six)                                                 \
            TILE(bias, epilogue_relu6);                                        \
        else if (e_.clamp_low)                                                 \
            TILE(bias, epilogue_relu);                                         \
        else if (e_.apply)                                                     \
            TILE(bias, epilogue_bias_only);                                    \
        else                                                                   \
            TILE(NULL, no_epilogue);                                           \
    } while (0)

#endif
