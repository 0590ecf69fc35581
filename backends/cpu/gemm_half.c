/* The matrix product with bf16 or f16 A and B, f32 C and f32
 * accumulation, on gemm.c's parallel driver (NUMA groups, phases, worker
 * grid): only the packing and the macro-kernel are this file's, as a
 * locus__gemm_kind. Two paths:
 *
 * - Dot (bf16, on CPUs with AVX512-BF16 when the table is avx512): the
 *   panels are packed as pairs of bf16 along the depth, and vdpbf16ps
 *   takes two depth steps per instruction (kernels/gemm_bf16_avx512.c
 *   says what it rounds). It counts bf16 subnormals as zero, so inputs
 *   that hold any take the converting path instead: the product's value
 *   does not depend on the path beyond the rounding of f32 sums.
 * - Converting (f16 everywhere, bf16 elsewhere): the panels are widened
 *   to f32 while packing, exactly (F16C or AVX2 where the table is avx2 or
 *   avx512, portable C under generic), and the table's f32 micro-kernel
 *   and macro-kernel run on them: the f32 product of the same values.
 *
 * Both pack into blocks laid out as the f32 kind's (elem_size 4): a pair
 * of bf16 takes the place of one float, so the driver's block sizes and
 * offsets hold for both, and a block of odd depth kc (the last) has room
 * for its zero-padded last pair. */
#include <string.h>

#include "gemm.h"
#include "gemm_block.h"
#include "gemm_half.h"
#include "kernels/gemm_half_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define HALF_X86_KERNELS 1
#endif

/* Elements widened per call of the row converter: a stack buffer. */
#define CHUNK 256

typedef void (*row_converter)(const uint16_t *src, float *dst, size_t n);

/* What the kind's functions read. f32 holds the shape, alpha, beta, C
 * and the kernel table (a and b NULL): the f32 macro-kernel and scale
 * read it as they read the f32 product's. */
typedef struct half_gemm {
    locus__sgemm f32;
    const uint16_t *a, *b;
    size_t lda, ldb;
    row_converter widen;
} half_gemm;

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static void bf16_to_f32_portable(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(dst + i, &bits, sizeof bits);
    }
}

static void f16_to_f32_portable(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = locus_f16_to_float(src[i]);
}

static int cpu_has(int avx512bf16)
{
#ifdef HALF_X86_KERNELS
    __builtin_cpu_init();
    if (avx512bf16)
        return __builtin_cpu_supports("avx512bf16") &&
               __builtin_cpu_supports("avx512bw");
    /* clang 14 has no "f16c" in __builtin_cpu_supports: CPUID leaf 1
     * ECX bit 29; "avx2" covers the OS saving the YMM state. */
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    return __builtin_cpu_supports("avx2") && (ecx & bit_F16C);
#else
    (void)avx512bf16;
    return 0;
#endif
}

static row_converter converter_for(const locus__cpu_isa *isa, locus_dtype dtype)
{
#ifdef HALF_X86_KERNELS
    /* Forced to generic, the portable loops: that table is the one that
     * must work on any CPU, and its test is theirs. */
    if (strcmp(isa->name, "generic") != 0 && cpu_has(0))
        return dtype == LOCUS_DTYPE_BF16 ? locus__bf16_to_f32_avx2
                                         : locus__f16_to_f32_f16c;
#else
    (void)isa;
#endif
    return dtype == LOCUS_DTYPE_BF16 ? bf16_to_f32_portable
                                     : f16_to_f32_portable;
}

int locus__cpu_gemm_half_uses_dot(const locus__cpu_isa *isa, locus_dtype dtype)
{
    return dtype == LOCUS_DTYPE_BF16 && strcmp(isa->name, "avx512") == 0 &&
           cpu_has(1);
}

/* ---- converting path: f32 panels, the table's f32 kernels ------------ */

