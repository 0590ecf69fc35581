/* conv2d as layers use it (the features of 0.3: groups, dilation, padding
 * on each side, a bias, relu/relu6, NHWC input and/or output), in both
 * programs: the f32 one and, after conv_layer_f64.cl's define, the f64 one,
 * with the same kernel names (the host enqueues them alike). Sums run in
 * the element type in the order c, r, s, as the CPU's direct sum, so the
 * error bound of locus.h holds as it does there.
 *
 * Both kernels take one work-item per output element, numbered in the
 * output's own layout (q fastest for NCHW, k fastest for NHWC), so that
 * neighbouring work-items store to neighbouring addresses. The filter is
 * KCRS for an NCHW input and KRSC for an NHWC one (the input's layout
 * decides); bias has K elements, read where has_bias.
 *
 * Indices run in ulong: the host checks only that each size fits a uint
 * (opencl_conv_layer.c), and a tensor may be past 2^32 elements. */

#ifdef LOCUS_CONV_LAYER_F64
typedef double layer_real;
#else
typedef float layer_real;
#endif

typedef struct layer_shape {
    uint C, H, W, K, R, S, G, P, Q;
    uint sh, sw, pt, pl, dh, dw;
    uint activation, in_nhwc, out_nhwc;
} layer_shape;

/* Comparisons leave NaN as it is (locus.h: NaN stays NaN). */
static layer_real layer_activate(uint activation, layer_real x)
{
    if (activation == 1)
        return x < (layer_real)0 ? (layer_real)0 : x;
    if (activation == 2)
        return x < (layer_real)0   ? (layer_real)0
               : x > (layer_real)6 ? (layer_real)6
                                   : x;
    return x;
}

/* Output element id's coordinates and its offset (which is id). */
static void layer_output_coords(const layer_shape *l, ulong id, ulong *n,
                                uint *k, uint *p, uint *q)
{
    if (l->out_nhwc) {
        *k = (uint)(id % l->K);
        ulong rest = id / l->K;
        *q = (uint)(rest % l->Q);
        rest /= l->Q;
        *p = (uint)(rest % l->P);
        *n = rest / l->P;
    } else {
        *q = (uint)(id % l->Q);
        ulong rest = id / l->Q;
        *p = (uint)(rest % l->P);
        rest /= l->P;
        *k = (uint)(rest % l->K);
        *n = rest / l->K;
    }
}

static layer_real layer_input(__global const layer_real *x,
                              const layer_shape *l, ulong n, uint c, uint y,
                              uint w)
{
    return l->in_nhwc ? x[((n * l->H + y) * l->W + w) * l->C + c]
                      : x[((n * l->C + c) * l->H + y) * l->W + w];
}

/* Weight (k, c within the group, r, s). */
static layer_real layer_filter(__global const layer_real *f,
                               const layer_shape *l, uint cg, uint k, uint c,
                               uint r, uint s)
{
    return l->in_nhwc ? f[(((ulong)k * l->R + r) * l->S + s) * cg + c]
                      : f[(((ulong)k * cg + c) * l->R + r) * l->S + s];
}

/* The sum over one group's channels [c0, c0 + cg) of output (n, k, p, q). */
static layer_real layer_sum(__global const layer_real *x,
                            __global const layer_real *f, const layer_shape *l,
                            ulong n, uint k, uint p, uint q, uint c0, uint cg)
{
    layer_real acc = (layer_real)0;
    const int y0 = (int)(p * l->sh) - (int)l->pt;
    const int w0 = (int)(q * l->sw) - (int)l->pl;
    for (uint c = 0; c < cg; c++)
        for (uint r = 0; r < l->R; r++) {
            const int y = y0 + (int)(r * l->dh);
            if (y < 0 || y >= (int)l->H)
                continue;
            for (uint s = 0; s < l->S; s++) {
                const int w = w0 + (int)(s * l->dw);
                if (w < 0 || w >= (int)l->W)
                    continue;
                acc += layer_input(x, l, n, c0 + c, (uint)y, (uint)w) *
                       layer_filter(f, l, cg, k, c, r, s);
            }
        }
    return acc;
}

#define LAYER_SHAPE_ARGS                                                       \
    uint C, uint H, uint W, uint K, uint R, uint S, uint G, uint P, uint Q,    \
        uint sh, uint sw, uint pt, uint pl, uint dh, uint dw,                  \
        uint activation, uint in_nhwc, uint out_nhwc
#define LAYER_SHAPE_INIT                                                       \
    {C,  H,  W,  K,  R,  S,  G,          P,       Q,                           \
     sh, sw, pt, pl, dh, dw, activation, in_nhwc, out_nhwc}

