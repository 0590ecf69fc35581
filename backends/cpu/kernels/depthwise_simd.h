/* The depthwise kernels (depthwise.h) for one instruction set and one
 * dtype, included by kernels/depthwise_<isa>.c once per dtype after
 * defining:
 *   ELEM, VEC, MASK, LANES        element, vector, lane mask, lanes
 *   NAME(x)                       x##_<dtype>_<isa>
 *   V_ZERO(), V_SET1(x), V_LOADU(p), V_STOREU(p, v)
 *   V_LANES(lo, hi)               mask of lanes [lo, hi), both clamped to
 *                                 [0, LANES]
 *   V_LOAD_MASKED(at, m)          lanes of m loaded from the address at
 *                                 (an integer: lane 0 may lie outside the
 *                                 row), the others zero and never read
 *   V_LOAD_MASKED_IN(at, m, lo, hi) the same where [lo, hi) are bytes
 *                                 readable around at: the includer may
 *                                 read the whole vector when it lies in
 *                                 them and mask it after
 *   V_FMA(a, b, c)                a b + c
 *   V_ADD(a, b)                   a + b
 *   V_MASK_FMA(acc, m, a, b)      a b + acc in the lanes of m, acc in the
 *                                 others
 *   V_STORE_FIRST(p, n, v)        the first n (< LANES) lanes of v to p
 *   V_MAX(a, b), V_MIN(a, b)      b where either is NaN
 *   V_EVENS(lo, hi)               lanes 0, 2, 4, ... of lo then of hi
 *   V_ODDS(lo, hi)                lanes 1, 3, 5, ... of lo then of hi
 *   V_MASK_OF_BITS(bits)          the mask of lanes l whose bit 1 << l is set
 *   FLAT_TABLE                    the most chunk x tap masks on the stack
 * and, where one instruction does it (AVX-512), optionally:
 *   V_SLIDE1(next, cur), V_SLIDE2 lanes 1.. (2..) of cur, then the first
 *                                 one (two) of next
 * Sums run in ELEM, one multiply-add per tap. */

#include <stdint.h>
#include <string.h>

/* Lanes 0, 1, ... of a vector starting at x0 (lane l: x0 + l) from a row
 * of `width` elements: the lanes outside the row come back zero. */
static inline VEC NAME(load_clipped)(const ELEM *row, ptrdiff_t x0,
                                     ptrdiff_t width)
{
    if (x0 >= 0 && x0 + LANES <= width)
        return V_LOADU(row + x0);
    uintptr_t at = (uintptr_t)row + (uintptr_t)x0 * sizeof(ELEM);
    return V_LOAD_MASKED(at, V_LANES(-x0, width - x0));
}

/* One tap's inputs for output lanes l, x = x0 + l stride (stride 1 or
 * 2); `inside`: the whole span lies in the row, no clipping. */
static inline VEC NAME(tap_inputs)(const ELEM *row, ptrdiff_t x0,
                                   ptrdiff_t width, size_t stride, int inside)
{
    if (stride == 1)
        return inside ? V_LOADU(row + x0) : NAME(load_clipped)(row, x0, width);
    if (inside)
        return V_EVENS(V_LOADU(row + x0), V_LOADU(row + x0 + LANES));
    return V_EVENS(NAME(load_clipped)(row, x0, width),
                   NAME(load_clipped)(row, x0 + LANES, width));
}

/* The output lanes l whose x = x0 + l stride lies in [0, width). */
static inline MASK NAME(lanes_inside)(ptrdiff_t x0, ptrdiff_t width,
                                      size_t stride)
{
    ptrdiff_t s = (ptrdiff_t)stride;
    ptrdiff_t lo = x0 >= 0 ? 0 : (-x0 + s - 1) / s;
    ptrdiff_t hi = x0 >= width ? 0 : (width - x0 + s - 1) / s;
    return V_LANES(lo, hi);
}

static inline VEC NAME(activate)(locus_activation activation, VEC x)
{
    /* max(0, x) and min(6, x) return x where x is NaN. */
    switch (activation) {
    case LOCUS_ACTIVATION_RELU:
        return V_MAX(V_ZERO(), x);
    case LOCUS_ACTIVATION_RELU6:
        return V_MIN(V_SET1((ELEM)6), V_MAX(V_ZERO(), x));
    case LOCUS_ACTIVATION_NONE:
        break;
    }
    return x;
}

/* A border chunk's masks for one tap column: the lanes loaded from the
 * row (lo; stride 2: lo and hi, the two loads deinterleaved) and the
 * output lanes whose tap lies inside it (fma). */
