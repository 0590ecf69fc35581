/* The f32 <-> bf16 / f16 conversions of locus.h against a reference built
 * from the formats' definitions in double: every one of the 65536 bit
 * patterns of each type to f32 and back, the halfway points between every
 * two neighbouring values (ties to even, and the f32 values either side),
 * overflow to infinity, NaN, random f32 bits, the scalar and the array
 * functions alike (the arrays use F16C where the CPU has it), and the
 * arrays' refusals. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "expect_error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_MXCSR 1
#endif

#define PATTERNS 65536

typedef struct format {
    const char *name;
    int mantissa_bits; /* stored, 7 for bf16, 10 for f16 */
    int exponent_bias; /* 127, 15 */
    uint16_t inf;      /* 0x7f80, 0x7c00 */
    uint16_t quiet;    /* the quiet bit: 0x0040, 0x0200 */
    uint16_t (*from_float)(float);
    float (*to_float)(uint16_t);
    locus_status (*from_array)(const float *, uint16_t *, size_t);
    locus_status (*to_array)(const uint16_t *, float *, size_t);
} format;

static const format formats[] = {
    {"bf16", 7, 127, 0x7f80, 0x0040, locus_bf16_from_float, locus_bf16_to_float,
     locus_f32_to_bf16, locus_bf16_to_f32},
    {"f16", 10, 15, 0x7c00, 0x0200, locus_f16_from_float, locus_f16_to_float,
     locus_f32_to_f16, locus_f16_to_f32},
};

