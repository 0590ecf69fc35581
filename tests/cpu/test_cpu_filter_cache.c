/* The CPU backend's cache of packed convolution filters
 * (backends/cpu/filter_cache.c), seen from the public API.
 *
 * Why. The direct convolution (conv_direct.c) and the implicit GEMM
 * (conv_implicit.c) keep the packing of a filter buffer between calls, keyed by
 * the buffer's content key (its id and a version the runtime bumps on every
 * change). The danger of any such cache is a stale result: a conv that runs on
 * the packing of a filter the caller has since changed. So every change the API
 * allows is made here, each time with fresh random values, and the conv that
 * follows must match the float64 reference of the NEW filter:
 *
 *  1. a created filter buffer run twice (the second run hits the cache):
 *     right, and bitwise the same; and once through LOCUS_CONV_AUTO;
 *  2. locus_buffer_write of the whole filter, of one filter's weights, of
 *     one float;
 *  3. changes through locus_buffer_map (write, read-write; a read mapping
 *     changes nothing and must not break the cache);
 *  4. an op writing the filter buffer: it is the output C of locus_gemm
 *     and of locus_gemm_split, then the conv's filter;
 *  5. a wrapped filter (locus_buffer_wrap) changed behind Locus's back:
 *     such buffers have no key and must never be cached;
 *  6. a filter buffer destroyed and another of the same size created (it
 *     may get the same address; it must not get the old packing);
 *  7. two filter buffers alternating, and one buffer's content read as
 *     three shapes of the same filters and depth (32 x 16 x 3 x 3,
 *     32 x 144 x 1 x 1, 32 x 48 x 3 x 1);
 *  8. two contexts at once, each with its own cache and buffers;
 *  9. two application threads on one context, each with its own filter
 *     (rewritten as it goes) and both sharing a third;
 * 10. more filter buffers than the cache has entries (the eviction path).
 *
 * The whole sequence runs once per path and kernel table the CPU runs,
 * its contexts forced to the table: the direct kernel under avx2 (6 x 16
 * tiles; the CPU needs AVX2 and FMA) and avx512 (14 x 32; AVX-512F), and
 * the implicit GEMM under generic (any CPU), avx2 and avx512. Every
 * output is poisoned with NaN before its run. The shapes are small (1.3
 * and 1.8 MFLOP a conv), sized for the table's tiles, and asserted to
 * take the path under it (locus__cpu_direct_fits, an internal function,
 * like test_cpu_conv_direct.c's problems); on the direct path the record
 * then shows the direct plan's workspace. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <locus/locus.h>

#include "conv2d.h"
#include "conv_direct.h"
#include "conv_reference.h"
#include "cpu_contexts.h"
#include "cpu_conv_problem.h"
#include "isa.h"
#include "test_buffers.h"
#include "test_util.h"

/* Three shapes of side x side outputs, all of 32 x 144 filter floats: a
 * 3x3 layer whose input is copied into padded bands, a 1x3 layer read in
 * place (unpadded, on rows two wider; a 1x1 stride-1 layer's path depends
 * on the machine's L2), and a 3x1 layer (the same R as the first, another
 * S and C). */
static conv_case shape_3x3(size_t side)
{
    return (conv_case){1, 16, side, side, 32, 3, 3, 1, 1, 1, 1};
}

static conv_case shape_1x3(size_t side)
{
    return (conv_case){1, 48, side, side + 2, 32, 1, 3, 1, 1, 0, 0};
}

static conv_case shape_3x1(size_t side)
{
    return (conv_case){1, 48, side, side, 32, 3, 1, 1, 1, 1, 0};
}

/* A kernel table, the path its runs must take (direct kernel or implicit
 * GEMM) and the side of the images run under it. For the direct kernel a
 * whole number of its tiles, so that the 1x3 layer's rows are read in
 * place, and the rule takes all three shapes. With 32 filters, the rule's
 * arithmetic (test_cpu_conv_direct.c says how) is
 *   avx2, side 12 (2 tiles of 6): direct 12/12 * 32/32 = 1; the GEMM's
 *     6 x 16 tile: PQ 144 = 9 x 16, 32/36 = 0.889, x 0.95 = 0.844;
 *   avx512, side 14 (1 tile of 14): direct 1; the GEMM's 12 x 32 tile:
 *     196/224 * 32/36 = 0.778, x 0.95 = 0.739;
 *   avx2, side 14: direct 14/18 * 1 = 0.778 against the GEMM's 0.95 *
 *     196/208 * 32/36 = 0.796, so the GEMM;
 *   avx512, side 16: direct 16/28 = 0.571 against 0.95 * 256/256 *
 *     32/36 = 0.844, the GEMM;
 *   generic has no direct kernel: always the GEMM. */