typedef struct NAME(border) {
    MASK fma, lo, hi;
} NAME(border);

static inline NAME(border)
    NAME(border_of)(ptrdiff_t x0, ptrdiff_t width, size_t stride)
{
    NAME(border) b;
    b.fma = NAME(lanes_inside)(x0, width, stride);
    b.lo = V_LANES(-x0, width - x0);
    b.hi = V_LANES(-x0 - LANES, width - x0 - LANES);
    return b;
}

/* Bytes readable around a masked load: the layer's input, or a
 * phases buffer. */
typedef struct NAME(readable) {
    uintptr_t begin, end;
} NAME(readable);

static inline NAME(readable)
    NAME(input_readable)(const locus__depthwise_geometry *g)
{
    return (NAME(readable)){g->input_begin, g->input_end};
}

static inline VEC NAME(load_masked)(NAME(readable) span, const ELEM *row,
                                    ptrdiff_t x0, MASK m)
{
    return V_LOAD_MASKED_IN((uintptr_t)row + (uintptr_t)x0 * sizeof(ELEM), m,
                            span.begin, span.end);
}

/* Border masks of this many (chunk, tap column) pairs are computed once
 * per call; past it (very wide rows), per chunk. */
#define BORDER_TABLE 64

#ifdef V_SLIDE1
/* Interior chunks [q0, q0 + count LANES) of one output row of a 3x3
 * layer at stride 1 without dilation_w, whose three input rows r0, r1, r2
 * all lie in the image (xb: the first chunk's tap-0 column). One load per
 * input row and chunk: tap columns 1 and 2 are that vector slid by one or
 * two lanes into the next chunk's (V_SLIDE1, V_SLIDE2), where the
 * general loop loads each tap's vector on its own, unaligned; on Zen 4
 * those nine loads, most across two cache lines, took twice the
 * multiply-adds' time (docs/PERFORMANCE.md). The same values summed in
 * the same order as the general loop, so the same bits. */
static inline __attribute__((always_inline)) void
NAME(slide3_run)(const ELEM *r0, const ELEM *r1, const ELEM *r2, const VEC *t,
                 VEC b, ELEM *o, size_t q0, size_t count, ptrdiff_t xb,
                 ptrdiff_t W, locus_activation activation)
{
    VEC c0 = V_LOADU(r0 + xb), c1 = V_LOADU(r1 + xb), c2 = V_LOADU(r2 + xb);
    for (size_t k = 0; k < count; k++, xb += LANES, q0 += LANES) {
        /* The next chunk's vectors: whole where it is interior too; past
         * the last interior chunk only its first two lanes are used, and
         * the lanes past the row are not read. */
        ptrdiff_t xn = xb + LANES;
        VEC n0, n1, n2;
        if (k + 1 < count) {
            n0 = V_LOADU(r0 + xn);
            n1 = V_LOADU(r1 + xn);
            n2 = V_LOADU(r2 + xn);
        } else {
            MASK m = V_LANES(0, W - xn);
            n0 = V_LOAD_MASKED((uintptr_t)(r0 + xn), m);
            n1 = V_LOAD_MASKED((uintptr_t)(r1 + xn), m);
            n2 = V_LOAD_MASKED((uintptr_t)(r2 + xn), m);
        }
        VEC a0 = V_FMA(c0, t[0], b);
        VEC a1 = V_FMA(c1, t[3], V_ZERO());
        VEC a2 = V_FMA(c2, t[6], V_ZERO());
        a0 = V_FMA(V_SLIDE1(n0, c0), t[1], a0);
        a1 = V_FMA(V_SLIDE1(n1, c1), t[4], a1);
        a2 = V_FMA(V_SLIDE1(n2, c2), t[7], a2);
        a0 = V_FMA(V_SLIDE2(n0, c0), t[2], a0);
        a1 = V_FMA(V_SLIDE2(n1, c1), t[5], a1);
        a2 = V_FMA(V_SLIDE2(n2, c2), t[8], a2);
        V_STOREU(o + q0, NAME(activate)(activation, V_ADD(V_ADD(a0, a1), a2)));
        c0 = n0;
        c1 = n1;
        c2 = n2;
    }
}
#endif

/* The rows kernel with R, S and the stride as arguments: called with
 * constants (3, 3, 1 or 2), the loops over taps unroll and the taps stay
 * in registers. */