/* As locus__sgemm_pack_a, from the half A. */
static void widen_pack_a(const void *typed, size_t mr, size_t i0, size_t mc,
                         size_t p0, size_t kc, void *out)
{
    const half_gemm *h = typed;
    float *ap = out, row[CHUNK];
    for (size_t ir = 0; ir < mc; ir += mr) {
        size_t rows = min_size(mr, mc - ir);
        float *dst = ap + ir * kc;
        if (h->f32.trans_a == LOCUS_NO_TRANS) {
            for (size_t i = 0; i < rows; i++) {
                const uint16_t *src = h->a + (i0 + ir + i) * h->lda + p0;
                for (size_t pc = 0; pc < kc; pc += CHUNK) {
                    size_t len = min_size(CHUNK, kc - pc);
                    h->widen(src + pc, row, len);
                    for (size_t p = 0; p < len; p++)
                        dst[(pc + p) * mr + i] = row[p];
                }
            }
        } else {
            /* op(A)[i][p] = A[p][i]: each stored row gives one column. */
            for (size_t p = 0; p < kc; p++)
                h->widen(h->a + (p0 + p) * h->lda + i0 + ir, dst + p * mr,
                         rows);
        }
        for (size_t p = 0; rows < mr && p < kc; p++)
            memset(dst + p * mr + rows, 0, (mr - rows) * sizeof *dst);
    }
}

/* As locus__sgemm_pack_b, from the half B. */
static void widen_pack_b(const void *typed, size_t nr, size_t p0, size_t kc,
                         size_t j0, size_t nc, void *out)
{
    const half_gemm *h = typed;
    float *bp = out, row[CHUNK];
    for (size_t jr = 0; jr < nc; jr += nr) {
        size_t cols = min_size(nr, nc - jr);
        float *dst = bp + jr * kc;
        if (h->f32.trans_b == LOCUS_NO_TRANS) {
            for (size_t p = 0; p < kc; p++)
                h->widen(h->b + (p0 + p) * h->ldb + j0 + jr, dst + p * nr,
                         cols);
        } else {
            /* op(B)[p][j] = B[j][p]: each stored row gives one column. */
            for (size_t j = 0; j < cols; j++) {
                const uint16_t *src = h->b + (j0 + jr + j) * h->ldb + p0;
                for (size_t pc = 0; pc < kc; pc += CHUNK) {
                    size_t len = min_size(CHUNK, kc - pc);
                    h->widen(src + pc, row, len);
                    for (size_t p = 0; p < len; p++)
                        dst[(pc + p) * nr + j] = row[p];
                }
            }
        }
        for (size_t p = 0; cols < nr && p < kc; p++)
            memset(dst + p * nr + cols, 0, (nr - cols) * sizeof *dst);
    }
}

static void widen_macro(const void *typed, size_t mc, size_t nc, size_t kc,
                        const void *ap, const void *bp, size_t i0, size_t j0,
                        int first_depth, size_t sweep_cols)
{
    const locus__sgemm *g = &((const half_gemm *)typed)->f32;
    locus__sgemm_macro(g->isa, mc, nc, kc, ap, bp, g->c + i0 * g->ldc + j0,
                       g->ldc, g->alpha, first_depth ? g->beta : 1.0f,
                       sweep_cols);
}

static void half_scale(const void *typed, size_t i0, size_t i1, size_t j0,
                       size_t j1)
{
    locus__sgemm_scale(&((const half_gemm *)typed)->f32, i0, i1, j0, j1);
}

/* ---- dot path: pairs of bf16 along the depth, vdpbf16ps -------------- */

#ifdef HALF_X86_KERNELS
#define DOT_MR LOCUS__BF16_AVX512_MR
#define DOT_NR LOCUS__BF16_AVX512_NR

/* Panels of mr rows, each kq = ceil(kc / 2) steps of mr pairs:
 * dst[(q * mr + i) * 2 + t] = op(A)[i][2q + t], zero past kc and past
 * the rows; a panel takes 2 kc elements (the f32 layout's floats). */
