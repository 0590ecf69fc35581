/* reduce's references: the machine's memory read bandwidth, measured on
 * the op's own input with the same thread count (the ceiling a reduction
 * can reach: it must read every byte once), and a plain OpenMP loop (what
 * an application would write without Locus). Both need OpenMP
 * (LOCUS_HAVE_OPENMP); without it reduce has no reference. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bench.h"

#ifdef LOCUS_HAVE_OPENMP
#include <omp.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_READ 1
#endif

typedef struct read_work {
    const float *x;
    size_t count;
    int threads;
    volatile uint64_t sink; /* keeps the loads from being optimized away */
} read_work;

/* OR of every 64-bit word: no dependency between loads but the cheap
 * accumulation, so the loop runs at the speed memory delivers. */
static uint64_t or_words(const float *x, size_t count)
{
    const unsigned char *bytes = (const unsigned char *)x;
    size_t words = count * sizeof(float) / sizeof(uint64_t);
    uint64_t acc[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= words; i += 4) {
        for (int l = 0; l < 4; l++) {
            uint64_t word;
            memcpy(&word, bytes + (i + (size_t)l) * 8, sizeof word);
            acc[l] |= word;
        }
    }
    for (; i < words; i++) {
        uint64_t word;
        memcpy(&word, bytes + i * 8, sizeof word);
        acc[0] |= word;
    }
    return acc[0] | acc[1] | acc[2] | acc[3];
}

#ifdef HAVE_X86_READ
/* The same with 32-byte loads, four streams in flight. */
__attribute__((target("avx2"))) static uint64_t or_words_avx2(const float *x,
                                                              size_t count)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= count; i += 32) {
        a0 = _mm256_or_si256(a0, _mm256_loadu_si256((const __m256i *)(x + i)));
        a1 = _mm256_or_si256(a1,
                             _mm256_loadu_si256((const __m256i *)(x + i + 8)));
        a2 = _mm256_or_si256(a2,
                             _mm256_loadu_si256((const __m256i *)(x + i + 16)));
        a3 = _mm256_or_si256(a3,
                             _mm256_loadu_si256((const __m256i *)(x + i + 24)));
    }
    a0 = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a0);
    return lanes[0] | lanes[1] | lanes[2] | lanes[3] |
           or_words(x + i, count - i);
}
#endif

static void read_all(void *arg)
{
    read_work *work = arg;
    uint64_t result = 0;
    int wide = 0;
#ifdef HAVE_X86_READ
    wide = __builtin_cpu_supports("avx2");
#endif
#pragma omp parallel num_threads(work->threads) proc_bind(spread)              \
    reduction(|                                                                \
              : result)
    {
        /* Contiguous ranges, as Locus's workers take them. */
        size_t t = (size_t)omp_get_thread_num();
        size_t n = (size_t)omp_get_num_threads();
        size_t begin = work->count * t / n, end = work->count * (t + 1) / n;
#ifdef HAVE_X86_READ
        if (wide)
            result |= or_words_avx2(work->x + begin, end - begin);
        else
#endif
            result |= or_words(work->x + begin, end - begin);
        (void)wide;
    }
    work->sink = result;
}

typedef struct loop_work {
    const float *x;
    size_t count;
    int threads;
    volatile double sink;
} loop_work;

/* What an application writes: a double accumulator, OpenMP's reduction
 * and simd clauses, nothing more. */
static void openmp_sum(void *arg)
{
    loop_work *work = arg;
    const float *x = work->x;
    double sum = 0.0;
    long count = (long)work->count;
#pragma omp parallel for simd num_threads(work->threads) proc_bind(spread)    \
    schedule(static) reduction(+ : sum)
    for (long i = 0; i < count; i++)
        sum += (double)x[i];
    work->sink = sum;
}

void bench_reference_reduce(const bench_reference_input *input,
                            bench_result *result)
{
    read_work read = {
        .x = input->first,
        .count = input->shape->u.reduce.count,
        .threads = input->threads,
    };
    bench_add_reference(result, "memory read bandwidth",
                        bench_time_best(read_all, &read, input->settings));
    loop_work loop = {
        .x = input->first,
        .count = input->shape->u.reduce.count,
        .threads = input->threads,
    };
    bench_add_reference(result, "openmp loop (f64 sum)",
                        bench_time_best(openmp_sum, &loop, input->settings));
    bench_quiesce();
}
#else
void bench_reference_reduce(const bench_reference_input *input,
                            bench_result *result)
{
    (void)input;
    (void)result;
}
#endif