static uint32_t bits_of(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static float float_of(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* The value of a non-negative pattern up to inf; inf itself counts as the
 * next value past the largest finite one (2^(emax+1)), which is what IEEE
 * rounding to nearest compares against for overflow. */
/* 2^e for a normal double exponent, exactly (no libm: the unit tests link
 * liblocus alone). */
static double pow2(int e)
{
    uint64_t bits = (uint64_t)(e + 1023) << 52;
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static double magnitude_of(const format *f, uint16_t pattern)
{
    int m = f->mantissa_bits;
    unsigned exponent = pattern >> m, mantissa = pattern & ((1u << m) - 1u);
    if (exponent == 0)
        return mantissa * pow2(1 - f->exponent_bias - m);
    return (double)((1u << m) + mantissa) *
           pow2((int)exponent - f->exponent_bias - m);
}

static double value_of(const format *f, uint16_t pattern)
{
    double magnitude = magnitude_of(f, pattern & 0x7fffu);
    if ((pattern & 0x7fffu) == f->inf)
        magnitude = INFINITY;
    return pattern & 0x8000u ? -magnitude : magnitude;
}

static int is_nan_pattern(const format *f, uint16_t pattern)
{
    return (pattern & 0x7fffu) > f->inf;
}

/* Nearest pattern to a finite or infinite non-NaN x, ties to the even
 * pattern, by binary search over the increasing non-negative patterns. */
static uint16_t nearest(const format *f, float x)
{
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    double target = fabs((double)x);
    if (isinf(x))
        return (uint16_t)(sign | f->inf);
    unsigned lo = 0, hi = f->inf; /* magnitude_of(lo) <= target */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (magnitude_of(f, (uint16_t)mid) <= target)
            lo = mid;
        else
            hi = mid;
    }
    if (magnitude_of(f, (uint16_t)hi) <= target)
        return (uint16_t)(sign | hi); /* at or past inf's stand-in */
    double below = target - magnitude_of(f, (uint16_t)lo);
    double above = magnitude_of(f, (uint16_t)hi) - target;
    unsigned pick = below < above   ? lo
                    : above < below ? hi
                                    : (lo & 1u ? hi : lo);
    return (uint16_t)(sign | pick);
}

/* What the conversion of f32 NaN bits must give: its sign, the quiet bit,
 * the payload's top bits. */
static uint16_t nan_from_float(const format *f, uint32_t bits)
{
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint16_t payload =
        (uint16_t)((bits & 0x7fffffu) >> (23 - f->mantissa_bits));
    return (uint16_t)(sign | f->inf | f->quiet | payload);
}

static void check_to_float(const format *f, uint16_t pattern, float got,
                           const char *how)
{
    uint32_t bits = bits_of(got);
    if (is_nan_pattern(f, pattern)) {
        uint32_t mantissa_shift = (uint32_t)(23 - f->mantissa_bits);
        uint32_t want_top = (pattern & 0x7fffu & ~f->inf) | f->quiet;
        TEST_EXPECT(isnan(got) && (bits >> 31) == (pattern >> 15u) &&
                        ((bits & 0x7fffffu) >> mantissa_shift) == want_top &&
                        (bits & ((1u << mantissa_shift) - 1u)) == 0,
                    "%s %s: NaN 0x%04x gave 0x%08x", f->name, how, pattern,
                    bits);
        return;
    }
    double want = value_of(f, pattern);
    TEST_EXPECT((double)got == want && !signbit(got) == !signbit(want),
                "%s %s: 0x%04x gave %a, not %a", f->name, how, pattern,
                (double)got, want);
}

static void check_from_float(const format *f, float x, uint16_t got,
                             const char *how)
{
    uint16_t want = isnan(x) ? nan_from_float(f, bits_of(x)) : nearest(f, x);
    TEST_EXPECT(got == want, "%s %s: %a (0x%08x) gave 0x%04x, not 0x%04x",
                f->name, how, (double)x, bits_of(x), got, want);
}

/* All patterns to f32, exactly; and back, to themselves (NaN made quiet). */
static void test_every_pattern(const format *f)
{
    uint16_t *patterns = malloc(PATTERNS * sizeof *patterns);
    float *values = malloc(PATTERNS * sizeof *values);
    uint16_t *back = malloc(PATTERNS * sizeof *back);
    if (!TEST_EXPECT(patterns && values && back, "out of memory"))
        goto free_all;
    for (unsigned i = 0; i < PATTERNS; i++)
        patterns[i] = (uint16_t)i;
    TEST_OK(f->to_array(patterns, values, PATTERNS));
    TEST_OK(f->from_array(values, back, PATTERNS));
    for (unsigned i = 0; i < PATTERNS; i++) {
        uint16_t pattern = (uint16_t)i;
        check_to_float(f, pattern, f->to_float(pattern), "scalar");
        check_to_float(f, pattern, values[i], "array");
        uint16_t want = is_nan_pattern(f, pattern)
                            ? (uint16_t)(pattern | f->quiet)
                            : pattern;
        uint16_t scalar = f->from_float(f->to_float(pattern));
        TEST_EXPECT(scalar == want && back[i] == want,
                    "%s round trip of 0x%04x: scalar 0x%04x, array 0x%04x",
                    f->name, pattern, scalar, back[i]);
    }
free_all:
    free(patterns);
    free(values);
    free(back);
}

/* Checks the scalar and the array conversion of xs[0..count). */
static void check_floats(const format *f, const float *xs, size_t count,
                         uint16_t *out)
{
    TEST_OK(f->from_array(xs, out, count));
    for (size_t i = 0; i < count; i++) {
        check_from_float(f, xs[i], f->from_float(xs[i]), "scalar");
        check_from_float(f, xs[i], out[i], "array");
    }
}

/* The halfway point between every two neighbouring non-negative values
 * (the largest finite and inf's stand-in among them) is an f32; it and
 * the f32 values just below and above it, of both signs. */
static void test_ties(const format *f)
{
    size_t capacity = 6 * (size_t)f->inf, count = 0;
    float *xs = malloc(capacity * sizeof *xs);
    uint16_t *out = malloc(capacity * sizeof *out);
    if (!TEST_EXPECT(xs && out, "out of memory"))
        goto free_all;
    for (unsigned p = 0; p < f->inf; p++) {
        double mid = (magnitude_of(f, (uint16_t)p) +
                      magnitude_of(f, (uint16_t)(p + 1))) /
                     2;
        float tie = (float)mid;
        if (!TEST_EXPECT((double)tie == mid, "%s: tie %a is no f32", f->name,
                         mid))
            continue;
        /* tie is positive and finite: its neighbours are its bits - 1
         * and + 1. */
        float around[3] = {tie, float_of(bits_of(tie) - 1u),
                           float_of(bits_of(tie) + 1u)};
        for (int i = 0; i < 3; i++) {
            xs[count++] = around[i];
            xs[count++] = -around[i];
        }
    }
    check_floats(f, xs, count, out);
free_all:
    free(xs);
    free(out);
}

/* Edges named one by one, so a failure says which. */
static void test_edges(const format *f)
{
    const float xs[] = {0.0f,
                        -0.0f,
                        INFINITY,
                        -INFINITY,
                        FLT_MAX,
                        -FLT_MAX,
                        FLT_MIN,
                        0x1p-149f,
                        -0x1p-149f,
                        0x1p-133f,
                        0x1p-134f,
                        0x1.8p-134f,
                        65504.0f,
                        65519.99f,
                        65520.0f,
                        -65520.0f,
                        0x1p-24f,
                        0x1p-25f,
                        0x1.000002p-25f,
                        0x1.ffcp-15f,
                        0x1.ffep-15f,
                        1.0f,
                        1.00390625f,
                        1.005859375f,
                        3.0e38f,
                        float_of(0x7f7f8000u),
                        float_of(0x7f7f7fffu)};
    uint16_t out[sizeof xs / sizeof xs[0]];
    check_floats(f, xs, sizeof xs / sizeof xs[0], out);
}

/* Quiet and signalling NaNs of both signs and various payloads. */
static void test_nans(const format *f)
{
    const uint32_t bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                             0x7fa00000u, 0x7fffffffu, 0xffffffffu, 0x7f802000u,
                             0x7fbfe000u, 0x7f810000u};
    float xs[sizeof bits / sizeof bits[0]];
    uint16_t out[sizeof bits / sizeof bits[0]];
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        xs[i] = float_of(bits[i]);
    check_floats(f, xs, sizeof xs / sizeof xs[0], out);
}

/* Random f32 bits of every kind (NaNs, subnormals, huge values). */
static void test_random(const format *f, size_t count)
{
    float *xs = malloc(count * sizeof *xs);
    uint16_t *out = malloc(count * sizeof *out);
    if (TEST_EXPECT(xs && out, "out of memory")) {
        for (size_t i = 0; i < count; i++)
            xs[i] = float_of((uint32_t)test_rng_next());
        check_floats(f, xs, count, out);
    }
    free(xs);
    free(out);
}

/* The caller's flush-to-zero and denormals-are-zero modes change no bit:
 * every pattern to f32, and those values and f32 subnormals back, under
 * the modes and without. Compared as bits, after the modes are restored
 * (under DAZ even reading a subnormal result would see zero). */
static void test_under_flush_modes(const format *f)
{
#ifdef HAVE_MXCSR
    enum { FLOATS = PATTERNS + 64 };
    uint16_t *patterns = malloc(PATTERNS * sizeof *patterns);
    float *plain = malloc(FLOATS * sizeof *plain);
    float *flushed = malloc(PATTERNS * sizeof *flushed);
    float *scalar = malloc(PATTERNS * sizeof *scalar);
    uint16_t *back[2], *back_scalar = malloc(FLOATS * sizeof *back_scalar);
    back[0] = malloc(FLOATS * sizeof *back[0]);
    back[1] = malloc(FLOATS * sizeof *back[1]);
    if (!TEST_EXPECT(patterns && plain && flushed && scalar && back[0] &&
                         back[1] && back_scalar,
                     "out of memory"))
        goto free_all;
    for (unsigned i = 0; i < PATTERNS; i++)
        patterns[i] = (uint16_t)i;
    TEST_OK(f->to_array(patterns, plain, PATTERNS));
    for (unsigned i = 0; i < 64; i++) /* f32 subnormals, both signs */
        plain[PATTERNS + i] =
            float_of((i & 1u ? 0x80000000u : 0u) | (i * 0x1f3a7u + 1u));
    TEST_OK(f->from_array(plain, back[0], FLOATS));

    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u); /* FTZ | DAZ */
    locus_status to = f->to_array(patterns, flushed, PATTERNS);
    locus_status from = f->from_array(plain, back[1], FLOATS);
    for (unsigned i = 0; i < PATTERNS; i++)
        scalar[i] = f->to_float(patterns[i]);
    for (unsigned i = 0; i < FLOATS; i++)
        back_scalar[i] = f->from_float(plain[i]);
    _mm_setcsr(saved);

    TEST_OK(to);
    TEST_OK(from);
    for (unsigned i = 0; i < PATTERNS; i++)
        TEST_EXPECT(bits_of(flushed[i]) == bits_of(plain[i]) &&
                        bits_of(scalar[i]) == bits_of(plain[i]),
                    "%s under FTZ/DAZ: 0x%04x gave 0x%08x (array), 0x%08x "
                    "(scalar), not 0x%08x",
                    f->name, i, bits_of(flushed[i]), bits_of(scalar[i]),
                    bits_of(plain[i]));
    for (unsigned i = 0; i < FLOATS; i++)
        TEST_EXPECT(back[1][i] == back[0][i] && back_scalar[i] == back[0][i],
                    "%s under FTZ/DAZ: 0x%08x gave 0x%04x (array), 0x%04x "
                    "(scalar), not 0x%04x",
                    f->name, bits_of(plain[i]), back[1][i], back_scalar[i],
                    back[0][i]);
free_all:
    free(patterns);
    free(plain);
    free(flushed);
    free(scalar);
    free(back[0]);
    free(back[1]);
    free(back_scalar);
#else
    (void)f;
#endif
}

