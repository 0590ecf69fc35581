/* Conversions between f32 and the 16-bit input types, bf16 and f16
 * (locus.h, "Conversions"). The scalar functions are the definition: round
 * to nearest, ties to even, NaN kept NaN (quiet, sign and the payload's
 * top bits kept), overflow to infinity, subnormals of both formats exact.
 * They work on the bits with integer arithmetic, so the caller's MXCSR
 * (flush-to-zero, denormals-are-zero) cannot change a result.
 *
 * The f16 arrays use F16C where the CPU has it: vcvtps2ph with
 * round-to-nearest-even and vcvtph2ps give the same bits as the scalar
 * code for every input (tests/unit/test_convert.c compares all 65536 f16
 * patterns and the f32 rounding cases through the array functions), and
 * ignore MXCSR's flush modes. bf16's conversions are a shift and an add,
 * which the compiler vectorises well enough; AVX512-BF16's vcvtneps2bf16
 * would flush f32 subnormals to zero, which bf16 can represent. */
#include <locus/locus.h>

#include <stdint.h>
#include <string.h>

#include "status.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define LOCUS_CONVERT_F16C 1
#endif

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

uint16_t locus_bf16_from_float(float value)
{
    uint32_t bits = bits_of(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u); /* quiet NaN */
    /* Adding just under half a unit of the kept part, plus its lowest
     * bit, rounds to nearest even; a carry out of the mantissa steps the
     * exponent, up to infinity (0x7f80) past the largest bf16. */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

float locus_bf16_to_float(uint16_t value)
{
    uint32_t bits = value;
    if ((bits & 0x7fffu) > 0x7f80u)
        bits |= 0x0040u; /* a signalling NaN comes back quiet */
    return float_of(bits << 16);
}

/* f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; the largest finite
 * value 65504, the smallest normal 2^-14, the smallest subnormal 2^-24. */
uint16_t locus_f16_from_float(float value)
{
    uint32_t bits = bits_of(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) /* NaN: quiet, the payload's top bits */
        return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    /* 65520, halfway between 65504 and 2^16, and above (inf among them)
     * round to infinity: the tie goes to the even side, which is inf. */
    if (magnitude >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (magnitude >= 0x38800000u) { /* 2^-14 and above: normal in f16 */
        /* Rebias the exponent from 127 to 15, then round the mantissa's
         * 13 dropped bits to nearest even as bf16 does. */
        uint32_t rebiased = magnitude - 0x38000000u;
        rebiased += 0x0fffu + ((rebiased >> 13) & 1u);
        return (uint16_t)(sign | (rebiased >> 13));
    }
    /* Below 2^-25 (half the smallest subnormal) rounds to zero; exactly
     * 2^-25 is a tie and rounds to zero, the even side. */
    if (magnitude <= 0x33000000u)
        return sign;
    /* A subnormal f16 counts units of 2^-24: the f32 mantissa, implicit
     * bit included, is m 2^(e - 150), so units = m >> (126 - e), with
     * e in [102, 112]; a carry to 0x400 is the smallest normal, whose
     * encoding it is. */
    uint32_t exponent = magnitude >> 23;
    uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;
    uint32_t units = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (units & 1u)))
        units++;
    return (uint16_t)(sign | units);
}

float locus_f16_to_float(uint16_t value)
{
    uint32_t sign = (uint32_t)(value & 0x8000u) << 16;
    uint32_t exponent = (value >> 10) & 0x1fu;
    uint32_t mantissa = value & 0x3ffu;
    if (exponent == 0x1f) /* inf, or NaN made quiet */
        return float_of(sign | 0x7f800000u | (mantissa << 13) |
                        (mantissa ? 0x400000u : 0u));
    if (exponent == 0) {
        /* Zero or subnormal: units of 2^-24, exact in f32 and normal
         * there (so a flush-to-zero mode cannot touch it). */
        float magnitude = (float)mantissa * 0x1p-24f;
        return float_of(sign | bits_of(magnitude));
    }
    return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/* Fails unless src and dst are n elements each that do not overlap
 * (in-place conversion would read elements already overwritten). */
static locus_status check_arrays(const char *function, const void *src,
                                 size_t src_size, const void *dst,
                                 size_t dst_size, size_t n)
{
    locus__clear_error();
    if (n == 0)
        return LOCUS_SUCCESS;
    if (!src)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT,
                           "%s: src is NULL but n is %zu", function, n);
    if (!dst)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT,
                           "%s: dst is NULL but n is %zu", function, n);
    if (n > SIZE_MAX / 4)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "%s: n %zu elements do not fit in memory", function,
                           n);
    uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;
    if (s < d + n * dst_size && d < s + n * src_size)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "%s: src and dst overlap", function);
    return LOCUS_SUCCESS;
}

#ifdef LOCUS_CONVERT_F16C
/* clang 14 has no "f16c" in __builtin_cpu_supports: the bit is read from
 * CPUID leaf 1 (ECX bit 29); the "avx" test covers the OS saving the YMM
 * state. */
static int have_f16c(void)
{
    unsigned int eax, ebx, ecx, edx;
    __builtin_cpu_init();
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    return (ecx & bit_F16C) && __builtin_cpu_supports("avx");
}

__attribute__((target("avx,f16c"))) static size_t
f32_to_f16_f16c(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                       _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), half);
    }
    return i;
}

__attribute__((target("avx,f16c"))) static size_t
f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i half =
            _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(half));
    }
    return i;
}
#endif

locus_status locus_f32_to_bf16(const float *src, uint16_t *dst, size_t n)
{
    locus_status status = check_arrays("locus_f32_to_bf16", src, sizeof *src,
                                       dst, sizeof *dst, n);
    if (status != LOCUS_SUCCESS)
        return status;
    for (size_t i = 0; i < n; i++)
        dst[i] = locus_bf16_from_float(src[i]);
    return LOCUS_SUCCESS;
}

locus_status locus_bf16_to_f32(const uint16_t *src, float *dst, size_t n)
{
    locus_status status = check_arrays("locus_bf16_to_f32", src, sizeof *src,
                                       dst, sizeof *dst, n);
    if (status != LOCUS_SUCCESS)
        return status;
    for (size_t i = 0; i < n; i++)
        dst[i] = locus_bf16_to_float(src[i]);
    return LOCUS_SUCCESS;
}

locus_status locus_f32_to_f16(const float *src, uint16_t *dst, size_t n)
{
    locus_status status =
        check_arrays("locus_f32_to_f16", src, sizeof *src, dst, sizeof *dst, n);
    if (status != LOCUS_SUCCESS)
        return status;
    size_t i = 0;
#ifdef LOCUS_CONVERT_F16C
    if (have_f16c())
        i = f32_to_f16_f16c(src, dst, n);
#endif
    for (; i < n; i++)
        dst[i] = locus_f16_from_float(src[i]);
    return LOCUS_SUCCESS;
}

locus_status locus_f16_to_f32(const uint16_t *src, float *dst, size_t n)
{
    locus_status status =
        check_arrays("locus_f16_to_f32", src, sizeof *src, dst, sizeof *dst, n);
    if (status != LOCUS_SUCCESS)
        return status;
    size_t i = 0;
#ifdef LOCUS_CONVERT_F16C
    if (have_f16c())
        i = f16_to_f32_f16c(src, dst, n);
#endif
    for (; i < n; i++)
        dst[i] = locus_f16_to_float(src[i]);
    return LOCUS_SUCCESS;
}
