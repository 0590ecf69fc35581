/* Portable zero-padded row copy (isa.h: locus__pad_rows_kernel). */
#include <string.h>

#include "kernels.h"

void locus__pad_rows_generic(float *dst, size_t dst_stride, const float *src,
                             size_t src_stride, size_t rows, size_t pad,
                             size_t width, size_t dst_width)
{
    size_t left = pad < dst_width ? pad : dst_width;
    size_t copied = dst_width - left < width ? dst_width - left : width;
    for (size_t i = 0; i < rows; i++) {
        float *d = dst + i * dst_stride;
        memset(d, 0, left * sizeof *d);
        memcpy(d + left, src + i * src_stride, copied * sizeof *d);
        memset(d + left + copied, 0, (dst_width - left - copied) * sizeof *d);
    }
}