static inline __attribute__((always_inline)) void
NAME(rows_body)(const locus__depthwise_geometry *g, const ELEM *planes_in,
                const ELEM *planes_taps, const ELEM *bias, ELEM *planes_out,
                size_t planes, size_t p0, size_t p1, const size_t R,
                const size_t S, const size_t stride)
{
    const ptrdiff_t W = (ptrdiff_t)g->width;
    const size_t H = g->height, Q = g->out_w, dw = g->dilation_w;
    /* Elements one tap's loads cover from lane 0's x on. */
    const ptrdiff_t reach = stride == 1 ? LANES : 2 * LANES;
    const ptrdiff_t last_tap = (ptrdiff_t)((S - 1) * dw);
    const size_t chunks = (Q + LANES - 1) / LANES;
    const NAME(readable) span = NAME(input_readable)(g);
    /* The masks depend on the chunk and the tap column only: the same for
     * every row. */
    NAME(border) table[BORDER_TABLE];
    const int tabled = chunks * S <= BORDER_TABLE;
    if (tabled)
        for (size_t j = 0; j < chunks; j++)
            for (size_t s = 0; s < S; s++)
                table[j * S + s] =
                    NAME(border_of)((ptrdiff_t)(j * LANES * stride + s * dw) -
                                        (ptrdiff_t)g->pad_left,
                                    W, stride);
#ifdef V_SLIDE1
    /* The interior chunks [j_lo, j_hi) of a row, every lane of every tap
     * inside it, which slide3_run takes at stride 1 (3x3, no
     * dilation_w) where the row's three input rows lie in the image. */
    size_t j_lo = chunks, j_hi = 0;
    for (size_t j = 0; j < chunks; j++) {
        ptrdiff_t xb = (ptrdiff_t)(j * LANES * stride) - (ptrdiff_t)g->pad_left;
        if (xb >= 0 && xb + last_tap + reach <= W && j * LANES + LANES <= Q) {
            j_lo = j < j_lo ? j : j_lo;
            j_hi = j + 1;
        }
    }
    const int slides =
        stride == 1 && R == 3 && S == 3 && dw == 1 && j_hi > j_lo;
    const locus_activation activation = g->activation;
#endif
    for (size_t plane = 0; plane < planes; plane++) {
        const ELEM *in = planes_in + plane * H * (size_t)W;
        const ELEM *taps = planes_taps + plane * R * S;
        ELEM *out = planes_out + plane * g->out_h * Q;
        VEC t[LOCUS__DEPTHWISE_MAX_TAPS];
        for (size_t i = 0; i < R * S; i++)
            t[i] = V_SET1(taps[i]);
        const VEC b = V_SET1(bias ? bias[plane] : (ELEM)0);
        for (size_t p = p0; p < p1; p++) {
            /* The input rows of the taps, NULL in the padding. */
            const ELEM *rows[LOCUS__DEPTHWISE_MAX_TAPS];
            for (size_t r = 0; r < R; r++) {
                size_t y = p * g->stride_h + r * g->dilation_h;
                rows[r] = y >= g->pad_top && y - g->pad_top < H
                              ? in + (y - g->pad_top) * (size_t)W
                              : NULL;
            }
            ELEM *o = out + p * Q;
            for (size_t j = 0; j < chunks; j++) {
#ifdef V_SLIDE1
                if (slides && j == j_lo && rows[0] && rows[1] && rows[2]) {
                    NAME(slide3_run)
                    (rows[0], rows[1], rows[2], t, b, o, j_lo * LANES,
                     j_hi - j_lo,
                     (ptrdiff_t)(j_lo * LANES) - (ptrdiff_t)g->pad_left, W,
                     activation);
                    j = j_hi - 1;
                    continue;
                }
#endif
                size_t q0 = j * LANES;
                ptrdiff_t xb =
                    (ptrdiff_t)(q0 * stride) - (ptrdiff_t)g->pad_left;
                /* Three sums (tap rows r mod 3), so that a chunk's chain of
                 * dependent multiply-adds is S long rather than R S. */
                VEC a[3] = {b, V_ZERO(), V_ZERO()};
                if (xb >= 0 && xb + last_tap + reach <= W) {
                    /* Interior: every lane of every tap inside the row. */
                    for (size_t r = 0; r < R; r++) {
                        if (!rows[r])
                            continue;
                        for (size_t s = 0; s < S; s++)
                            a[r % 3] =
                                V_FMA(NAME(tap_inputs)(rows[r],
                                                       xb + (ptrdiff_t)(s * dw),
                                                       W, stride, 1),
                                      t[r * S + s], a[r % 3]);
                    }
                } else {
                    /* Border: the lanes whose tap falls in the padding keep
                     * acc (the tap is skipped, as in the definition). */
                    for (size_t s = 0; s < S; s++) {
                        ptrdiff_t x0 = xb + (ptrdiff_t)(s * dw);
                        NAME(border)
                        m = tabled ? table[j * S + s]
                                   : NAME(border_of)(x0, W, stride);
                        for (size_t r = 0; r < R; r++) {
                            if (!rows[r])
                                continue;
                            VEC v =
                                stride == 1
                                    ? NAME(load_masked)(span, rows[r], x0, m.lo)
                                    : V_EVENS(NAME(load_masked)(span, rows[r],
                                                                x0, m.lo),
                                              NAME(load_masked)(span, rows[r],
                                                                x0 + LANES,
                                                                m.hi));
                            a[r % 3] =
                                V_MASK_FMA(a[r % 3], m.fma, v, t[r * S + s]);
                        }
                    }
                }
                VEC acc = NAME(activate)(g->activation,
                                         V_ADD(V_ADD(a[0], a[1]), a[2]));
                if (q0 + LANES <= Q)
                    V_STOREU(o + q0, acc);
                else
                    V_STORE_FIRST(o + q0, Q - q0, acc);
            }
        }
    }
}

