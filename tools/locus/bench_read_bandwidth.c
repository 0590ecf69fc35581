#include "bench_read_bandwidth.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_READ 1
#endif

/* OR of every 64-bit word: no dependency between loads but the cheap
 * accumulation, so the loop runs at the speed memory delivers. */
static uint64_t or_words(const unsigned char *bytes, size_t count)
{
    size_t words = count / sizeof(uint64_t);
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
/* The same with 32-byte loads, four in flight per iteration. */
__attribute__((target("avx2"))) static uint64_t
or_words_avx2(const unsigned char *bytes, size_t count)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= count; i += 128) {
        const __m256i *p = (const __m256i *)(bytes + i);
        a0 = _mm256_or_si256(a0, _mm256_loadu_si256(p));
        a1 = _mm256_or_si256(a1, _mm256_loadu_si256(p + 1));
        a2 = _mm256_or_si256(a2, _mm256_loadu_si256(p + 2));
        a3 = _mm256_or_si256(a3, _mm256_loadu_si256(p + 3));
    }
    a0 = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a0);
    return lanes[0] | lanes[1] | lanes[2] | lanes[3] |
           or_words(bytes + i, count - i);
}

/* 64-byte loads, eight in flight per iteration: a core of a Sapphire
 * Rapids host reads faster with this many lines outstanding than with
 * the AVX2 loop's two, and the probe must read at least as fast as
 * Locus's own reduce, whose inner loop has the same shape, or it is no
 * ceiling. */
__attribute__((target("avx512f"))) static uint64_t
or_words_avx512(const unsigned char *bytes, size_t count)
{
    __m512i acc[8];
    for (int l = 0; l < 8; l++)
        acc[l] = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 512 <= count; i += 512)
        for (int l = 0; l < 8; l++)
            acc[l] = _mm512_or_si512(
                acc[l], _mm512_loadu_si512(bytes + i + 64 * (size_t)l));
    __m512i all = acc[0];
    for (int l = 1; l < 8; l++)
        all = _mm512_or_si512(all, acc[l]);
    uint64_t lanes[8];
    _mm512_storeu_si512(lanes, all);
    uint64_t result = 0;
    for (int l = 0; l < 8; l++)
        result |= lanes[l];
    return result | or_words(bytes + i, count - i);
}
#endif

/* The readers wait for the next run's number under one mutex and report
 * their end the same way: a condition variable, not a barrier, so a team
 * of fewer threads than planned (one that failed to start) still runs,
 * and the timing thread sleeps instead of taking a reader's core. */
typedef enum read_loop { READ_WORDS, READ_AVX2, READ_AVX512 } read_loop;

typedef struct read_team {
    const unsigned char *data;
    size_t bytes;
    size_t count;   /* slices */
    read_loop loop; /* the loop the readers run */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int run;     /* the run the readers may start; -1: stop */
    size_t done; /* readers finished with the current run */
} read_team;

typedef struct reader {
    read_team *team;
    size_t index;
    int cpu;
    bool pinned;
    volatile uint64_t sink; /* keeps the loads from being optimized away */
} reader;

static void *read_slices(void *arg)
{
    reader *self = arg;
    read_team *team = self->team;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(self->cpu, &set);
    self->pinned =
        pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
    /* Contiguous slices in 64-byte lines, as Locus's workers take them. */
    size_t lines = team->bytes / 64;
    size_t begin = lines * self->index / team->count * 64;
    size_t end = self->index + 1 == team->count
                     ? team->bytes
                     : lines * (self->index + 1) / team->count * 64;
    int seen = 0;
    for (;;) {
        pthread_mutex_lock(&team->lock);
        while (team->run == seen)
            pthread_cond_wait(&team->changed, &team->lock);
        seen = team->run;
        pthread_mutex_unlock(&team->lock);
        if (seen < 0)
            return NULL;
        uint64_t result;
#ifdef HAVE_X86_READ
        if (team->loop == READ_AVX512)
            result = or_words_avx512(team->data + begin, end - begin);
        else if (team->loop == READ_AVX2)
            result = or_words_avx2(team->data + begin, end - begin);
        else
#endif
            result = or_words(team->data + begin, end - begin);
        self->sink = result;
        pthread_mutex_lock(&team->lock);
        team->done++;
        pthread_cond_broadcast(&team->changed);
        pthread_mutex_unlock(&team->lock);
    }
}

static double seconds_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Starts run number `run` and waits until `readers` threads end it. */
static double one_run(read_team *team, int run, size_t readers)
{
    pthread_mutex_lock(&team->lock);
    team->done = 0;
    team->run = run;
    double start = seconds_now();
    pthread_cond_broadcast(&team->changed);
    while (team->done < readers)
        pthread_cond_wait(&team->changed, &team->lock);
    double seconds = seconds_now() - start;
    pthread_mutex_unlock(&team->lock);
    return seconds;
}