typedef struct cache_table {
    const char *name;
    int (*cpu_runs)(void);
    int direct; /* 1: the direct kernel, 0: the implicit GEMM */
    size_t side;
} cache_table;

static int any_cpu(void)
{
    return 1;
}

static const cache_table cache_tables[] = {
    {"avx2", test_cpu_has_avx2_fma, 1, 12},
    {"avx512", test_cpu_has_avx512f, 1, 14},
    {"generic", any_cpu, 0, 14},
    {"avx2", test_cpu_has_avx2_fma, 0, 14},
    {"avx512", test_cpu_has_avx512f, 0, 16},
};
#define CACHE_TABLES (sizeof cache_tables / sizeof *cache_tables)

/* Filter buffers in the eviction case: more than the cache's 64 entries. */
#define MANY_FILTERS 80
/* Of those, how many are run again after all were run once. */
#define MANY_AGAIN 8
/* Per application thread: convs, and contents of its own filter. */
#define THREAD_RUNS 20
#define THREAD_VERSIONS 4

/* The table the sequence runs under, and the path it must take. Set in
 * main before each run of the sequence. */
static const cache_table *table;

/* ---- A site: one shape on one context, with its input and output ---- */

typedef struct site {
    const char *name; /* the context, in messages */
    locus_context *ctx;
    locus_device *dev;
    conv_case cc;
    size_t p, q;
    size_t in_count, f_count, out_count;
    float *in, *out;
    locus_buffer *bin, *bout;
    /* The workspace the direct plan records for this shape on the
     * device's workers; 0 on the implicit GEMM's path (its plan reads the
     * runtime's cache sizes, which test_conv_problem does not give). */
    size_t plan_bytes;
} site;

/* Fills s for shape cc on ctx's cpu device, with a random input. 0 on a
 * failure (recorded). */
static int site_open(site *s, const char *name, locus_context *ctx,
                     const conv_case *cc)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    s->ctx = ctx;
    s->cc = *cc;
    s->p = (cc->h + 2 * cc->ph - cc->r) / cc->sh + 1;
    s->q = (cc->w + 2 * cc->pw - cc->s) / cc->sw + 1;
    s->in_count = cc->n * cc->c * cc->h * cc->w;
    s->f_count = cc->k * cc->c * cc->r * cc->s;
    s->out_count = cc->n * cc->k * s->p * s->q;
    locus_device_info info;
    locus_device_info_init(&info);
    if (TEST_OK(locus_device_find(ctx, "cpu", &s->dev)) != LOCUS_SUCCESS ||
        TEST_OK(locus_device_get_info(s->dev, &info)) != LOCUS_SUCCESS)
        return 0;
    /* Without this the test could pass on the other path alone, never
     * touching this one's use of the cache. */
    locus__cpu_state state;
    locus__conv_problem pr =
        test_conv_problem(cc, table->name, info.compute_units, &state);
    if (!TEST_EXPECT(locus__cpu_direct_fits(&pr) == table->direct,
                     "%s: shape %zux%zux%zu k=%zu %zux%zu does not take the "
                     "%s path",
                     name, cc->c, cc->h, cc->w, cc->k, cc->r, cc->s,
                     table->direct ? "direct" : "implicit GEMM"))
        return 0;
    if (table->direct)
        s->plan_bytes = locus__cpu_direct_workspace(&pr);
    s->in = test_random_floats(s->in_count);
    s->out = malloc(s->out_count * sizeof *s->out);
    if (!TEST_EXPECT(s->in && s->out, "%s: out of memory", name))
        return 0;
    s->bin = test_upload_floats(ctx, s->in, s->in_count);
    return s->bin &&
           TEST_OK(locus_buffer_create(ctx, s->out_count * sizeof *s->out, NULL,
                                       &s->bout)) == LOCUS_SUCCESS;
}

