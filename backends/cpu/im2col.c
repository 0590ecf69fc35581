/* im2col lowering. Coordinates stay unsigned: a padded coordinate x
 * (0 <= x < H + 2 pad) is inside the image when pad <= x < pad + H. */
#include "im2col.h"

/* Row (c, r, s) of col over columns [col_begin, col_end), from one
 * channel's plane, elements of type T. */
#define LOWER_ROW(T)                                                           \
    do {                                                                       \
        size_t p = col_begin / sh->out_w;                                      \
        size_t q = col_begin % sh->out_w;                                      \
        for (size_t j = 0; j < col_end - col_begin; j++) {                     \
            size_t y = p * sh->stride_h + r;                                   \
            size_t x = q * sh->stride_w + s;                                   \
            int inside = y >= sh->pad_h && y - sh->pad_h < sh->height &&       \
                         x >= sh->pad_w && x - sh->pad_w < sh->width;          \
            dst[j] =                                                           \
                inside ? plane[(y - sh->pad_h) * sh->width + (x - sh->pad_w)]  \
                       : (T)0;                                                 \
            if (++q == sh->out_w) {                                            \
                q = 0;                                                         \
                p++;                                                           \
            }                                                                  \
        }                                                                      \
    } while (0)

static void lower_row(const locus__conv_shape *sh, const float *plane, size_t r,
                      size_t s, size_t col_begin, size_t col_end, float *dst)
{
    LOWER_ROW(float);
}

static void lower_row_f64(const locus__conv_shape *sh, const double *plane,
                          size_t r, size_t s, size_t col_begin, size_t col_end,
                          double *dst)
{
    LOWER_ROW(double);
}

/* Every row (c, r, s) of col in turn. */
#define IM2COL(T, LOWER)                                                       \
    do {                                                                       \
        if (col_begin >= col_end)                                              \
            return;                                                            \
        size_t plane_size = shape->height * shape->width;                      \
        size_t row = 0;                                                        \
        for (size_t c = 0; c < shape->channels; c++) {                         \
            const T *plane = image + c * plane_size;                           \
            for (size_t r = 0; r < shape->kernel_h; r++)                       \
                for (size_t s = 0; s < shape->kernel_w; s++, row++)            \
                    LOWER(shape, plane, r, s, col_begin, col_end,              \
                          col + row * ldcol);                                  \
        }                                                                      \
    } while (0)

void locus__cpu_im2col(const locus__conv_shape *shape, const float *image,
                       size_t col_begin, size_t col_end, float *col,
                       size_t ldcol)
{
    IM2COL(float, lower_row);
}

void locus__cpu_im2col_f64(const locus__conv_shape *shape, const double *image,
                           size_t col_begin, size_t col_end, double *col,
                           size_t ldcol)
{
    IM2COL(double, lower_row_f64);
}