/* Small planes at stride 1 with Q = W (7x7 and the like): the plane's
 * outputs as one flat row of P Q, chunks spanning several output rows.
 * Output i = p Q + q reads input i + (r dilation_h - pad_top) W + s
 * dilation_w - pad_left for tap (r, s), in the lanes where (y, x) lies in
 * the image: one masked load and multiply-add a tap and chunk, the masks
 * computed once a call (FLAT_TABLE, the includer's, bounds chunks x
 * taps: the table lives on the stack). A 7x7 plane is four 16-float
 * chunks instead of seven rows of 7 lanes, and a plane of any width runs
 * without the rows' per-row set-up. */

/* Stride 2 (both ways): the plane is first split into its four phases
 * (even and odd rows by even and odd columns, each ceil(H / 2) x ceil(W
 * / 2), PHASES_MAX elements in all on the stack) by deinterleaving loads;
 * output (p, q) then reads phase (y mod 2, x mod 2) at (p + floor((r
 * dilation_h - pad_top) / 2), q + ...): stride 1 in the phase, so the flat
 * row works with Q = ceil(W / 2). */
#define PHASES_MAX 4096

static inline int NAME(flat_takes)(const locus__depthwise_geometry *g,
                                   size_t p0, size_t p1)
{
    size_t chunks = (g->out_h * g->out_w + LANES - 1) / LANES;
    size_t stride = g->stride_w;
    if (g->stride_h != stride || (stride != 1 && stride != 2) || p0 != 0 ||
        p1 != g->out_h || chunks * g->kernel_h * g->kernel_w > FLAT_TABLE)
        return 0;
    size_t w2 = (g->width + 1) / 2, h2 = (g->height + 1) / 2;
    return stride == 1 ? g->out_w == g->width
                       : g->out_w == w2 && 4 * h2 * w2 <= PHASES_MAX;
}

