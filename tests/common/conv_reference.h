/* The CPU convolution tests' common ground: a case's geometry, its
 * descriptor, random cases, running the convolution over a NaN-poisoned
 * output, and the direct float64 loop every result is checked against.
 * Header only, like test_util.h. */
#ifndef LOCUS_TEST_CONV_REFERENCE_H
#define LOCUS_TEST_CONV_REFERENCE_H

#include <math.h>
#include <stdio.h>

#include <locus/locus.h>

#include "test_buffers.h"
#include "test_util.h"

/* One convolution's geometry. */
typedef struct conv_case {
    size_t n, c, h, w; /* input NCHW */
    size_t k, r, s;    /* filter KCRS */
    size_t sh, sw;     /* strides */
    size_t ph, pw;     /* padding */
} conv_case;

/* The f32 descriptor of cc, algorithm auto (the caller picks one). */
static inline void conv_describe(const conv_case *cc, locus_conv2d_desc *desc)
{
    locus_conv2d_desc_init(desc);
    desc->dtype = LOCUS_DTYPE_F32;
    desc->batch = cc->n;
    desc->in_channels = cc->c;
    desc->in_height = cc->h;
    desc->in_width = cc->w;
    desc->out_channels = cc->k;
    desc->kernel_height = cc->r;
    desc->kernel_width = cc->s;
    desc->stride_h = cc->sh;
    desc->stride_w = cc->sw;
    desc->pad_h = cc->ph;
    desc->pad_w = cc->pw;
}

/* The square grid every convolution test walks: kernels 1, 3, 5 and 7,
 * strides 1 and 2, padding 0, 1 and 3, in that nesting, with batch and
 * odd image sizes varied along by index (0 .. CONV_GRID_CASES - 1). The
 * caller sets channels and filters, which each test varies its own way. */
#define CONV_GRID_CASES 24

static inline conv_case conv_grid_case(size_t index)
{
    static const size_t kernels[] = {1, 3, 5, 7};
    static const size_t strides[] = {1, 2};
    static const size_t pads[] = {0, 1, 3};
    size_t kernel = kernels[index / 6], stride = strides[index / 3 % 2];
    size_t pad = pads[index % 3];
    conv_case cc = {
        .n = index % 2 ? 3 : 1,
        .h = 7 + 2 * (index % 5),
        .w = 9 + 2 * (index % 4),
        .r = kernel,
        .s = kernel,
        .sh = stride,
        .sw = stride,
        .ph = pad,
        .pw = pad,
    };
    return cc;
}

/* A random case of batch 1..3, channels 1..max_c, height 1..25, width
 * 1..max_w, filters 1..max_k, kernels 1..7, strides 1..3 and padding
 * 0..3, the padding widened where the kernel would not fit. */
static inline conv_case conv_random_case(size_t max_c, size_t max_w,
                                         size_t max_k)
{
    conv_case cc = {
        .n = test_rng_range(1, 3),
        .c = test_rng_range(1, max_c),
        .h = test_rng_range(1, 25),
        .w = test_rng_range(1, max_w),
        .k = test_rng_range(1, max_k),
        .r = test_rng_range(1, 7),
        .s = test_rng_range(1, 7),
        .sh = test_rng_range(1, 3),
        .sw = test_rng_range(1, 3),
        .ph = test_rng_range(0, 3),
        .pw = test_rng_range(0, 3),
    };
    if (cc.h + 2 * cc.ph < cc.r)
        cc.ph = (cc.r - cc.h + 1) / 2;
    if (cc.w + 2 * cc.pw < cc.s)
        cc.pw = (cc.s - cc.w + 1) / 2;
    return cc;
}

/* Poisons out (out_count floats) with NaN and writes it to bout, so an
 * element the kernel leaves unwritten fails; runs the convolution, prints
 * "  in WHAT" when it fails, and reads the result back into out. 0 on any
 * failure (already recorded). */
static inline int conv_run_poisoned(locus_context *ctx, locus_device *dev,
                                    const locus_conv2d_desc *desc,
                                    locus_buffer *bin, locus_buffer *bf,
                                    locus_buffer *bout, float *out,
                                    size_t out_count, locus_record *record,
                                    const char *what)
{
    test_fill_nan(out, out_count);
    if (TEST_OK(locus_buffer_write(bout, 0, out, out_count * sizeof *out)) !=
        LOCUS_SUCCESS)
        return 0;
    locus_record_init(record);
    if (TEST_OK(locus_conv2d(ctx, dev, desc, bin, bf, bout, record)) !=
        LOCUS_SUCCESS) {
        fprintf(stderr, "  in %s\n", what);
        return 0;
    }
    return TEST_OK(locus_buffer_read(bout, 0, out, out_count * sizeof *out)) ==
           LOCUS_SUCCESS;
}