static void site_close(site *s)
{
    locus_buffer_destroy(s->bin);
    locus_buffer_destroy(s->bout);
    free(s->in);
    free(s->out);
    memset(s, 0, sizeof *s);
}

static void site_desc(const site *s, locus_conv_algorithm algorithm,
                      locus_conv2d_desc *desc)
{
    conv_describe(&s->cc, desc);
    desc->algorithm = algorithm;
}

/* Runs the site's conv with filter buffer bf over a poisoned output into
 * s->out and checks it against the float64 reference of f, what bf must
 * now hold. 0 when the run failed (recorded). */
static int run_check_with(site *s, locus_buffer *bf, const float *f,
                          locus_conv_algorithm algorithm, const char *step)
{
    char what[256];
    snprintf(what, sizeof what, "%s [%s, c=%zu %zux%zu, %s]", step, s->name,
             s->cc.c, s->cc.r, s->cc.s,
             algorithm == LOCUS_CONV_AUTO ? "auto" : "implicit");
    locus_conv2d_desc desc;
    site_desc(s, algorithm, &desc);
    locus_record record;
    if (!conv_run_poisoned(s->ctx, s->dev, &desc, s->bin, bf, s->bout, s->out,
                           s->out_count, &record, what))
        return 0;
    TEST_EXPECT(strcmp(record.algorithm, "implicit") == 0,
                "%s: record algorithm \"%s\", expected \"implicit\"", what,
                record.algorithm);
    /* The direct plan's workspace is the sign the direct path ran (the
     * GEMM's is that the rule did not take it); a cache hit still records
     * it whole. */
    if (s->plan_bytes)
        TEST_EXPECT(record.workspace_bytes == s->plan_bytes,
                    "%s: record shows %llu bytes of workspace, the direct "
                    "plan %zu",
                    what, (unsigned long long)record.workspace_bytes,
                    s->plan_bytes);
    conv_check_output(&s->cc, s->p, s->q, s->in, f, s->out, NULL, NULL, what);
    return 1;
}

static int run_check(site *s, locus_buffer *bf, const float *f,
                     const char *step)
{
    return run_check_with(s, bf, f, LOCUS_CONV_IMPLICIT_GEMM, step);
}

/* Fresh random values: a stale packing of the old ones fails the check. */
static void refill(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = (float)test_rng_uniform(-1.0, 1.0);
}

static int write_all(locus_buffer *bf, const float *f, size_t count)
{
    return TEST_OK(locus_buffer_write(bf, 0, f, count * sizeof *f)) ==
           LOCUS_SUCCESS;
}

/* ---- 1-4. One created filter buffer through every kind of change ---- */

/* 1. Run twice: the second run uses the packing the first left. */
static void test_created(site *s, locus_buffer *bf, const float *f)
{
    float *first = malloc(s->out_count * sizeof *first);
    if (!TEST_EXPECT(first != NULL, "out of memory"))
        return;
    if (run_check(s, bf, f, "created, first run")) {
        memcpy(first, s->out, s->out_count * sizeof *first);
        if (run_check(s, bf, f, "created, second run"))
            TEST_EXPECT(memcmp(first, s->out, s->out_count * sizeof *first) ==
                            0,
                        "created [%s]: the second run (cached packing) "
                        "differs bitwise from the first",
                        s->name);
    }
    run_check_with(s, bf, f, LOCUS_CONV_AUTO, "created, third run");
    free(first);
}

/* 2. locus_buffer_write of all of it, of one filter's weights (filter 7),
 * and of one float in the middle. */
static void test_writes(site *s, locus_buffer *bf, float *f)
{
    refill(f, s->f_count);
    if (write_all(bf, f, s->f_count)) {
        run_check_with(s, bf, f, LOCUS_CONV_AUTO, "whole write");
        run_check(s, bf, f, "whole write, again");
    }

    size_t depth = s->cc.c * s->cc.r * s->cc.s, first = 7 * depth;
    refill(f + first, depth);
    if (TEST_OK(locus_buffer_write(bf, first * sizeof *f, f + first,
                                   depth * sizeof *f)) == LOCUS_SUCCESS)
        run_check(s, bf, f, "write of filter 7's weights");

    /* Moved by exactly 1, whatever it was: a change no rounding hides. */
    size_t middle = s->f_count / 2 + 3;
    f[middle] += 1.0f;
    if (TEST_OK(locus_buffer_write(bf, middle * sizeof *f, f + middle,
                                   sizeof *f)) == LOCUS_SUCCESS)
        run_check(s, bf, f, "write of one float");
}