static void pair_pack_a(const void *typed, size_t mr, size_t i0, size_t mc,
                        size_t p0, size_t kc, void *out)
{
    const half_gemm *h = typed;
    uint16_t *ap = out;
    size_t kq = (kc + 1) / 2;
    for (size_t ir = 0; ir < mc; ir += mr) {
        size_t rows = min_size(mr, mc - ir);
        uint16_t *dst = ap + ir * kc * 2;
        memset(dst, 0, kq * mr * 2 * sizeof *dst);
        if (h->f32.trans_a == LOCUS_NO_TRANS) {
            for (size_t i = 0; i < rows; i++) {
                const uint16_t *src = h->a + (i0 + ir + i) * h->lda + p0;
                for (size_t p = 0; p < kc; p++)
                    dst[((p / 2) * mr + i) * 2 + p % 2] = src[p];
            }
        } else {
            for (size_t p = 0; p < kc; p++) {
                const uint16_t *src = h->a + (p0 + p) * h->lda + i0 + ir;
                uint16_t *step = dst + (p / 2) * mr * 2 + p % 2;
                for (size_t i = 0; i < rows; i++)
                    step[i * 2] = src[i];
            }
        }
    }
}

/* Panels of nr columns: dst[(q * nr + j) * 2 + t] = op(B)[2q + t][j]. */
static void pair_pack_b(const void *typed, size_t nr, size_t p0, size_t kc,
                        size_t j0, size_t nc, void *out)
{
    const half_gemm *h = typed;
    uint16_t *bp = out;
    size_t kq = (kc + 1) / 2;
    for (size_t jr = 0; jr < nc; jr += nr) {
        size_t cols = min_size(nr, nc - jr);
        uint16_t *dst = bp + jr * kc * 2;
        memset(dst, 0, kq * nr * 2 * sizeof *dst);
        if (h->f32.trans_b == LOCUS_NO_TRANS) {
            for (size_t p = 0; p < kc; p++) {
                const uint16_t *src = h->b + (p0 + p) * h->ldb + j0 + jr;
                uint16_t *step = dst + (p / 2) * nr * 2 + p % 2;
                for (size_t j = 0; j < cols; j++)
                    step[j * 2] = src[j];
            }
        } else {
            for (size_t j = 0; j < cols; j++) {
                const uint16_t *src = h->b + (j0 + jr + j) * h->ldb + p0;
                for (size_t p = 0; p < kc; p++)
                    dst[((p / 2) * nr + j) * 2 + p % 2] = src[p];
            }
        }
    }
}

/* A tile cut by C's edge: the whole tile into a local buffer, the part
 * inside C copied in and out (the f32 macro-kernel's way). */
static void pair_edge_tile(size_t rows, size_t cols, size_t kq,
                           const uint16_t *a, const uint16_t *b, float *c,
                           size_t ldc, float alpha, float beta)
{
    float tile[DOT_MR * DOT_NR] = {0.0f};
    if (beta != 0.0f)
        for (size_t i = 0; i < rows; i++)
            memcpy(tile + i * DOT_NR, c + i * ldc, cols * sizeof *c);
    locus__gemm_bf16_avx512(kq, a, b, tile, DOT_NR, alpha, beta);
    for (size_t i = 0; i < rows; i++)
        memcpy(c + i * ldc, tile + i * DOT_NR, cols * sizeof *c);
}