/* Any f32 summation order of CRS products stays within (CRS + 2) u of
 * sum |f||x| over the taps (u = 2^-24), the scale of what was summed; the
 * tolerance allows twice that. */
static inline double conv_tolerance(const conv_case *cc)
{
    return 2.0 * ((double)(cc->c * cc->r * cc->s) + 2.0) * 0x1.0p-24;
}

/* The direct loop in float64: value and magnitude (sum |f||x|) of output
 * (n, k, p, q) of input in (NCHW) and filter f (KCRS). */
static inline void conv_reference_at(const conv_case *cc, const float *in,
                                     const float *f, size_t n, size_t k,
                                     size_t p, size_t q, double *value,
                                     double *magnitude)
{
    double ref = 0.0, mag = 0.0;
    for (size_t c = 0; c < cc->c; c++)
        for (size_t r = 0; r < cc->r; r++)
            for (size_t s = 0; s < cc->s; s++) {
                /* Padded coordinates, unsigned. */
                size_t y = p * cc->sh + r, x = q * cc->sw + s;
                if (y < cc->ph || y - cc->ph >= cc->h || x < cc->pw ||
                    x - cc->pw >= cc->w)
                    continue;
                double v =
                    (double)in[((n * cc->c + c) * cc->h + y - cc->ph) * cc->w +
                               x - cc->pw] *
                    f[((k * cc->c + c) * cc->r + r) * cc->s + s];
                ref += v;
                mag += fabs(v);
            }
    *value = ref;
    *magnitude = mag;
}

/* Keeps the largest error and where it was; NaN counts as infinite, so a
 * NaN output is never hidden by the comparison's falseness. */
static inline void conv__track_worst(double err, size_t at, double *worst,
                                     size_t *worst_at)
{
    if (!(err <= *worst)) {
        *worst = isnan(err) ? INFINITY : err;
        *worst_at = at;
    }
}

/* Checks out (NKPQ, p_out x q_out) element by element against the direct
 * loop, the error relative to the taps' magnitude; an output whose taps
 * all fall in the padding must be exactly 0. When other is given (another
 * algorithm's result on the same inputs, named other_name), out must also
 * agree with it within the same tolerance. what names the case in the
 * failure messages. */
static inline void conv_check_output(const conv_case *cc, size_t p_out,
                                     size_t q_out, const float *in,
                                     const float *f, const float *out,
                                     const float *other, const char *other_name,
                                     const char *what)
{
    double tolerance = conv_tolerance(cc), worst = 0.0, worst_other = 0.0;
    size_t worst_at = 0, worst_other_at = 0;
    for (size_t n = 0; n < cc->n; n++)
        for (size_t k = 0; k < cc->k; k++)
            for (size_t p = 0; p < p_out; p++)
                for (size_t q = 0; q < q_out; q++) {
                    size_t at = ((n * cc->k + k) * p_out + p) * q_out + q;
                    double ref, mag;
                    conv_reference_at(cc, in, f, n, k, p, q, &ref, &mag);
                    double err = mag > 0.0 ? fabs(out[at] - ref) / mag
                                           : (out[at] == 0.0f ? 0.0 : INFINITY);
                    conv__track_worst(err, at, &worst, &worst_at);
                    if (!other)
                        continue;
                    double diff = mag > 0.0
                                      ? fabs((double)out[at] - other[at]) / mag
                                      : (out[at] == other[at] ? 0.0 : INFINITY);
                    conv__track_worst(diff, at, &worst_other, &worst_other_at);
                }
    TEST_EXPECT(worst <= tolerance,
                "%s: relative error %.3g > %.3g at output element %zu: got "
                "%.9g",
                what, worst, tolerance, worst_at, (double)out[worst_at]);
    if (other)
        TEST_EXPECT(worst_other <= tolerance,
                    "%s: differs from %s by %.3g > %.3g at output element "
                    "%zu: %.9g vs %.9g",
                    what, other_name, worst_other, tolerance, worst_other_at,
                    (double)out[worst_other_at], (double)other[worst_other_at]);
}

#endif