bool bench_read_measure(const void *data, size_t bytes, const int *cpus,
                        size_t cpu_count, int repeat, double *seconds)
{
    if (cpu_count == 0 || repeat < 1 || bytes == 0)
        return false;
    read_team team = {.data = data, .bytes = bytes, .count = cpu_count};
#ifdef HAVE_X86_READ
    team.loop = __builtin_cpu_supports("avx512f") ? READ_AVX512
                : __builtin_cpu_supports("avx2")  ? READ_AVX2
                                                  : READ_WORDS;
#endif
    pthread_mutex_init(&team.lock, NULL);
    pthread_cond_init(&team.changed, NULL);
    reader *readers = calloc(cpu_count, sizeof *readers);
    pthread_t *threads = calloc(cpu_count, sizeof *threads);
    size_t started = 0;
    for (; readers && threads && started < cpu_count; ++started) {
        readers[started] =
            (reader){.team = &team, .index = started, .cpu = cpus[started]};
        if (pthread_create(&threads[started], NULL, read_slices,
                           &readers[started]) != 0)
            break;
    }
    bool ok = started == cpu_count;
    if (ok) {
        int run = 1;
        one_run(&team, run++, started); /* warms the TLB and page tables */
#ifdef HAVE_X86_READ
        /* Which of the two wide loops reads faster differs by core (the
         * number of lines a core keeps in flight): each reads once, and
         * the faster one is the probe, so that it is the ceiling of any
         * loop of either shape, a reduce's included. */
        if (team.loop == READ_AVX512) {
            double wide = one_run(&team, run++, started);
            team.loop = READ_AVX2;
            double narrow = one_run(&team, run++, started);
            team.loop = wide <= narrow ? READ_AVX512 : READ_AVX2;
        }
#endif
        for (int timed = 0; timed < repeat; ++timed)
            seconds[timed] = one_run(&team, run++, started);
    }
    pthread_mutex_lock(&team.lock);
    team.run = -1;
    pthread_cond_broadcast(&team.changed);
    pthread_mutex_unlock(&team.lock);
    for (size_t i = 0; i < started; ++i) {
        pthread_join(threads[i], NULL);
        ok = ok && readers[i].pinned;
    }
    pthread_cond_destroy(&team.changed);
    pthread_mutex_destroy(&team.lock);
    free(readers);
    free(threads);
    return ok;
}

typedef struct cpu_collect {
    int cpus[BENCH_READ_MAX_CPUS];
    size_t count;
} cpu_collect;

static void collect_cpu(long cpu, void *state)
{
    cpu_collect *collect = state;
    if (cpu >= 0 && cpu < CPU_SETSIZE && collect->count < BENCH_READ_MAX_CPUS)
        collect->cpus[collect->count++] = (int)cpu;
}

size_t bench_read_cpus(const locus_context *context, uint64_t node_mask,
                       int threads, int *cpus, size_t capacity)
{
    size_t nodes = 0;
    if (locus_numa_node_count(context, &nodes) != LOCUS_SUCCESS)
        return 0;
    cpu_set_t allowed;
    bool restrict_to = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    static cpu_collect all;
    all.count = 0;
    for (size_t i = 0; i < nodes; ++i) {
        locus_numa_node_info info;
        locus_numa_node_info_init(&info);
        if (locus_numa_node_get(context, i, &info) != LOCUS_SUCCESS)
            continue;
        if (node_mask != 0 &&
            (info.os_index >= 64 || !(node_mask >> info.os_index & 1)))
            continue;
        cpu_list_for_each(info.cpus, collect_cpu, &all);
    }
    size_t usable = 0;
    for (size_t i = 0; i < all.count; ++i)
        if (!restrict_to || CPU_ISSET(all.cpus[i], &allowed))
            all.cpus[usable++] = all.cpus[i];
    size_t want = threads > 0 ? (size_t)threads : usable;
    if (want > usable)
        want = usable;
    if (want > capacity)
        want = capacity;
    /* Evenly spread: Linux numbers each core's first hardware thread
     * before the siblings, so this takes cores before siblings. */
    for (size_t i = 0; i < want; ++i)
        cpus[i] = all.cpus[i * usable / want];
    return want;
}

size_t bench_last_level_cache(void)
{
    size_t largest = 0;
    for (int index = 0; index < 8; index++) {
        char path[96], text[32];
        snprintf(path, sizeof path,
                 "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        FILE *file = fopen(path, "r");
        if (!file)
            break;
        if (fgets(text, sizeof text, file)) {
            char *end;
            size_t size = strtoull(text, &end, 10);
            size *= *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1;
            largest = size > largest ? size : largest;
        }
        fclose(file);
    }
    return largest;
}

bool bench_read_is_memory(size_t bytes)
{
    size_t cache = bench_last_level_cache();
    return cache == 0 || bytes / BENCH_READ_CACHE_FACTOR >= cache;
}
