/* The implicit GEMM's B operand: micro-panels of the (never built) im2col
 * column matrix, packed from a zero-padded band of one NCHW image's rows
 * (conv_implicit_pack.c says why the band). */
#ifndef LOCUS_CPU_CONV_IMPLICIT_PACK_H
#define LOCUS_CPU_CONV_IMPLICIT_PACK_H

#include <stddef.h>

#include "im2col.h"
#include "isa.h"

/* The rows micro-panels read: a copy of input rows with their zero
 * padding (base[c * plane + (y - y0) * row + x], y and x padded
 * coordinates), or, for a 1x1 stride-1 unpadded filter, the image itself
 * (direct: plane = H * W, the column matrix is the image). */
typedef struct locus__implicit_band {
    const float *base;
    size_t plane, row, y0;
    int direct;
} locus__implicit_band;

/* Floats of band buffer for output rows [oy0, oy0 + out_rows) of any
 * image, slack included; 0 when it overflows. */
size_t locus__cpu_implicit_band_floats(const locus__conv_shape *shape,
                                       size_t nr, size_t out_rows);

/* Makes the band for output positions [j0, j1) of image, copying into
 * buffer (band_floats for the rows those positions span) unless direct. */
void locus__cpu_implicit_band(const locus__conv_shape *shape,
                              const locus__cpu_isa *isa, const float *image,
                              size_t nr, size_t j0, size_t j1, float *buffer,
                              locus__implicit_band *band);

/* Micro-panels packed per call: their band rows are read once for all
 * of them. */
#define LOCUS__IMPLICIT_PANELS 4

/* Packs depth rows [p0, p0 + kc) by output positions [j0, j0 + cols) of
 * the column matrix (im2col.h: row (c, r, s), column p * Q + q) into
 * ceil(cols / nr) <= LOCUS__IMPLICIT_PANELS micro-panels, panel t at
 * bp + t * panel_stride holding bp[p * nr + j] for position
 * j0 + t * nr + j, from a band that holds those positions. nr <=
 * LOCUS__MAX_NR, panel_stride >= (kc + 1) * nr. Lanes past cols get
 * unspecified values (they only reach output columns that are
 * discarded); each panel needs nr floats of slack past kc * nr. */
void locus__cpu_implicit_pack_b(const locus__conv_shape *shape,
                                const locus__implicit_band *band, size_t nr,
                                size_t j0, size_t cols, size_t p0, size_t kc,
                                float *bp, size_t panel_stride);

#endif
