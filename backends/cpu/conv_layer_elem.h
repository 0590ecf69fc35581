/* One dtype's conv2d layer kernels (conv_layer.h), included by
 * conv_layer_kernels.c once per dtype with ELEM the element type and
 * ELEM_NAME(x) naming its functions. Sums run in ELEM, in the order c, r,
 * s, as the direct sum the error bound of locus.h describes. */

static inline ELEM ELEM_NAME(activate)(const locus__conv_layer *l, ELEM x)
{
    /* Comparisons leave NaN as it is: a NaN output stays visible. */
    switch (l->activation) {
    case LOCUS_ACTIVATION_RELU:
        return x < 0 ? (ELEM)0 : x;
    case LOCUS_ACTIVATION_RELU6:
        return x < 0 ? (ELEM)0 : x > 6 ? (ELEM)6 : x;
    case LOCUS_ACTIVATION_NONE:
        break;
    }
    return x;
}

static inline ELEM ELEM_NAME(bias_of)(const locus__conv_layer *l, size_t k)
{
    return l->bias ? ((const ELEM *)l->bias)[k] : (ELEM)0;
}

/* Input y (or x) of output p with tap r: p stride + r dilation - pad,
 * which may fall in the padding (false). */
static inline int ELEM_NAME(source)(size_t p, size_t stride, size_t r,
                                    size_t dilation, size_t pad, size_t size,
                                    size_t *at)
{
    size_t y = p * stride + r * dilation;
    if (y < pad || y - pad >= size)
        return 0;
    *at = y - pad;
    return 1;
}

static void ELEM_NAME(direct_rows)(const locus__conv_layer *l, size_t row0,
                                   size_t row1)
{
    const ELEM *in = l->input, *filter = l->filter;
    ELEM *out = l->output;
    const size_t C = l->channels, H = l->height, W = l->width;
    const size_t K = l->out_channels, R = l->kernel_h, S = l->kernel_w;
    const size_t P = l->out_h, Q = l->out_w;
    const size_t cg = C / l->groups, kg = K / l->groups;
    for (size_t row = row0; row < row1; row++) {
        size_t p = row % P, k = row / P % K, n = row / P / K;
        size_t c0 = k / kg * cg;
        for (size_t q = 0; q < Q; q++) {
            ELEM sum = 0;
            for (size_t c = 0; c < cg; c++)
                for (size_t r = 0; r < R; r++) {
                    size_t y, x;
                    if (!ELEM_NAME(source)(p, l->stride_h, r, l->dilation_h,
                                           l->pad_top, H, &y))
                        continue;
                    for (size_t s = 0; s < S; s++) {
                        if (!ELEM_NAME(source)(q, l->stride_w, s, l->dilation_w,
                                               l->pad_left, W, &x))
                            continue;
                        size_t i, f;
                        if (l->input_nhwc) {
                            i = ((n * H + y) * W + x) * C + c0 + c;
                            f = ((k * R + r) * S + s) * cg + c;
                        } else {
                            i = ((n * C + c0 + c) * H + y) * W + x;
                            f = ((k * cg + c) * R + r) * S + s;
                        }
                        sum += in[i] * filter[f];
                    }
                }
            ELEM value = ELEM_NAME(activate)(l, sum + ELEM_NAME(bias_of)(l, k));
            size_t o = l->output_nhwc ? ((n * P + p) * Q + q) * K + k
                                      : ((n * K + k) * P + p) * Q + q;
            out[o] = value;
        }
    }
}

/* Each output row accumulates one filter tap at a time over the whole
 * row: with stride 1 the inner loop reads and writes contiguous memory,
 * and the compiler vectorises it over the output width. The layer reads
 * each input row a handful of times and writes each output once:
 * bandwidth-bound, as depthwise layers are. */
