/* Run-time choice of the CPU kernels. The x86 kernels exist only where
 * meson built them: x86-64 with GCC or Clang (backends/cpu/meson.build
 * tests the same); elsewhere every table is the portable one. */
#include <pthread.h>
#include <string.h>

#include "isa.h"
#include "kernels/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define LOCUS_CPU_X86_KERNELS 1
#endif

enum isa_level { LEVEL_GENERIC = 0, LEVEL_AVX2 = 1, LEVEL_AVX512 = 2 };

/* What this cpu runs, whether or not the build holds its kernels. */
static enum isa_level cpu_level(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    /* __builtin_cpu_supports also checks that the OS saves the wider
     * registers (XCR0), not only the CPUID bits. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return LEVEL_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return LEVEL_AVX2;
#endif
    return LEVEL_GENERIC;
}

static enum isa_level supported_level(void)
{
#ifdef LOCUS_CPU_X86_KERNELS
    return cpu_level();
#else
    return LEVEL_GENERIC;
#endif
}

static enum isa_level forced_level(const char *forced)
{
    if (!forced || strcmp(forced, "avx512") == 0)
        return LEVEL_AVX512;
    if (strcmp(forced, "avx2") == 0)
        return LEVEL_AVX2;
    return LEVEL_GENERIC;
}

bool locus__cpu_isa_supported(const char *forced)
{
    return !forced || forced_level(forced) <= cpu_level();
}

void locus__cpu_isa_init(locus__cpu_isa *isa, const char *forced)
{
    enum isa_level level = supported_level();
    enum isa_level cap = forced_level(forced);
    if (level > cap)
        level = cap;

    *isa = (locus__cpu_isa){
        .name = "generic",
        .sgemm_name = "generic-4x16",
        .mr = LOCUS__GENERIC_MR,
        .nr = LOCUS__GENERIC_NR,
        .sgemm = locus__sgemm_generic,
        .sgemm_strided = locus__sgemm_generic_strided,
        .reduce_name = "generic",
        .sum_name = "generic-f64",
        .sum = locus__sum_generic,
        .min = locus__min_generic,
        .max = locus__max_generic,
        .pad_rows = locus__pad_rows_generic,
    };
#ifdef LOCUS_CPU_X86_KERNELS
    if (level >= LEVEL_AVX2) {
        isa->name = "avx2";
        isa->sgemm_name = "avx2-6x16";
        isa->mr = LOCUS__AVX2_MR;
        isa->nr = LOCUS__AVX2_NR;
        isa->sgemm = locus__sgemm_avx2;
        isa->sgemm_strided = locus__sgemm_avx2_strided;
        isa->sgemm_strided_rows = locus__sgemm_avx2_strided_rows;
        isa->sgemm_strided_epilogue = locus__sgemm_avx2_strided_epilogue;
        isa->sgemm_narrow = locus__sgemm_avx2_narrow;
        isa->narrow_nr = LOCUS__AVX2_NARROW_NR;
        isa->reduce_name = "avx2";
        isa->sum_name = "avx2-block512-f64";
        isa->sum = locus__sum_avx2;
        isa->min = locus__min_avx2;
        isa->max = locus__max_avx2;
        isa->pack_a_panel = locus__pack_a_panel_avx2;
        isa->pad_rows = locus__pad_rows_avx2;
        isa->conv_direct = locus__conv_direct_avx2;
        isa->direct_positions = LOCUS__AVX2_DIRECT_POSITIONS;
        isa->direct_filters = LOCUS__AVX2_DIRECT_FILTERS;
    }
    if (level >= LEVEL_AVX512) {
        isa->name = "avx512";
        isa->sgemm_name = "avx512-12x32";
        isa->mr = LOCUS__AVX512_MR;
        isa->nr = LOCUS__AVX512_NR;
        isa->sgemm = locus__sgemm_avx512;
        isa->sgemm_strided = locus__sgemm_avx512_strided;
        isa->sgemm_strided_rows = locus__sgemm_avx512_strided_rows;
        isa->sgemm_strided_epilogue = locus__sgemm_avx512_strided_epilogue;
        isa->sgemm_narrow = locus__sgemm_avx512_narrow;
        isa->narrow_nr = LOCUS__AVX512_NARROW_NR;
        isa->sgemm_thin = locus__sgemm_avx512_thin;
        isa->thin_nr = LOCUS__AVX512_THIN_NR;
        isa->reduce_name = "avx512";
        isa->sum_name = "avx512-block1024-f64";
        isa->sum = locus__sum_avx512;
        isa->min = locus__min_avx512;
        isa->max = locus__max_avx512;
        isa->conv_direct = locus__conv_direct_avx512;
        isa->pad_rows = locus__pad_rows_avx512;
        isa->direct_positions = LOCUS__AVX512_DIRECT_POSITIONS;
        isa->direct_filters = LOCUS__AVX512_DIRECT_FILTERS;
    }
#endif
}

static locus__cpu_isa best_table;
static pthread_once_t best_once = PTHREAD_ONCE_INIT;

static void fill_best(void)
{
    locus__cpu_isa_init(&best_table, NULL);
}

const locus__cpu_isa *locus__cpu_isa_best(void)
{
    pthread_once(&best_once, fill_best);
    return &best_table;
}

const char *locus__cpu_isa_tables(void)
{
#ifdef LOCUS_CPU_X86_KERNELS
    return "generic avx2 avx512";
#else
    return "generic";
#endif
}