/* Maps bf in mode and returns its memory, NULL on a failure (recorded). */
static float *map_filter(locus_buffer *bf, locus_map_mode mode)
{
    void *host = NULL;
    if (TEST_OK(locus_buffer_map(bf, mode, &host)) != LOCUS_SUCCESS)
        return NULL;
    return host;
}

/* 3. Changes through mappings. A write mapping gets all-new values; a
 * read-write one changes filter 20's weights from what it reads; a read
 * mapping changes nothing (the cached packing stays right). */
static void test_mappings(site *s, locus_buffer *bf, float *f)
{
    float *host = map_filter(bf, LOCUS_MAP_WRITE);
    if (host) {
        refill(f, s->f_count);
        memcpy(host, f, s->f_count * sizeof *f);
        if (TEST_OK(locus_buffer_unmap(bf)) == LOCUS_SUCCESS)
            run_check(s, bf, f, "write mapping");
    }

    host = map_filter(bf, LOCUS_MAP_READ_WRITE);
    if (host) {
        size_t depth = s->cc.c * s->cc.r * s->cc.s;
        TEST_EXPECT(memcmp(host, f, s->f_count * sizeof *f) == 0,
                    "read-write mapping [%s]: the filter's content is not "
                    "what was written",
                    s->name);
        for (size_t i = 20 * depth; i < 21 * depth; i++)
            f[i] = host[i] = 0.5f - host[i];
        if (TEST_OK(locus_buffer_unmap(bf)) == LOCUS_SUCCESS)
            run_check(s, bf, f, "read-write mapping");
    }

    host = map_filter(bf, LOCUS_MAP_READ);
    if (host && TEST_OK(locus_buffer_unmap(bf)) == LOCUS_SUCCESS)
        run_check(s, bf, f, "read mapping, nothing changed");
}

/* A buffer of fresh random floats, their values in x (count of them). */
static locus_buffer *random_buffer(locus_context *ctx, float *x, size_t count)
{
    refill(x, count);
    return test_upload_floats(ctx, x, count);
}

/* Whether c (m x n) is a times b (m x k, k x n) within float rounding:
 * else the gemm did not write the filter buffer, and the conv after it
 * would test nothing. */
static void check_product(const float *a, const float *b, const float *c,
                          size_t m, size_t n, size_t k, const char *what)
{
    double worst = 0.0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double ref = 0.0, mag = 0.0;
            for (size_t p = 0; p < k; p++) {
                ref += (double)a[i * k + p] * b[p * n + j];
                mag += fabs((double)a[i * k + p] * b[p * n + j]);
            }
            double err = fabs(c[i * n + j] - ref) / (mag > 0.0 ? mag : 1.0);
            if (!(err <= worst))
                worst = isnan(err) ? INFINITY : err;
        }
    TEST_EXPECT(worst <= 2.0 * ((double)k + 2.0) * 0x1.0p-24,
                "%s: the filter buffer read back is not the product (relative "
                "error %.3g)",
                what, worst);
}

/* 4. The filter buffer as the output C of locus_gemm, then of
 * locus_gemm_split (its own path to marking C written), M = K filters,
 * N = C R S, beta 0; the conv must use the product, read back. */
static void test_gemm_output(site *s, locus_buffer *bf, float *f)
{
    static const char *const names[] = {"locus_gemm output",
                                        "locus_gemm_split output"};
    const size_t m = s->cc.k, n = s->cc.c * s->cc.r * s->cc.s, k = 8;
    float *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b);
    if (!TEST_EXPECT(a && b, "out of memory"))
        goto done;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F32;
    desc.m = m;
    desc.n = n;
    desc.k = k;
    desc.alpha = 1.0;
    desc.beta = 0.0;
    for (int split = 0; split <= 1; split++) {
        locus_buffer *ba = random_buffer(s->ctx, a, m * k);
        locus_buffer *bb = random_buffer(s->ctx, b, k * n);
        locus_status status = LOCUS_ERROR_INVALID_ARGUMENT;
        if (ba && bb)
            status = split
                         ? locus_gemm_split(s->ctx, &s->dev, 1, NULL, &desc, ba,
                                            bb, bf, NULL)
                         : locus_gemm(s->ctx, s->dev, &desc, ba, bb, bf, NULL);
        if (ba && bb && TEST_OK(status) == LOCUS_SUCCESS &&
            TEST_OK(locus_buffer_read(bf, 0, f, s->f_count * sizeof *f)) ==
                LOCUS_SUCCESS) {
            check_product(a, b, f, m, n, k, names[split]);
            run_check(s, bf, f, names[split]);
        }
        locus_buffer_destroy(ba);
        locus_buffer_destroy(bb);
    }