/* floor(v / 2) and v mod 2 for a signed v. */
static inline ptrdiff_t NAME(half_down)(ptrdiff_t v)
{
    return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

/* The four phases of an H x W plane, phase (a, b) at (2 a + b) h2 w2,
 * row i holding in[(2 i + a) W + 2 j + b] for j < w2 (a last odd column
 * or row past the plane is left unwritten: the masks never read it). */
static inline void NAME(split_phases)(NAME(readable) span, const ELEM *in,
                                      size_t H, size_t W, ELEM *phases)
{
    const size_t h2 = (H + 1) / 2, w2 = (W + 1) / 2;
    /* Pieces of 2 LANES inputs: the whole ones with plain loads and
     * stores, the last partial one with masks made once a plane. */
    const size_t whole = W / (2 * LANES), x_last = whole * 2 * LANES;
    const ptrdiff_t rest = (ptrdiff_t)(W - x_last);
    const MASK lo_mask = V_LANES(0, rest), hi_mask = V_LANES(0, rest - LANES);
    const size_t n_last = w2 - x_last / 2;
    for (size_t y = 0; y < H; y++) {
        const ELEM *row = in + y * W;
        ELEM *even = phases + ((y % 2) * 2 * h2 + y / 2) * w2;
        ELEM *odd = even + h2 * w2;
        for (size_t k = 0; k < whole; k++) {
            VEC lo = V_LOADU(row + 2 * k * LANES);
            VEC hi = V_LOADU(row + 2 * k * LANES + LANES);
            V_STOREU(even + k * LANES, V_EVENS(lo, hi));
            V_STOREU(odd + k * LANES, V_ODDS(lo, hi));
        }
        if (rest > 0) {
            VEC lo = NAME(load_masked)(span, row, (ptrdiff_t)x_last, lo_mask);
            VEC hi = NAME(load_masked)(span, row, (ptrdiff_t)(x_last + LANES),
                                       hi_mask);
            V_STORE_FIRST(even + x_last / 2, n_last, V_EVENS(lo, hi));
            V_STORE_FIRST(odd + x_last / 2, n_last, V_ODDS(lo, hi));
        }
    }
}

#ifdef V_SLIDE1
/* The LANES elements from x of a flat plane, those outside the readable
 * span zero and not read. */
static inline VEC NAME(load_span)(NAME(readable) span, const ELEM *in,
                                  ptrdiff_t x)
{
    uintptr_t at = (uintptr_t)in + (uintptr_t)x * sizeof(ELEM);
    if (at >= span.begin && at + LANES * sizeof(ELEM) <= span.end)
        return V_LOADU((const ELEM *)at);
    ptrdiff_t lo = ((ptrdiff_t)span.begin - (ptrdiff_t)at) /
                   (ptrdiff_t)sizeof(ELEM),
              hi = ((ptrdiff_t)span.end - (ptrdiff_t)at) /
                   (ptrdiff_t)sizeof(ELEM);
    return V_LOAD_MASKED(at, V_LANES(lo, hi));
}

/* flat_body's chunks for a 3x3 layer at stride 1 without dilation_w: the
 * three taps of a filter row read consecutive inputs, so one load per
 * filter row and chunk serves them, slid by one and two lanes into the
 * next chunk's vector (V_SLIDE1, V_SLIDE2) as slide3_run does on rows;
 * the lanes whose tap lies outside the image are skipped by the same
 * masks, so the values there (neighbouring rows or planes) are never
 * used. The same values in the same order as flat_body, so the same
 * bits. */
static inline __attribute__((always_inline)) void
NAME(flat_slide3)(NAME(readable) span, const ELEM *in, const VEC *t, VEC b,
                  ELEM *out, size_t PQ, const ptrdiff_t *shift,
                  const MASK *table, locus_activation activation)
{
    const size_t chunks = (PQ + LANES - 1) / LANES;
    VEC c0 = NAME(load_span)(span, in, shift[0]),
        c1 = NAME(load_span)(span, in, shift[3]),
        c2 = NAME(load_span)(span, in, shift[6]);
    for (size_t j = 0; j < chunks; j++) {
        const ptrdiff_t x = (ptrdiff_t)((j + 1) * LANES);
        VEC n0 = NAME(load_span)(span, in, x + shift[0]),
            n1 = NAME(load_span)(span, in, x + shift[3]),
            n2 = NAME(load_span)(span, in, x + shift[6]);
        const MASK *m = table + j * 9;
        VEC a0 = V_MASK_FMA(b, m[0], c0, t[0]);
        VEC a1 = V_MASK_FMA(V_ZERO(), m[3], c1, t[3]);
        VEC a2 = V_MASK_FMA(V_ZERO(), m[6], c2, t[6]);
        a0 = V_MASK_FMA(a0, m[1], V_SLIDE1(n0, c0), t[1]);
        a1 = V_MASK_FMA(a1, m[4], V_SLIDE1(n1, c1), t[4]);
        a2 = V_MASK_FMA(a2, m[7], V_SLIDE1(n2, c2), t[7]);
        a0 = V_MASK_FMA(a0, m[2], V_SLIDE2(n0, c0), t[2]);
        a1 = V_MASK_FMA(a1, m[5], V_SLIDE2(n1, c1), t[5]);
        a2 = V_MASK_FMA(a2, m[8], V_SLIDE2(n2, c2), t[8]);
        VEC acc = NAME(activate)(activation, V_ADD(V_ADD(a0, a1), a2));
        if ((j + 1) * LANES <= PQ)
            V_STOREU(out + j * LANES, acc);
        else
            V_STORE_FIRST(out + j * LANES, PQ - j * LANES, acc);
        c0 = n0, c1 = n1, c2 = n2;
    }
}
#endif

static inline __attribute__((always_inline)) void
NAME(flat_body)(const locus__depthwise_geometry *g, const ELEM *planes_in,
                const ELEM *planes_taps, const ELEM *bias, ELEM *planes_out,
                size_t planes, const size_t R, const size_t S,
                const size_t stride, ELEM *phases)
{
    const size_t H = g->height, W = g->width, P = g->out_h, Q = g->out_w;
    const size_t PQ = P * Q, chunks = (PQ + LANES - 1) / LANES;
    const size_t h2 = (H + 1) / 2, w2 = (W + 1) / 2;
    MASK table[FLAT_TABLE];
    ptrdiff_t shift[LOCUS__DEPTHWISE_MAX_TAPS];
    for (size_t r = 0; r < R; r++)
        for (size_t s = 0; s < S; s++) {
            ptrdiff_t dy = (ptrdiff_t)(r * g->dilation_h) -
                           (ptrdiff_t)g->pad_top,
                      dx = (ptrdiff_t)(s * g->dilation_w) -
                           (ptrdiff_t)g->pad_left;
            if (stride == 1)
                shift[r * S + s] = dy * (ptrdiff_t)W + dx;
            else {
                ptrdiff_t fy = NAME(half_down)(dy), fx = NAME(half_down)(dx);
                ptrdiff_t phase = (dy - 2 * fy) * 2 + (dx - 2 * fx);
                shift[r * S + s] =
                    phase * (ptrdiff_t)(h2 * w2) + fy * (ptrdiff_t)w2 + fx;
            }
            /* The outputs whose tap is inside: in each row p whose input
             * row is, the columns [q0, q1) (x = q stride + s dilation_w -
             * pad_left in [0, W)), a range of lanes. */
            size_t shift_x = s * g->dilation_w;
            size_t q0 = shift_x >= g->pad_left
                            ? 0
                            : (g->pad_left - shift_x + stride - 1) / stride;
            size_t q1 = W + g->pad_left > shift_x
                            ? (W + g->pad_left - shift_x + stride - 1) / stride
                            : 0;
            q1 = q1 < Q ? q1 : Q;
            uint16_t bits[FLAT_TABLE];
            memset(bits, 0, chunks * sizeof *bits);
            for (size_t p = 0; p < P && q0 < q1; p++) {
                size_t y = p * stride + r * g->dilation_h;
                if (y < g->pad_top || y - g->pad_top >= H)
                    continue;
                for (size_t i = p * Q + q0, end = p * Q + q1; i < end;) {
                    size_t lane = i % LANES, n = LANES - lane;
                    n = n < end - i ? n : end - i;
                    bits[i / LANES] |= (uint16_t)(((1u << n) - 1u) << lane);
                    i += n;
                }
            }
            for (size_t j = 0; j < chunks; j++)
                table[j * R * S + r * S + s] = V_MASK_OF_BITS(bits[j]);
        }
    const NAME(readable) input_span = NAME(input_readable)(g);
    /* Stride 2 reads the phases (PHASES_MAX elements), stride 1 the
     * input. */
    const NAME(readable) span =
        stride != 1 ? (NAME(readable)){(uintptr_t)phases,
                                       (uintptr_t)(phases + PHASES_MAX)}
                    : input_span;
    for (size_t plane = 0; plane < planes; plane++) {
        const ELEM *in = planes_in + plane * H * W;
        if (stride != 1) {
            NAME(split_phases)(input_span, in, H, W, phases);
            in = phases;
        }
        const ELEM *taps = planes_taps + plane * R * S;
        ELEM *out = planes_out + plane * PQ;
        VEC t[LOCUS__DEPTHWISE_MAX_TAPS];
        for (size_t i = 0; i < R * S; i++)
            t[i] = V_SET1(taps[i]);
        const VEC b = V_SET1(bias ? bias[plane] : (ELEM)0);
#ifdef V_SLIDE1
        if (stride == 1 && R == 3 && S == 3 && g->dilation_w == 1) {
            NAME(flat_slide3)
            (span, in, t, b, out, PQ, shift, table, g->activation);
            continue;
        }
#endif
        for (size_t j = 0; j < chunks; j++) {
            VEC a[3] = {b, V_ZERO(), V_ZERO()};
            const MASK *m = table + j * R * S;
            for (size_t r = 0; r < R; r++)
                for (size_t s = 0; s < S; s++) {
                    size_t tap = r * S + s;
                    VEC v = NAME(load_masked)(
                        span, in, (ptrdiff_t)(j * LANES) + shift[tap], m[tap]);
                    a[r % 3] = V_MASK_FMA(a[r % 3], m[tap], v, t[tap]);
                }
            VEC acc =
                NAME(activate)(g->activation, V_ADD(V_ADD(a[0], a[1]), a[2]));
            if ((j + 1) * LANES <= PQ)
                V_STOREU(out + j * LANES, acc);
            else
                V_STORE_FIRST(out + j * LANES, PQ - j * LANES, acc);
        }
    }
}

/* The flat path at stride 2, with its phases' buffer: in a function of
 * its own, so that only it has the buffer on its stack. */
static __attribute__((noinline)) void
NAME(flat_strided)(const locus__depthwise_geometry *g, const ELEM *in,
                   const ELEM *taps, const ELEM *bias, ELEM *out, size_t planes)
{
    ELEM phases[PHASES_MAX];
    size_t R = g->kernel_h, S = g->kernel_w;
    if (R == 3 && S == 3)
        NAME(flat_body)(g, in, taps, bias, out, planes, 3, 3, 2, phases);
    else
        NAME(flat_body)(g, in, taps, bias, out, planes, R, S, 2, phases);
}

void NAME(locus__depthwise_rows)(const locus__depthwise_geometry *g,
                                 const ELEM *in, const ELEM *taps,
                                 const ELEM *bias, ELEM *out, size_t planes,
                                 size_t p0, size_t p1)
{
    size_t R = g->kernel_h, S = g->kernel_w;
    if (NAME(flat_takes)(g, p0, p1)) {
        if (g->stride_w == 2)
            NAME(flat_strided)(g, in, taps, bias, out, planes);
        else if (R == 3 && S == 3)
            NAME(flat_body)(g, in, taps, bias, out, planes, 3, 3, 1, NULL);
        else
            NAME(flat_body)(g, in, taps, bias, out, planes, R, S, 1, NULL);
    } else if (R == 3 && S == 3 && g->stride_w == 1)
        NAME(rows_body)(g, in, taps, bias, out, planes, p0, p1, 3, 3, 1);
    else if (R == 3 && S == 3)
        NAME(rows_body)(g, in, taps, bias, out, planes, p0, p1, 3, 3, 2);
    else if (g->stride_w == 1)
        NAME(rows_body)(g, in, taps, bias, out, planes, p0, p1, R, S, 1);
    else
        NAME(rows_body)(g, in, taps, bias, out, planes, p0, p1, R, S, 2);
}

/* [*t0, *t1): the taps t < taps whose coordinate o stride + t dilation -
 * pad lies in [0, size) (an interval, as it grows with t). */
static inline void NAME(taps_inside)(size_t o, size_t stride, size_t dilation,
                                     size_t pad, size_t size, size_t taps,
                                     size_t *t0, size_t *t1)
{
    size_t first = 0, base = o * stride;
    while (first < taps && base + first * dilation < pad)
        first++;
    size_t end = first;
    while (end < taps && base + end * dilation - pad < size)
        end++;
    *t0 = first;
    *t1 = end;
}

/* NHWC with any number of taps, read from memory. */
static void NAME(nhwc_any)(const locus__depthwise_geometry *g, size_t channels,
                           const ELEM *in, const ELEM *taps, const ELEM *bias,
                           ELEM *out, size_t p0, size_t p1)
{
    const size_t C = channels, W = g->width, Q = g->out_w, S = g->kernel_w;
    for (size_t p = p0; p < p1; p++) {
        size_t r0, r1;
        NAME(taps_inside)
        (p, g->stride_h, g->dilation_h, g->pad_top, g->height, g->kernel_h, &r0,
         &r1);
        for (size_t q = 0; q < Q; q++) {
            size_t s0, s1;
            NAME(taps_inside)
            (q, g->stride_w, g->dilation_w, g->pad_left, W, S, &s0, &s1);
            ELEM *o = out + (p * Q + q) * C;
            /* Tap (r, s)'s inputs: in + (at + r row + s column), the
             * sum taken modulo 2^N (at wraps where the window starts in
             * the padding; the taps read are inside). */
            size_t at = (p * g->stride_h - g->pad_top) * W * C +
                        (q * g->stride_w - g->pad_left) * C;
            size_t row = g->dilation_h * W * C, column = g->dilation_w * C;
            for (size_t c0 = 0; c0 < C; c0 += LANES) {
                /* The channels' vectors in full, or their first n lanes
                 * (none past the channels read). */
                size_t n = C - c0 < LANES ? C - c0 : LANES;
                MASK m = V_LANES(0, (ptrdiff_t)n);
#define LOAD_CHANNELS(ptr)                                                     \
    (n == LANES ? V_LOADU(ptr) : V_LOAD_MASKED((uintptr_t)(ptr), m))
                VEC acc = bias ? LOAD_CHANNELS(bias + c0) : V_ZERO();
                for (size_t r = r0; r < r1; r++)
                    for (size_t s = s0; s < s1; s++)
                        acc = V_FMA(LOAD_CHANNELS(
                                        in + (at + r * row + s * column + c0)),
                                    LOAD_CHANNELS(taps + (r * S + s) * C + c0),
                                    acc);
#undef LOAD_CHANNELS
                acc = NAME(activate)(g->activation, acc);
                if (n == LANES)
                    V_STOREU(o + c0, acc);
                else
                    V_STORE_FIRST(o + c0, n, acc);
            }
        }
    }
}

/* NHWC with R and S as arguments (constants 3, 3: the taps of a channel
 * chunk stay in registers across the row's outputs). */
static inline __attribute__((always_inline)) void
NAME(nhwc_body)(const locus__depthwise_geometry *g, size_t channels,
                const ELEM *in, const ELEM *taps, const ELEM *bias, ELEM *out,
                size_t p0, size_t p1, const size_t R, const size_t S)
{
    const size_t C = channels, W = g->width, Q = g->out_w;
    const size_t row = g->dilation_h * W * C, column = g->dilation_w * C;
    for (size_t p = p0; p < p1; p++) {
        size_t r0, r1;
        NAME(taps_inside)
        (p, g->stride_h, g->dilation_h, g->pad_top, g->height, R, &r0, &r1);
        for (size_t c0 = 0; c0 < C; c0 += LANES) {
            /* The channels' vectors in full, or their first n lanes (none
             * past the channels read). */
            size_t n = C - c0 < LANES ? C - c0 : LANES;
            MASK m = V_LANES(0, (ptrdiff_t)n);
#define LOAD_CHANNELS(ptr)                                                     \
    (n == LANES ? V_LOADU(ptr) : V_LOAD_MASKED((uintptr_t)(ptr), m))
            VEC t[LOCUS__DEPTHWISE_MAX_TAPS];
            for (size_t i = 0; i < R * S; i++)
                t[i] = LOAD_CHANNELS(taps + i * C + c0);
            const VEC b = bias ? LOAD_CHANNELS(bias + c0) : V_ZERO();
            for (size_t q = 0; q < Q; q++) {
                size_t s0, s1;
                NAME(taps_inside)
                (q, g->stride_w, g->dilation_w, g->pad_left, W, S, &s0, &s1);
                /* Tap (r, s)'s inputs: in + (at + r row + s column), the
                 * sum taken modulo 2^N (at wraps where the window starts
                 * in the padding; the taps read are inside). */
                size_t at = (p * g->stride_h - g->pad_top) * W * C +
                            (q * g->stride_w - g->pad_left) * C + c0;
                VEC a[3] = {b, V_ZERO(), V_ZERO()};
                for (size_t r = 0; r < R; r++) {
                    if (r < r0 || r >= r1)
                        continue;
                    for (size_t s = 0; s < S; s++) {
                        if (s < s0 || s >= s1)
                            continue;
                        a[r % 3] = V_FMA(
                            LOAD_CHANNELS(in + (at + r * row + s * column)),
                            t[r * S + s], a[r % 3]);
                    }
                }
                VEC acc = NAME(activate)(g->activation,
                                         V_ADD(V_ADD(a[0], a[1]), a[2]));
                ELEM *o = out + (p * Q + q) * C + c0;
                if (n == LANES)
                    V_STOREU(o, acc);
                else
                    V_STORE_FIRST(o, n, acc);
            }
#undef LOAD_CHANNELS
        }
    }
}

void NAME(locus__depthwise_nhwc)(const locus__depthwise_geometry *g,
                                 size_t channels, const ELEM *in,
                                 const ELEM *taps, const ELEM *bias, ELEM *out,
                                 size_t p0, size_t p1)
{
    size_t R = g->kernel_h, S = g->kernel_w;
    if (R == 3 && S == 3)
        NAME(nhwc_body)(g, channels, in, taps, bias, out, p0, p1, 3, 3);
    else if (R * S <= LOCUS__DEPTHWISE_MAX_TAPS)
        NAME(nhwc_body)(g, channels, in, taps, bias, out, p0, p1, R, S);
    else
        NAME(nhwc_any)(g, channels, in, taps, bias, out, p0, p1);
}
