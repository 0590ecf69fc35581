/* The f64 op: its register kernels chosen from the CPU table's level, and
 * the parallel driver (gemm.c) run with the f64 packing and macro-kernel.
 *
 * The kernels exist where meson built the x86 ones (x86-64 with GCC or
 * Clang, as isa.c tests); the CPU table's level is then one this CPU has
 * (isa.c checked it, LOCUS_CPU_ISA included), so only its name matters
 * here. */
#include <string.h>

#include "cpu_internal.h"
#include "dgemm.h"
#include "gemm_block.h"
#include "kernels/dgemm_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define LOCUS_CPU_X86_KERNELS 1
#endif

static const locus__dgemm_isa generic_kernels = {
    .name = "generic-4x8",
    .mr = LOCUS__DGEMM_GENERIC_MR,
    .nr = LOCUS__DGEMM_GENERIC_NR,
    .kernel = locus__dgemm_generic,
};

#ifdef LOCUS_CPU_X86_KERNELS
static const locus__dgemm_isa avx2_kernels = {
    .name = "avx2-6x8",
    .mr = LOCUS__DGEMM_AVX2_MR,
    .nr = LOCUS__DGEMM_AVX2_NR,
    .kernel = locus__dgemm_avx2,
};

static const locus__dgemm_isa avx512_kernels = {
    .name = "avx512-12x16",
    .mr = LOCUS__DGEMM_AVX512_MR,
    .nr = LOCUS__DGEMM_AVX512_NR,
    .kernel = locus__dgemm_avx512,
};
#endif

const locus__dgemm_isa *locus__dgemm_isa_for(const locus__cpu_isa *isa)
{
    if (!isa)
        isa = locus__cpu_isa_best();
#ifdef LOCUS_CPU_X86_KERNELS
    if (strcmp(isa->name, "avx512") == 0)
        return &avx512_kernels;
    if (strcmp(isa->name, "avx2") == 0)
        return &avx2_kernels;
#endif
    return &generic_kernels;
}

/* ---- the locus__gemm_kind of locus__dgemm ----------------------------- */

static void pack_a(const void *typed, size_t mr, size_t i0, size_t mc,
                   size_t p0, size_t kc, void *ap)
{
    locus__dgemm_pack_a(typed, mr, i0, mc, p0, kc, ap);
}

static void pack_b(const void *typed, size_t nr, size_t p0, size_t kc,
                   size_t j0, size_t nc, void *bp)
{
    locus__dgemm_pack_b(typed, nr, p0, kc, j0, nc, bp);
}

static void macro(const void *typed, size_t mc, size_t nc, size_t kc,
                  const void *ap, const void *bp, size_t i0, size_t j0,
                  int first_depth, size_t sweep_cols)
{
    const locus__dgemm *g = typed;
    locus__dgemm_macro(g->isa, mc, nc, kc, ap, bp, g->c + i0 * g->ldc + j0,
                       g->ldc, g->alpha, first_depth ? g->beta : 1.0,
                       sweep_cols);
}

static void scale(const void *typed, size_t i0, size_t i1, size_t j0, size_t j1)
{
    locus__dgemm_scale(typed, i0, i1, j0, j1);
}

locus_status locus__cpu_dgemm(const locus__cpu_state *s, size_t device,
                              const locus_gemm_desc *desc, const void *a,
                              const void *b, void *c, locus_op_context *op)
{
    /* TF32 and 3XTF32 trade f32 precision for speed; they have no meaning
     * for f64 (locus.h), so they are refused rather than ignored. */
    if (desc->math != LOCUS_MATH_FP32)
        return s->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                 "gemm math mode %d is f32-only: dtype f64 "
                                 "takes the default math mode",
                                 (int)desc->math);
    const locus__dgemm_isa *isa = locus__dgemm_isa_for(&s->isa);
    locus__dgemm g = {
        .trans_a = desc->trans_a,
        .trans_b = desc->trans_b,
        .m = desc->m,
        .n = desc->n,
        .k = desc->k,
        .alpha = desc->alpha,
        .beta = desc->beta,
        .a = a,
        .lda = desc->lda,
        .b = b,
        .ldb = desc->ldb,
        .c = c,
        .ldc = desc->ldc,
        .isa = isa,
    };
    locus__gemm_view view = {
        .trans_a = g.trans_a,
        .trans_b = g.trans_b,
        .m = g.m,
        .n = g.n,
        .k = g.k,
        .a = a,
        .b = b,
        .c = c,
        .lda = g.lda,
        .ldb = g.ldb,
        .ldc = g.ldc,
        .reads_c = g.beta != 0.0,
        .reads_ab = g.alpha != 0.0 && g.k != 0,
        .typed = &g,
    };
    locus__gemm_kind kind = {
        .elem_size = sizeof(double),
        .mr = isa->mr,
        .nr = isa->nr,
        .kernel_name = isa->name,
        .pack_a = pack_a,
        .pack_b = pack_b,
        .macro = macro,
        .scale = scale,
    };
    return locus__gemm_run(s, device, &kind, &view, op);
}