done:
    free(a);
    free(b);
}

/* 1-4 in order on one buffer, each step run after the one before it has
 * left its packing in the cache. */
static void test_one_buffer(site *s)
{
    float *f = malloc(s->f_count * sizeof *f);
    locus_buffer *bf = NULL;
    if (!TEST_EXPECT(f != NULL, "out of memory"))
        return;
    bf = random_buffer(s->ctx, f, s->f_count);
    if (bf) {
        test_created(s, bf, f);
        test_writes(s, bf, f);
        test_mappings(s, bf, f);
        test_gemm_output(s, bf, f);
        run_check(s, bf, f, "after all changes, again");
    }
    locus_buffer_destroy(bf);
    free(f);
}

/* ---- 5-7. Wrapped, recreated and several buffers ---- */

/* 5. The caller's own array, changed with no Locus call between runs. */
static void test_wrapped(site *s)
{
    float *f = malloc(s->f_count * sizeof *f);
    locus_buffer *bf = NULL;
    if (!TEST_EXPECT(f != NULL, "out of memory"))
        return;
    refill(f, s->f_count);
    if (TEST_OK(locus_buffer_wrap(s->ctx, f, s->f_count * sizeof *f, &bf)) ==
        LOCUS_SUCCESS) {
        run_check(s, bf, f, "wrapped");
        refill(f, s->f_count);
        run_check(s, bf, f, "wrapped, array refilled behind Locus");
        f[s->f_count / 3] += 1.0f;
        run_check(s, bf, f, "wrapped, one float changed behind Locus");
    }
    locus_buffer_destroy(bf);
    free(f);
}

/* The host address of a buffer (through a read mapping), NULL on a
 * failure (recorded). */
static void *address_of(locus_buffer *buffer)
{
    void *host = NULL;
    if (TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ, &host)) !=
        LOCUS_SUCCESS)
        return NULL;
    TEST_OK(locus_buffer_unmap(buffer));
    return host;
}

/* 6. Destroyed and created again at the same size, a few times: the
 * allocator may well hand back the same memory, the packing must not
 * come back with it. */
static void test_recreated(site *s)
{
    float *f = malloc(s->f_count * sizeof *f);
    if (!TEST_EXPECT(f != NULL, "out of memory"))
        return;
    void *previous = NULL;
    int same = 0;
    for (int round = 0; round < 4; round++) {
        locus_buffer *bf = random_buffer(s->ctx, f, s->f_count);
        if (!bf)
            break;
        void *at = address_of(bf);
        same += round > 0 && at == previous;
        previous = at;
        run_check(s, bf, f, round ? "recreated filter" : "filter to recreate");
        locus_buffer_destroy(bf);
    }
    printf("recreated [%s]: %d of 3 new buffers at the old address\n", s->name,
           same);
    free(f);
}

/* 7a. Two buffers in turn, A B A B, then A changed and both again. */
static void test_alternating(site *s)
{
    float *fa = malloc(s->f_count * sizeof *fa);
    float *fb = malloc(s->f_count * sizeof *fb);
    locus_buffer *ba = NULL, *bb = NULL;
    if (!TEST_EXPECT(fa && fb, "out of memory"))
        goto done;
    ba = random_buffer(s->ctx, fa, s->f_count);
    bb = random_buffer(s->ctx, fb, s->f_count);
    if (!ba || !bb)
        goto done;
    for (int i = 0; i < 2; i++) {
        run_check(s, ba, fa, "alternating, A");
        run_check(s, bb, fb, "alternating, B");
    }
    refill(fa, s->f_count);
    if (write_all(ba, fa, s->f_count)) {
        run_check(s, bb, fb, "alternating, B after A's write");
        run_check(s, ba, fa, "alternating, A after its write");
    }
done:
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
    free(fa);
    free(fb);
}