static void pair_macro(const void *typed, size_t mc, size_t nc, size_t kc,
                       const void *ap, const void *bp, size_t i0, size_t j0,
                       int first_depth, size_t sweep_cols)
{
    const locus__sgemm *g = &((const half_gemm *)typed)->f32;
    const uint16_t *a16 = ap, *b16 = bp;
    float *c = g->c + i0 * g->ldc + j0;
    float beta = first_depth ? g->beta : 1.0f;
    size_t kq = (kc + 1) / 2;
    for (size_t jc = 0; jc < nc; jc += sweep_cols) {
        size_t sweep_end = min_size(nc, jc + sweep_cols);
        for (size_t ir = 0; ir < mc; ir += DOT_MR) {
            size_t rows = min_size(DOT_MR, mc - ir);
            const uint16_t *a = a16 + ir * kc * 2;
            for (size_t jr = jc; jr < sweep_end; jr += DOT_NR) {
                size_t cols = min_size(DOT_NR, nc - jr);
                const uint16_t *b = b16 + jr * kc * 2;
                float *ct = c + ir * g->ldc + jr;
                if (rows == DOT_MR && cols == DOT_NR)
                    locus__gemm_bf16_avx512(kq, a, b, ct, g->ldc, g->alpha,
                                            beta);
                else
                    pair_edge_tile(rows, cols, kq, a, b, ct, g->ldc, g->alpha,
                                   beta);
            }
        }
    }
}

/* Whether a stored rows x cols matrix, ld apart, holds a bf16 subnormal. */
static int has_subnormal(const uint16_t *x, size_t rows, size_t cols, size_t ld)
{
    for (size_t i = 0; i < rows; i++)
        if (locus__bf16_has_subnormal_avx512(x + i * ld, cols))
            return 1;
    return 0;
}
#endif

locus_status locus__cpu_gemm_half(const locus__cpu_state *s, size_t device,
                                  const locus_gemm_desc *desc, const void *a,
                                  const void *b, void *c, locus_op_context *op)
{
    half_gemm h = {
        .f32 =
            {
                .trans_a = desc->trans_a,
                .trans_b = desc->trans_b,
                .m = desc->m,
                .n = desc->n,
                .k = desc->k,
                .alpha = (float)desc->alpha,
                .beta = (float)desc->beta,
                .c = c,
                .ldc = desc->ldc,
                .isa = &s->isa,
            },
        .a = a,
        .b = b,
        .lda = desc->lda,
        .ldb = desc->ldb,
        .widen = converter_for(&s->isa, desc->dtype),
    };
    locus__gemm_view view = {
        .trans_a = desc->trans_a,
        .trans_b = desc->trans_b,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .a = a,
        .b = b,
        .c = c,
        .lda = desc->lda,
        .ldb = desc->ldb,
        .ldc = desc->ldc,
        .reads_c = h.f32.beta != 0.0f,
        .reads_ab = h.f32.alpha != 0.0f && desc->k != 0,
        .ab_size = sizeof(uint16_t),
        .typed = &h,
    };
    const char *type = desc->dtype == LOCUS_DTYPE_BF16 ? "bf16" : "f16";
    char name[48];
    snprintf(name, sizeof name, "%s-from-%s", s->isa.sgemm_name, type);
    locus__gemm_kind kind = {
        .elem_size = sizeof(float),
        .mr = s->isa.mr,
        .nr = s->isa.nr,
        .kernel_name = name,
        .pack_a = widen_pack_a,
        .pack_b = widen_pack_b,
        .macro = widen_macro,
        .scale = half_scale,
    };
#ifdef HALF_X86_KERNELS
    int dot = locus__cpu_gemm_half_uses_dot(&s->isa, desc->dtype);
    /* Only a product that reads A and B needs the scan; one of no
     * elements has nothing to scan. */
    if (dot && view.reads_ab && desc->m && desc->n) {
        int ta = desc->trans_a == LOCUS_TRANS,
            tb = desc->trans_b == LOCUS_TRANS;
        dot = !has_subnormal(a, ta ? desc->k : desc->m, ta ? desc->m : desc->k,
                             desc->lda) &&
              !has_subnormal(b, tb ? desc->n : desc->k, tb ? desc->k : desc->n,
                             desc->ldb);
    }
    if (dot) {
        snprintf(name, sizeof name, "avx512bf16-%dx%d", DOT_MR, DOT_NR);
        kind.mr = DOT_MR;
        kind.nr = DOT_NR;
        kind.pack_a = pair_pack_a;
        kind.pack_b = pair_pack_b;
        kind.macro = pair_macro;
    }
#endif
    return locus__gemm_run(s, device, &kind, &view, op);
}
