/* im2col lowering. Coordinates stay unsigned: a padded coordinate x
 * (0 <= x < H + 2 pad) is inside the image when pad <= x < pad + H. */
#include "im2col.h"

static void lower_row(const locus__conv_shape *sh, const float *plane, size_t r,
                      size_t s, size_t col_begin, size_t col_end, float *dst)
{
    size_t p = col_begin / sh->out_w;
    size_t q = col_begin % sh->out_w;
    for (size_t j = 0; j < col_end - col_begin; j++) {
        size_t y = p * sh->stride_h + r;
        size_t x = q * sh->stride_w + s;
        int inside = y >= sh->pad_h && y - sh->pad_h < sh->height &&
                     x >= sh->pad_w && x - sh->pad_w < sh->width;
        dst[j] = inside ? plane[(y - sh->pad_h) * sh->width + (x - sh->pad_w)]
                        : 0.0f;
        if (++q == sh->out_w) {
            q = 0;
            p++;
        }
    }
}

void locus__cpu_im2col(const locus__conv_shape *shape, const float *image,
                       size_t col_begin, size_t col_end, float *col,
                       size_t ldcol)
{
    if (col_begin >= col_end)
        return;
    size_t plane_size = shape->height * shape->width;
    size_t row = 0;
    for (size_t c = 0; c < shape->channels; c++) {
        const float *plane = image + c * plane_size;
        for (size_t r = 0; r < shape->kernel_h; r++)
            for (size_t s = 0; s < shape->kernel_w; s++, row++)
                lower_row(shape, plane, r, s, col_begin, col_end,
                          col + row * ldcol);
    }
}