/* 7b. One buffer's floats read as three shapes of 32 filters of depth
 * 144 (C R S = 16 3 3, 144 1 1, 48 3 1): each conv must match its own
 * reading of them, whichever shape ran before it, before and after a
 * change. The packing may depend on how the depth splits into C, R and
 * S; an entry shared by two splits would give one of them the other's
 * layout. */
static void test_shapes(site *const *sites, int count)
{
    size_t f_count = sites[0]->f_count;
    float *f = malloc(f_count * sizeof *f);
    locus_buffer *bf = NULL;
    int same = 1;
    for (int i = 1; i < count; i++)
        same &= sites[i]->f_count == f_count;
    if (!TEST_EXPECT(f != NULL && same,
                     "out of memory, or the shapes' filters differ in size"))
        goto done;
    bf = random_buffer(sites[0]->ctx, f, f_count);
    if (!bf)
        goto done;
    for (int i = 0; i <= count; i++)
        run_check(sites[i % count], bf, f, "one content, several shapes");
    refill(f, f_count);
    if (write_all(bf, f, f_count))
        for (int i = count; i >= 0; i--)
            run_check(sites[i % count], bf, f,
                      "one content, several shapes, after a write");
done:
    locus_buffer_destroy(bf);
    free(f);
}

/* ---- 8. Two contexts ---- */

/* Each context with its own buffers, runs interleaved, one filter changed
 * between them. */
static void test_two_contexts(site *first, locus_context *other_ctx,
                              const char *other_name)
{
    site second;
    float *f1 = malloc(first->f_count * sizeof *f1);
    float *f2 = malloc(first->f_count * sizeof *f2);
    locus_buffer *b1 = NULL, *b2 = NULL;
    int opened = site_open(&second, other_name, other_ctx, &first->cc);
    if (!TEST_EXPECT(f1 && f2, "out of memory") || !opened)
        goto done;
    b1 = random_buffer(first->ctx, f1, first->f_count);
    b2 = random_buffer(other_ctx, f2, first->f_count);
    if (!b1 || !b2)
        goto done;
    for (int i = 0; i < 2; i++) {
        run_check(first, b1, f1, "two contexts");
        run_check(&second, b2, f2, "two contexts");
    }
    refill(f2, first->f_count);
    if (write_all(b2, f2, first->f_count)) {
        run_check(first, b1, f1, "two contexts, after the other's write");
        run_check(&second, b2, f2, "two contexts, after a write");
    }
done:
    locus_buffer_destroy(b1);
    locus_buffer_destroy(b2);
    site_close(&second);
    free(f1);
    free(f2);
}

/* ---- 9. Two application threads on one context ---- */

/* One thread's work. Everything random is drawn before the threads start
 * (the generator is not thread-safe), and the outputs are checked after
 * they end, on the main thread (the failure count is not atomic). */
typedef struct thread_task {
    const site *s;            /* context, device, input: shared */
    locus_buffer *shared;     /* the filter both threads read */
    locus_buffer *own, *bout; /* this thread's */
    const float *versions;    /* THREAD_VERSIONS contents of `own` */
    float *outs;              /* THREAD_RUNS outputs */
    int used[THREAD_RUNS];    /* own version, or -1: shared */
    int failed_at;            /* the run that failed, -1: none */
    locus_status status;      /* and its status */
    char error[256];          /* and locus_last_error() */
} thread_task;

/* Runs i of t: own filter on even runs, the shared one on odd runs; own
 * rewritten with its next version every THREAD_RUNS / THREAD_VERSIONS
 * runs. */