static void ELEM_NAME(depthwise_rows)(const locus__conv_layer *l, size_t row0,
                                      size_t row1)
{
    const ELEM *in = l->input, *filter = l->filter;
    ELEM *out = l->output;
    const size_t C = l->channels, H = l->height, W = l->width;
    const size_t K = l->out_channels, R = l->kernel_h, S = l->kernel_w;
    const size_t P = l->out_h, Q = l->out_w;
    const size_t sw = l->stride_w, multiplier = K / C;
    for (size_t row = row0; row < row1; row++) {
        size_t p = row % P, k = row / P % K, n = row / P / K;
        size_t c = k / multiplier;
        ELEM *o = out + row * Q;
        for (size_t q = 0; q < Q; q++)
            o[q] = 0;
        for (size_t r = 0; r < R; r++) {
            size_t y;
            if (!ELEM_NAME(source)(p, l->stride_h, r, l->dilation_h, l->pad_top,
                                   H, &y))
                continue;
            const ELEM *line = in + ((n * C + c) * H + y) * W;
            for (size_t s = 0; s < S; s++) {
                /* Outputs q whose input x = q sw + s d - pad lies in
                 * [0, W): q in [q0, q1). */
                size_t shift = s * l->dilation_w;
                size_t q0 = shift >= l->pad_left
                                ? 0
                                : (l->pad_left - shift + sw - 1) / sw;
                size_t q1 = 0;
                if (W + l->pad_left > shift) {
                    q1 = (W + l->pad_left - shift - 1) / sw + 1;
                    if (q1 > Q)
                        q1 = Q;
                }
                if (q0 >= q1)
                    continue;
                ELEM f = filter[(k * R + r) * S + s];
                const ELEM *src = line + (q0 * sw + shift - l->pad_left);
                ELEM *dst = o + q0;
                size_t count = q1 - q0;
                if (sw == 1)
                    for (size_t i = 0; i < count; i++)
                        dst[i] += f * src[i];
                else
                    for (size_t i = 0; i < count; i++)
                        dst[i] += f * src[i * sw];
            }
        }
        ELEM b = ELEM_NAME(bias_of)(l, k);
        for (size_t q = 0; q < Q; q++)
            o[q] = ELEM_NAME(activate)(l, o[q] + b);
    }
}

static void ELEM_NAME(lower)(const locus__conv_layer *l, size_t n, size_t g,
                             size_t j0, size_t j1, void *columns, size_t width)
{
    const size_t C = l->channels, H = l->height, W = l->width;
    const size_t R = l->kernel_h, S = l->kernel_w, Q = l->out_w;
    const size_t cg = C / l->groups;
    const ELEM *image = (const ELEM *)l->input + (n * C + g * cg) * H * W;
    ELEM *col = columns;
    for (size_t c = 0; c < cg; c++)
        for (size_t r = 0; r < R; r++)
            for (size_t s = 0; s < S; s++) {
                ELEM *dst = col + ((c * R + r) * S + s) * width;
                const ELEM *plane = image + c * H * W;
                for (size_t j = j0; j < j1; j++) {
                    size_t p = j / Q, q = j % Q, y, x;
                    int inside =
                        ELEM_NAME(source)(p, l->stride_h, r, l->dilation_h,
                                          l->pad_top, H, &y) &&
                        ELEM_NAME(source)(q, l->stride_w, s, l->dilation_w,
                                          l->pad_left, W, &x);
                    dst[j - j0] = inside ? plane[y * W + x] : (ELEM)0;
                }
            }
}

static void ELEM_NAME(finish)(const locus__conv_layer *l, size_t n, size_t g,
                              size_t j0, size_t j1)
{
    if (!l->bias && l->activation == LOCUS_ACTIVATION_NONE)
        return;
    const size_t K = l->out_channels, kg = K / l->groups;
    const size_t pq = l->out_h * l->out_w;
    for (size_t k = g * kg; k < (g + 1) * kg; k++) {
        ELEM *o = (ELEM *)l->output + (n * K + k) * pq;
        ELEM b = ELEM_NAME(bias_of)(l, k);
        for (size_t j = j0; j < j1; j++)
            o[j] = ELEM_NAME(activate)(l, o[j] + b);
    }
}
