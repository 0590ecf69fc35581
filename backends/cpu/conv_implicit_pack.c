/* Packing one B micro-panel of the implicit GEMM.
 *
 * The packing must cost little next to the micro-kernel, which spends
 * about K / 16 cycles per packed float (K output channels, 16 FMA lanes a
 * cycle): 4 cycles at K = 64. Packing straight from the image,
 * zero-filling per depth row the lanes whose taps fall in the padding,
 * costs nearly as much in bounds tests and short runs
 * (docs/PERFORMANCE.md). So the rows a block of output positions
 * reads are first copied once, with their zero padding, into a per-worker
 * band (a few hundred KiB, reused R*S times from L2), and the micro-panel
 * is then packed with no test at all:
 *
 * The nr output positions of a micro-panel are consecutive in p * Q + q
 * order, so they fall in one or more runs ("segments") of one output row
 * each. For depth row (c, r, s), segment g reads band row
 * oy * stride_h + r of channel c from padded column ox * stride_w + s on:
 * a fixed offset off_g from the depth row's base c * plane + r * row + s.
 * Each segment copies a whole run of nr lanes from there to its first
 * lane; the lanes past its end are overwritten by the next segment, or by
 * the next depth row (bp has nr floats of slack), and the reads past it
 * stay inside the band (it has slack too). Unit stride and stride 2 take
 * this branch-free path, a few SSE loads and stores a run; other strides
 * copy each segment's own lanes.
 *
 * A 1x1, stride-1, unpadded filter makes the column matrix the image
 * itself (C x HW): the micro-panel is then nr contiguous floats of each
 * channel, as the GEMM's own packing of B would copy them. */
#include "conv_implicit_pack.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "isa.h"