static locus_status thread_run(thread_task *t, int i)
{
    const site *s = t->s;
    size_t f_count = s->f_count, out_count = s->out_count;
    const int per_version = THREAD_RUNS / THREAD_VERSIONS;
    locus_status status = LOCUS_SUCCESS;
    if (i % per_version == 0) {
        const float *next = t->versions + (size_t)(i / per_version) * f_count;
        status = locus_buffer_write(t->own, 0, next, f_count * sizeof *next);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    t->used[i] = i % 2 ? -1 : i / per_version;
    float *out = t->outs + (size_t)i * out_count;
    test_fill_nan(out, out_count);
    status = locus_buffer_write(t->bout, 0, out, out_count * sizeof *out);
    if (status != LOCUS_SUCCESS)
        return status;
    locus_conv2d_desc desc;
    site_desc(s, LOCUS_CONV_IMPLICIT_GEMM, &desc);
    status = locus_conv2d(s->ctx, s->dev, &desc, s->bin,
                          i % 2 ? t->shared : t->own, t->bout, NULL);
    if (status != LOCUS_SUCCESS)
        return status;
    return locus_buffer_read(t->bout, 0, out, out_count * sizeof *out);
}

static void *thread_main(void *arg)
{
    thread_task *t = arg;
    for (int i = 0; i < THREAD_RUNS; i++) {
        locus_status status = thread_run(t, i);
        if (status != LOCUS_SUCCESS) {
            t->failed_at = i;
            t->status = status;
            snprintf(t->error, sizeof t->error, "%s", locus_last_error());
            break;
        }
    }
    return NULL;
}

/* Checks what thread `index` computed, on the main thread. */
static void check_thread(const thread_task *t, int index, const float *shared)
{
    const site *s = t->s;
    int runs = THREAD_RUNS;
    if (t->failed_at >= 0) {
        TEST_EXPECT(0, "thread %d: run %d failed with %s: %s", index,
                    t->failed_at, locus_status_name(t->status), t->error);
        runs = t->failed_at;
    }
    for (int i = 0; i < runs; i++) {
        char what[128];
        const float *f = t->used[i] < 0
                             ? shared
                             : t->versions + (size_t)t->used[i] * s->f_count;
        snprintf(what, sizeof what, "thread %d run %d (%s filter%s) [%s]",
                 index, i, t->used[i] < 0 ? "shared" : "own",
                 t->used[i] < 0 ? "" : ", rewritten as it went", s->name);
        conv_check_output(&s->cc, s->p, s->q, s->in, f,
                          t->outs + (size_t)i * s->out_count, NULL, NULL, what);
    }
}

/* Sets up thread t's buffers and data; 0 on a failure (recorded). */
static int thread_prepare(thread_task *t, const site *s, locus_buffer *shared,
                          float *versions, float *outs)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->shared = shared;
    t->versions = versions;
    t->outs = outs;
    t->failed_at = -1;
    refill(versions, THREAD_VERSIONS * s->f_count);
    t->own = test_upload_floats(s->ctx, versions, s->f_count);
    return t->own &&
           TEST_OK(locus_buffer_create(s->ctx, s->out_count * sizeof(float),
                                       NULL, &t->bout)) == LOCUS_SUCCESS;
}

static void test_threads(site *s)
{
    enum { THREADS = 2 };
    thread_task tasks[THREADS];
    pthread_t threads[THREADS];
    int started[THREADS] = {0};
    memset(tasks, 0, sizeof tasks);
    float *shared = malloc(s->f_count * sizeof *shared);
    float *versions =
        malloc(THREADS * THREAD_VERSIONS * s->f_count * sizeof *versions);
    float *outs = malloc(THREADS * THREAD_RUNS * s->out_count * sizeof *outs);
    locus_buffer *bshared = NULL;
    if (!TEST_EXPECT(shared && versions && outs, "out of memory"))
        goto done;
    bshared = random_buffer(s->ctx, shared, s->f_count);
    if (!bshared)
        goto done;
    int ready = 1;
    for (int i = 0; i < THREADS && ready; i++)
        ready =
            thread_prepare(&tasks[i], s, bshared,
                           versions + (size_t)i * THREAD_VERSIONS * s->f_count,
                           outs + (size_t)i * THREAD_RUNS * s->out_count);
    if (!ready)
        goto done;
    for (int i = 0; i < THREADS; i++)
        started[i] = TEST_EXPECT(
            pthread_create(&threads[i], NULL, thread_main, &tasks[i]) == 0,
            "thread %d could not start", i);
    for (int i = 0; i < THREADS; i++)
        if (started[i]) {
            pthread_join(threads[i], NULL);
            check_thread(&tasks[i], i, shared);
        }
done:
    for (int i = 0; i < THREADS; i++) {
        locus_buffer_destroy(tasks[i].own);
        locus_buffer_destroy(tasks[i].bout);
    }
    locus_buffer_destroy(bshared);
    free(shared);
    free(versions);
    free(outs);
}