/* Any layer: each output's group's C/G channels, R x S taps. */
__kernel void locus_conv_layer_direct(__global const layer_real *x,
                                      __global const layer_real *f,
                                      __global const layer_real *bias,
                                      uint has_bias,
                                      __global layer_real *out, ulong total,
                                      LAYER_SHAPE_ARGS)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const layer_shape l = LAYER_SHAPE_INIT;
    ulong n;
    uint k, p, q;
    layer_output_coords(&l, id, &n, &k, &p, &q);
    const uint cg = C / G, kg = K / G;
    layer_real v = layer_sum(x, f, &l, n, k, p, q, (k / kg) * cg, cg);
    if (has_bias)
        v += bias[k];
    out[id] = layer_activate(activation, v);
}

/* groups == C: output channel k reads input channel k / (K / C) only, one
 * tap after another. Bandwidth-bound: no reuse worth local memory at these
 * R x S, and the NCHW output's q-fastest numbering makes both the stores
 * and (at stride 1) the input reads of a work-group contiguous. */
__kernel void locus_conv_layer_depthwise(__global const layer_real *x,
                                         __global const layer_real *f,
                                         __global const layer_real *bias,
                                         uint has_bias,
                                         __global layer_real *out, ulong total,
                                         LAYER_SHAPE_ARGS)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const layer_shape l = LAYER_SHAPE_INIT;
    ulong n;
    uint k, p, q;
    layer_output_coords(&l, id, &n, &k, &p, &q);
    const uint c = k / (K / C);
    layer_real acc = (layer_real)0;
    const int y0 = (int)(p * sh) - (int)pt, w0 = (int)(q * sw) - (int)pl;
    for (uint r = 0; r < R; r++) {
        const int y = y0 + (int)(r * dh);
        if (y < 0 || y >= (int)H)
            continue;
        for (uint s = 0; s < S; s++) {
            const int w = w0 + (int)(s * dw);
            if (w < 0 || w >= (int)W)
                continue;
            /* Filter K x 1 x R x S in both layouts (KCRS and KRSC agree
             * with one channel per group). */
            acc += layer_input(x, &l, n, c, (uint)y, (uint)w) *
                   f[((ulong)k * R + r) * S + s];
        }
    }
    if (has_bias)
        acc += bias[k];
    out[id] = layer_activate(activation, acc);
}

/* im2col generalised to the features, for a GEMM per group: for images
 * first + i of a chunk, cols[i][g][row][p Q + q] holds the input under
 * tap row of output (p, q), zero in the padding (any side) or past it.
 * row runs in the filter's order, (c R + r) S + s for KCRS (an NCHW
 * input), (r S + s) Cg + c for KRSC (an NHWC one, read in place), so
 * group g's filter rows are a plain Kg x (Cg R S) matrix in both. */
__kernel void locus_conv_layer_lower(__global const layer_real *x,
                                     ulong first, __global layer_real *cols,
                                     ulong total, LAYER_SHAPE_ARGS)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const layer_shape l = LAYER_SHAPE_INIT;
    const uint cg = C / G, depth = cg * R * S, pq_count = P * Q;
    const uint pq = (uint)(id % pq_count);
    ulong rest = id / pq_count;
    const uint row = (uint)(rest % depth);
    rest /= depth;
    const uint g = (uint)(rest % G);
    const ulong n = first + rest / G;
    uint c, r, s;
    if (in_nhwc) {
        c = row % cg;
        const uint rs = row / cg;
        r = rs / S;
        s = rs % S;
    } else {
        s = row % S;
        const uint cr = row / S;
        r = cr % R;
        c = cr / R;
    }
    const uint p = pq / Q, q = pq % Q;
    const int y = (int)(p * sh + r * dh) - (int)pt;
    const int w = (int)(q * sw + s * dw) - (int)pl;
    layer_real v = (layer_real)0;
    if (y >= 0 && y < (int)H && w >= 0 && w < (int)W)
        v = layer_input(x, &l, n, g * cg + c, (uint)y, (uint)w);
    cols[id] = v;
}

/* The bias and the activation after the GEMMs, in place over the whole
 * output (P Q positions per channel; channel k of element id as the
 * layout numbers it). */
__kernel void locus_conv_layer_epilogue(__global layer_real *out, ulong total,
                                        __global const layer_real *bias,
                                        uint has_bias, uint K, uint PQ,
                                        uint out_nhwc, uint activation)
{
    const ulong id = get_global_id(0);
    if (id >= total)
        return;
    const uint k = out_nhwc ? (uint)(id % K) : (uint)(id / PQ % K);
    layer_real v = out[id];
    if (has_bias)
        v += bias[k];
    out[id] = layer_activate(activation, v);
}