static int is_direct(const locus__conv_shape *sh)
{
    return sh->kernel_h == 1 && sh->kernel_w == 1 && sh->stride_h == 1 &&
           sh->stride_w == 1 && sh->pad_h == 0 && sh->pad_w == 0;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Floats read past a band's last element by the whole-run copies. */
static size_t band_slack(size_t nr)
{
    return 2 * nr + 16;
}

size_t locus__cpu_implicit_band_floats(const locus__conv_shape *sh, size_t nr,
                                       size_t out_rows)
{
    if (is_direct(sh))
        return 0;
    size_t wp = sh->width + 2 * sh->pad_w, hp = sh->height + 2 * sh->pad_h;
    if (wp < sh->width || hp < sh->height || out_rows == 0)
        return 0;
    if (out_rows - 1 > (SIZE_MAX - sh->kernel_h) / sh->stride_h)
        return 0;
    size_t rows = (out_rows - 1) * sh->stride_h + sh->kernel_h;
    if (rows > hp)
        rows = hp;
    size_t floats = sh->channels;
    if (rows > SIZE_MAX / wp || floats > SIZE_MAX / (rows * wp))
        return 0;
    floats *= rows * wp;
    if (floats > SIZE_MAX - band_slack(nr))
        return 0;
    return floats + band_slack(nr);
}

void locus__cpu_implicit_band(const locus__conv_shape *sh,
                              const locus__cpu_isa *isa, const float *image,
                              size_t nr, size_t j0, size_t j1, float *buffer,
                              locus__implicit_band *band)
{
    if (is_direct(sh)) {
        *band = (locus__implicit_band){
            .base = image,
            .plane = sh->height * sh->width,
            .row = sh->width,
            .y0 = 0,
            .direct = 1,
        };
        return;
    }
    size_t wp = sh->width + 2 * sh->pad_w;
    size_t y0 = j0 / sh->out_w * sh->stride_h;
    size_t y1 = (j1 - 1) / sh->out_w * sh->stride_h + sh->kernel_h;
    size_t plane = (y1 - y0) * wp, in_plane = sh->height * sh->width;
    /* Padded rows [lo, hi) are inside the image (input row y - pad_h). */
    size_t ph = sh->pad_h;
    size_t lo = y0 < ph ? min_size(ph, y1) : y0;
    size_t hi = y1 < ph + sh->height ? y1 : ph + sh->height;
    if (hi < lo)
        hi = lo;
    float *dst = buffer;
    for (size_t c = 0; c < sh->channels; c++, dst += plane) {
        memset(dst, 0, (lo - y0) * wp * sizeof *dst);
        if (hi > lo)
            isa->pad_rows(dst + (lo - y0) * wp, wp,
                          image + c * in_plane + (lo - ph) * sh->width,
                          sh->width, hi - lo, sh->pad_w, sh->width, wp);
        memset(dst + (hi - y0) * wp, 0, (y1 - hi) * wp * sizeof *dst);
    }
    memset(dst, 0, band_slack(nr) * sizeof *dst);
    *band = (locus__implicit_band){
        .base = buffer, .plane = plane, .row = wp, .y0 = y0, .direct = 0};
}

/* d[0..n) = src[0], src[sw], ...; for sw 2 reads no further than
 * src[2n - 2]. */
static inline void copy_run(float *d, const float *src, size_t n, size_t sw)
{
    size_t l = 0;
    if (sw == 1) {
#if defined(__SSE2__)
        for (; l + 4 <= n; l += 4)
            _mm_storeu_ps(d + l, _mm_loadu_ps(src + l));
#endif
        for (; l < n; l++)
            d[l] = src[l];
        return;
    }
    if (sw == 2) {
#if defined(__SSE2__)
        for (; l + 5 <= n; l += 4) {
            __m128 lo = _mm_loadu_ps(src + 2 * l);
            __m128 hi = _mm_loadu_ps(src + 2 * l + 4);
            _mm_storeu_ps(d + l,
                          _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
        }
#endif
        for (; l < n; l++)
            d[l] = src[2 * l];
        return;
    }
    for (; l < n; l++)
        d[l] = src[l * sw];
}

/* The same for n == 16, unit stride: unrolled to four loads and stores. */
static inline void copy16(float *d, const float *src)
{
#if defined(__SSE2__)
    __m128 a = _mm_loadu_ps(src), b = _mm_loadu_ps(src + 4);
    __m128 c = _mm_loadu_ps(src + 8), e = _mm_loadu_ps(src + 12);
    _mm_storeu_ps(d, a);
    _mm_storeu_ps(d + 4, b);
    _mm_storeu_ps(d + 8, c);
    _mm_storeu_ps(d + 12, e);
#else
    memcpy(d, src, 16 * sizeof *d);
#endif
}

/* d[0..16) = src[0], src[2], ..., src[30], for stride 2 and nr 16: four
 * pairs of loads and a shuffle, no scalar tail. It reads src[31], one
 * float past the run's last tap: inside the band, whose slack covers a
 * whole run of 2 * nr floats past any segment start. copy_run stops its
 * vector loop one step early to avoid that read, which on the 7x7/2 stem
 * leaves a quarter of each run to be moved one float at a time, a large
 * part of the call (docs/PERFORMANCE.md). */
static inline void copy16_s2(float *d, const float *src)
{
#if defined(__SSE2__)
    for (size_t l = 0; l < 16; l += 4) {
        __m128 lo = _mm_loadu_ps(src + 2 * l);
        __m128 hi = _mm_loadu_ps(src + 2 * l + 4);
        _mm_storeu_ps(d + l, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    }
#else
    for (size_t l = 0; l < 16; l++)
        d[l] = src[2 * l];
#endif
}

static void pack_direct(const locus__implicit_band *band, size_t nr, size_t j0,
                        size_t cols, size_t p0, size_t kc, float *bp)
{
    const float *src = band->base + p0 * band->plane + j0;
    if (cols == 16 && nr == 16) {
        /* No memset of nothing per depth row: a call each costs as much as
         * the 16-float copy. The same lines of the next sweep are fetched
         * into L2 now: the kc channel rows are too many streams for the
         * hardware prefetcher, and each line would otherwise wait on memory
         * (the image is read once). */
        for (size_t p = 0; p < kc; p++, src += band->plane, bp += nr) {
#if defined(__GNUC__)
            /* Through an integer: past the image's end on its last
             * sweep, where forming the pointer itself would be undefined
             * (a prefetch never faults). */
            __builtin_prefetch(
                (const void *)((uintptr_t)src +
                               LOCUS__IMPLICIT_PANELS * 16 * sizeof *src),
                0, 2);
#endif
            copy16(bp, src);
        }
        return;
    }
    for (size_t p = 0; p < kc; p++, src += band->plane, bp += nr) {
        copy_run(bp, src, cols, 1);
        memset(bp + cols, 0, (nr - cols) * sizeof *bp);
    }
}

typedef struct segment {
    size_t lane, len; /* lanes [lane, lane + len) */
    size_t offset;    /* of lane `lane` from the depth row's base */
} segment;

/* Splits output positions [j0, j0 + cols) into runs of one output row. */
static size_t make_segments(const locus__conv_shape *sh,
                            const locus__implicit_band *band, size_t j0,
                            size_t cols, segment *seg)
{
    size_t count = 0, oy = j0 / sh->out_w, ox = j0 % sh->out_w;
    for (size_t lane = 0; lane < cols; count++) {
        size_t len =
            cols - lane < sh->out_w - ox ? cols - lane : sh->out_w - ox;
        seg[count] = (segment){lane, len,
                               (oy * sh->stride_h - band->y0) * band->row +
                                   ox * sh->stride_w};
        lane += len;
        ox = 0;
        oy++;
    }
    return count;
}

void locus__cpu_implicit_pack_b(const locus__conv_shape *sh,
                                const locus__implicit_band *band, size_t nr,
                                size_t j0, size_t cols, size_t p0, size_t kc,
                                float *bp, size_t panel_stride)
{
    size_t panels = (cols + nr - 1) / nr;
    if (band->direct) {
        for (size_t t = 0; t < panels; t++) {
            size_t n = cols - t * nr < nr ? cols - t * nr : nr;
            pack_direct(band, nr, j0 + t * nr, n, p0, kc,
                        bp + t * panel_stride);
        }
        return;
    }
    /* All the panels' segments in one list, each with its panel's lane
     * offset folded into `lane`. */
    segment seg[LOCUS__IMPLICIT_PANELS * LOCUS__MAX_NR];
    size_t count = 0;
    for (size_t t = 0; t < panels; t++) {
        size_t n = cols - t * nr < nr ? cols - t * nr : nr;
        size_t first = count;
        count += make_segments(sh, band, j0 + t * nr, n, seg + count);
        for (size_t g = first; g < count; g++)
            seg[g].lane += t * panel_stride;
    }
    size_t R = sh->kernel_h, S = sh->kernel_w, sw = sh->stride_w;
    size_t rs = R * S, r = p0 % rs / S, s = p0 % S;
    const float *base = band->base + p0 / rs * band->plane + r * band->row + s;
    /* After the last s of a row, and after the last r of a channel. */
    size_t next_row = band->row - S, next_plane = band->plane - R * band->row;

    /* Depth row by depth row across the panels: the band row a depth row
     * reads is then read left to right, once. */
    for (size_t p = 0; p < kc; p++, bp += nr) {
        if (sw == 1 && nr == 16) {
            for (size_t g = 0; g < count; g++)
                copy16(bp + seg[g].lane, base + seg[g].offset);
        } else if (sw == 2 && nr == 16) {
            for (size_t g = 0; g < count; g++)
                copy16_s2(bp + seg[g].lane, base + seg[g].offset);
        } else if (sw <= 2) {
            for (size_t g = 0; g < count; g++)
                copy_run(bp + seg[g].lane, base + seg[g].offset, nr, sw);
        } else {
            for (size_t g = 0; g < count; g++)
                copy_run(bp + seg[g].lane, base + seg[g].offset, seg[g].len,
                         sw);
        }
        base++;
        if (++s == S) {
            s = 0;
            base += next_row;
            if (++r == R) {
                r = 0;
                base += next_plane;
            }
        }
    }
}