/* ---- 10. More filters than cache entries ---- */

/* Each of MANY_FILTERS buffers run once, the first MANY_AGAIN again
 * (pushed out by then, packed anew), then the first and the last
 * rewritten and run: all right. */
static void test_eviction(site *s)
{
    locus_buffer *bf[MANY_FILTERS] = {NULL};
    float *f = malloc(MANY_FILTERS * s->f_count * sizeof *f);
    if (!TEST_EXPECT(f != NULL, "out of memory"))
        return;
    int ok = 1;
    for (int i = 0; i < MANY_FILTERS && ok; i++) {
        bf[i] = random_buffer(s->ctx, f + (size_t)i * s->f_count, s->f_count);
        ok = bf[i] && run_check(s, bf[i], f + (size_t)i * s->f_count,
                                "many filters, first pass");
    }
    for (int i = 0; i < MANY_AGAIN && ok; i++)
        run_check(s, bf[i], f + (size_t)i * s->f_count,
                  "many filters, run again");
    const int changed[] = {0, MANY_FILTERS - 1};
    for (int j = 0; j < 2 && ok; j++) {
        float *fi = f + (size_t)changed[j] * s->f_count;
        refill(fi, s->f_count);
        if (write_all(bf[changed[j]], fi, s->f_count))
            run_check(s, bf[changed[j]], fi, "many filters, one rewritten");
    }
    for (int i = 0; i < MANY_FILTERS; i++)
        locus_buffer_destroy(bf[i]);
    free(f);
}

/* ---- main ---- */

/* The whole sequence, on contexts forced to the table, on images of
 * side x side. */
static void run_sequence(size_t side)
{
    char name[64], second[64];
    const char *path = table->direct ? "direct" : "gemm";
    snprintf(name, sizeof name, "%s %s context", table->name, path);
    snprintf(second, sizeof second, "%s %s second context", table->name, path);
    printf("isa %s, %s path, images %zux%zu\n", table->name, path, side, side);
    fflush(stdout);
    /* Forced, so that a LOCUS_CPU_ISA in the environment cannot take the
     * path away. */
    locus_context *ctx = test_cpu_context(table->name, NULL, NULL);
    locus_context *other = test_cpu_context(table->name, NULL, NULL);
    TEST_EXPECT(ctx && other, "%s: no context", name);
    const conv_case c3 = shape_3x3(side), c1 = shape_1x3(side),
                    c31 = shape_3x1(side);
    site s3 = {0}, s1 = {0}, s31 = {0};
    int opened = ctx && other && site_open(&s3, name, ctx, &c3) &&
                 site_open(&s1, name, ctx, &c1) &&
                 site_open(&s31, name, ctx, &c31);
    if (opened) {
        test_one_buffer(&s3);
        test_one_buffer(&s1);
        test_wrapped(&s3);
        test_recreated(&s3);
        test_alternating(&s3);
        site *const shapes[] = {&s3, &s1, &s31};
        test_shapes(shapes, 3);
        test_two_contexts(&s3, other, second);
        test_threads(&s3);
        test_eviction(&s3);
    }
    site_close(&s3);
    site_close(&s1);
    site_close(&s31);
    locus_context_destroy(other);
    locus_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    char exercised[128] = "";
    for (size_t i = 0; i < CACHE_TABLES; i++) {
        const cache_table *t = &cache_tables[i];
        locus__cpu_isa isa;
        locus__cpu_isa_init(&isa, t->name);
        if (!t->cpu_runs() || strcmp(isa.name, t->name) != 0) {
            printf("skipping %s: the CPU lacks it\n", t->name);
            continue;
        }
        if (test_cpu_isa_left_out(t->name))
            continue;
        table = t;
        run_sequence(t->side);
        snprintf(exercised + strlen(exercised),
                 sizeof exercised - strlen(exercised), "%s%s %s",
                 exercised[0] ? ", " : "", t->name,
                 t->direct ? "direct" : "gemm");
    }
    printf("%s: filter cache exercised under %s; %d failure(s)\n", argv[0],
           exercised, test_failures());
    return test_exit_code();
}