static void test_refusals(void)
{
    float x[4] = {1, 2, 3, 4};
    _Alignas(16) uint16_t h[8] = {0};
    TEST_ERROR(locus_f32_to_bf16(NULL, h, 1), LOCUS_ERROR_NULL_ARGUMENT,
               "src is NULL");
    TEST_ERROR(locus_f16_to_f32(h, NULL, 2), LOCUS_ERROR_NULL_ARGUMENT,
               "dst is NULL");
    TEST_OK(locus_f32_to_f16(NULL, NULL, 0));
    TEST_OK(locus_bf16_to_f32(NULL, NULL, 0));
    /* dst over the second half of src's bytes. */
    TEST_ERROR(locus_f32_to_f16(x, (uint16_t *)(void *)(x + 2), 4),
               LOCUS_ERROR_INVALID_ARGUMENT, "overlap");
    TEST_ERROR(locus_bf16_to_f32(h, (float *)(void *)h, 2),
               LOCUS_ERROR_INVALID_ARGUMENT, "overlap");
    TEST_ERROR(locus_f32_to_bf16(x, h, SIZE_MAX / 2),
               LOCUS_ERROR_INVALID_ARGUMENT, "do not fit");
    /* Side by side is no overlap. */
    _Alignas(16) uint16_t both[12] = {0};
    TEST_OK(locus_bf16_to_f32(both, (float *)(void *)(both + 4), 4));
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        const format *f = &formats[i];
        test_every_pattern(f);
        test_ties(f);
        test_edges(f);
        test_nans(f);
        test_random(f, 100003);
        test_under_flush_modes(f);
    }
    test_refusals();
    return test_exit_code();
}
