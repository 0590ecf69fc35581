/* Large copies between a caller's memory and a buffer's host copy
 * (runtime/memory/host_copy.c), split over the workers: every byte lands
 * where it should and none outside, at sizes below, at and above the
 * split's minimum and at odd addresses; the same through
 * locus_buffer_write and locus_buffer_read at odd offsets; and while
 * another thread's CPU ops hold the pool (the copy is then the caller's
 * own memcpy), with the other thread's results right too. On this
 * machine's topology and on a synthetic one of 2 nodes x 2 cores. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "context_types.h"
#include "host_copy.h"
#include "test_util.h"

enum { GUARD = 256 };

static void fill(unsigned char *p, size_t bytes, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < bytes; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, bytes - i < 8 ? bytes - i : 8);
    }
}

/* The first byte of [p, p + bytes) that is not `value`, or bytes. */
static size_t first_not(const unsigned char *p, size_t bytes,
                        unsigned char value)
{
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != value)
            return i;
    return bytes;
}

static void test_direct(locus_context *context, const char *where)
{
    const size_t min = LOCUS__PARALLEL_COPY_MIN_BYTES;
    /* Below the minimum (one memcpy), just above it at an aligned and an
     * odd address, and 2.x times it (under valgrind each costs seconds). */
    const size_t cases[][2] = {
        {min - 1, 1}, {min + 13, 0}, {min + 13, 63}, {2 * min + 4097, 1}};
    unsigned char *source = malloc(2 * min + 4097 + 64);
    unsigned char *area = malloc(2 * min + 4097 + 64 + 2 * GUARD);
    if (!TEST_EXPECT(source && area, "host memory"))
        goto release;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t bytes = cases[c][0], offset = cases[c][1];
        fill(source + offset, bytes, c + 1);
        memset(area, 0xa5, bytes + offset + 2 * GUARD);
        unsigned char *to = area + GUARD + offset;
        locus__host_copy(context, to, source + offset, bytes);
        TEST_EXPECT(memcmp(to, source + offset, bytes) == 0,
                    "%s: a copy of %zu bytes at offset %zu differs", where,
                    bytes, offset);
        size_t before = first_not(area, GUARD + offset, 0xa5);
        size_t after = first_not(to + bytes, GUARD, 0xa5);
        TEST_EXPECT(before == GUARD + offset && after == GUARD,
                    "%s: a copy of %zu bytes at offset %zu wrote outside "
                    "it (%s)",
                    where, bytes, offset, after < GUARD ? "after" : "before");
    }
release:
    free(source);
    free(area);
}

/* A buffer of 2 x min + 5 bytes written and read back at offset 3 (the
 * rest written first), then whole. */
static void test_buffer_round_trip(locus_context *context, const char *where)
{
    const size_t bytes = 2 * LOCUS__PARALLEL_COPY_MIN_BYTES + 5;
    unsigned char *data = malloc(bytes), *back = malloc(bytes);
    locus_buffer *buffer = NULL;
    if (!TEST_EXPECT(data && back, "host memory") ||
        TEST_OK(locus_buffer_create(context, bytes, NULL, &buffer)) !=
            LOCUS_SUCCESS)
        goto release;
    fill(data, bytes, 99);
    TEST_OK(locus_buffer_write(buffer, 0, data, bytes));
    fill(data + 3, bytes - 3, 100);
    TEST_OK(locus_buffer_write(buffer, 3, data + 3, bytes - 3));
    memset(back, 0, bytes);
    TEST_OK(locus_buffer_read(buffer, 3, back + 3, bytes - 3));
    TEST_EXPECT(memcmp(back + 3, data + 3, bytes - 3) == 0,
                "%s: the read at offset 3 differs from the write", where);
    memset(back, 0, bytes);
    TEST_OK(locus_buffer_read(buffer, 0, back, bytes));
    TEST_EXPECT(memcmp(back, data, bytes) == 0,
                "%s: the whole read differs from what was written", where);
release:
    locus_buffer_destroy(buffer);
    free(data);
    free(back);
}

typedef struct busy_gemms {
    locus_context *context;
    atomic_int stop, failures, done;
} busy_gemms;

/* CPU gemms of all ones, 96^3 (on the workers), until told to stop: each
 * C element must be 96. */
static void *run_gemms(void *arg)
{
    busy_gemms *busy = arg;
    enum { N = 96 };
    static float a[N * N], c[N * N];
    for (int i = 0; i < N * N; i++)
        a[i] = 1;
    locus_buffer *ba = NULL, *bc = NULL;
    locus_device *cpu = NULL;
    if (locus_device_find(busy->context, "cpu", &cpu) != LOCUS_SUCCESS ||
        locus_buffer_wrap(busy->context, a, sizeof a, &ba) != LOCUS_SUCCESS ||
        locus_buffer_wrap(busy->context, c, sizeof c, &bc) != LOCUS_SUCCESS) {
        atomic_fetch_add(&busy->failures, 1);
        goto release;
    }
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = desc.n = desc.k = N;
    while (!atomic_load(&busy->stop)) {
        memset(c, 0, sizeof c);
        if (locus_gemm(busy->context, cpu, &desc, ba, ba, bc, NULL) !=
                LOCUS_SUCCESS ||
            c[0] != N || c[N * N - 1] != N)
            atomic_fetch_add(&busy->failures, 1);
        atomic_fetch_add(&busy->done, 1);
    }
release:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bc);
    return NULL;
}

static void test_beside_cpu_ops(locus_context *context, const char *where)
{
    busy_gemms busy = {.context = context};
    pthread_t thread;
    if (!TEST_EXPECT(pthread_create(&thread, NULL, run_gemms, &busy) == 0,
                     "pthread_create"))
        return;
    while (atomic_load(&busy.done) < 3 && !atomic_load(&busy.failures))
        sched_yield();
    test_buffer_round_trip(context, where);
    atomic_store(&busy.stop, 1);
    pthread_join(thread, NULL);
    TEST_EXPECT(atomic_load(&busy.failures) == 0,
                "%s: %d gemms beside the copies failed or were wrong", where,
                atomic_load(&busy.failures));
}

static void test_context(const char *topology, const char *where)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.topology = topology;
    options.backends = "cpu";
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
        return;
    test_direct(context, where);
    test_buffer_round_trip(context, where);
    test_beside_cpu_ops(context, where);
    locus_context_destroy(context);
}

int main(void)
{
    test_context(NULL, "this machine");
    test_context("synthetic:node:2 core:2 pu:1", "2 synthetic nodes");
    return test_exit_code();
}
