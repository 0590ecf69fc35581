/* A queue's results written back beside the next op (prefetch_to_host,
 * docs/SCHEDULER.md "Overlapped uploads") on cuda:0: gemms whose inputs
 * start on the host, through one queue with LOCUS_QUEUE_OVERLAP on and
 * off; results against float64 and bitwise the same both ways. Shapes put
 * C in pageable memory through the download ring (under the pin size)
 * and in pinned memory (above it); one op reads and rewrites an earlier
 * op's result (beta 1) after that result may have been written back; one
 * result is read while the queue still runs; one queue is destroyed
 * before anything is read, and nothing is lost. Skips (77) without a CUDA
 * device. Public API. */
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

typedef struct shape {
    size_t m, n, k;
} shape;

/* C of 0.07, 1.3, 4.5 and 12.6 MB: below and above the 4 MiB pin size. */
static const shape shapes[] = {
    {37, 29, 41}, {523, 611, 97}, {1031, 1100, 64}, {2100, 1500, 33}};
#define SHAPES (sizeof shapes / sizeof *shapes)
#define OPS 4 /* per shape: C_i = A_i B_i, then C_0 += A_3 B_3 */

static locus_context *context;
static locus_device *gpu, *cpu;

typedef struct inputs {
    float *a[OPS], *b[OPS];
} inputs;

static void make_inputs(const shape *s, inputs *in)
{
    for (int i = 0; i < OPS; i++) {
        in->a[i] = malloc(s->m * s->k * sizeof(float));
        in->b[i] = malloc(s->k * s->n * sizeof(float));
        if (in->a[i])
            cuda_test_fill(in->a[i], s->m * s->k);
        if (in->b[i])
            cuda_test_fill(in->b[i], s->k * s->n);
    }
}

static void free_inputs(inputs *in)
{
    for (int i = 0; i < OPS; i++) {
        free(in->a[i]);
        free(in->b[i]);
    }
}

/* c = a b (+ c0 where given), worst relative error against float64. */
static double worst_error(const shape *s, const float *got, const float *a,
                          const float *b, const float *c0)
{
    double worst = 0;
    for (size_t i = 0; i < s->m; i++)
        for (size_t j = 0; j < s->n; j++) {
            double want = c0 ? (double)c0[i * s->n + j] : 0;
            double magnitude = fabs(want);
            for (size_t p = 0; p < s->k; p++) {
                double term = (double)a[i * s->k + p] * b[p * s->n + j];
                want += term;
                magnitude += fabs(term);
            }
            double error = cuda_test_error(got[i * s->n + j], want, magnitude);
            if (!(error <= worst))
                worst = error;
        }
    return worst;
}

static locus_gemm_desc describe(const shape *s, double beta)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = s->m;
    desc.n = s->n;
    desc.k = s->k;
    desc.beta = beta;
    return desc;
}

/* Runs the shape's ops through a queue with overlap as given; got[i]
 * receives C_i (C_0 after the accumulation). early: C_1 is read once its
 * event says it completed, while the queue runs on; destroy_first: the
 * queue is destroyed, not finished, before the other reads. */
static void run_queue(const shape *s, const inputs *in, const char *overlap,
                      int destroy_first, float *got[OPS])
{
    setenv("LOCUS_QUEUE_OVERLAP", overlap, 1);
    size_t elements = s->m * s->n;
    locus_buffer *a[OPS], *b[OPS], *c[OPS];
    for (int i = 0; i < OPS; i++) {
        a[i] = cuda_test_buffer(context, in->a[i], s->m * s->k);
        b[i] = cuda_test_buffer(context, in->b[i], s->k * s->n);
        c[i] = cuda_test_buffer(context, NULL, elements); /* NaN */
    }
    locus_queue *queue = NULL;
    CHECK(locus_queue_create(context, gpu, &queue) == LOCUS_SUCCESS,
          "locus_queue_create (overlap %s): %s", overlap, locus_last_error());
    unsetenv("LOCUS_QUEUE_OVERLAP");
    int made = queue != NULL;
    for (int i = 0; i < OPS; i++)
        made = made && a[i] && b[i] && c[i];
    if (!made)
        goto release;
    locus_gemm_desc plain = describe(s, 0), accumulate = describe(s, 1);
    locus_event *second = NULL;
    for (int i = 0; i < OPS; i++)
        CHECK(locus_enqueue_gemm(queue, &plain, a[i], b[i], c[i], NULL,
                                 i == 1 ? &second : NULL) == LOCUS_SUCCESS,
              "enqueue op %d: %s", i, locus_last_error());
    /* C_0 again, after three ops: its write-back may be done or in
     * flight; the accumulation must read the result and leave the host
     * copy stale until it is written back again. */
    CHECK(locus_enqueue_gemm(queue, &accumulate, a[3], b[3], c[0], NULL,
                             NULL) == LOCUS_SUCCESS,
          "enqueue the accumulation: %s", locus_last_error());
    if (second) {
        CHECK(locus_event_wait(second) == LOCUS_SUCCESS, "op 1's event: %s",
              locus_last_error());
        cuda_test_read(c[1], got[1], elements);
        locus_event_destroy(second);
    }
    if (destroy_first) {
        locus_queue_destroy(queue);
        queue = NULL;
    } else {
        CHECK(locus_queue_finish(queue) == LOCUS_SUCCESS, "finish: %s",
              locus_last_error());
    }
    for (int i = 0; i < OPS; i++)
        if (i != 1)
            cuda_test_read(c[i], got[i], elements);
release:
    if (queue)
        locus_queue_destroy(queue);
    for (int i = 0; i < OPS; i++) {
        locus_buffer_destroy(a[i]);
        locus_buffer_destroy(b[i]);
        locus_buffer_destroy(c[i]);
    }
}

static void test_shape(const shape *s)
{
    inputs in;
    make_inputs(s, &in);
    size_t elements = s->m * s->n;
    float *got[2][2][OPS]; /* [overlap on, off][finished, destroyed] */
    int allocated = 1;
    for (int w = 0; w < 2; w++)
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < OPS; i++) {
                got[w][d][i] = malloc(elements * sizeof(float));
                allocated = allocated && got[w][d][i];
            }
    for (int i = 0; i < OPS; i++)
        allocated = allocated && in.a[i] && in.b[i];
    CHECK(allocated, "host memory for %zux%zux%zu", s->m, s->n, s->k);
    if (!allocated)
        goto release;
    static const char *const switches[2] = {"1", "0"};
    for (int w = 0; w < 2; w++)
        for (int d = 0; d < 2; d++)
            run_queue(s, &in, switches[w], d, got[w][d]);
    double tolerance = cuda_test_tolerance(s->k, 0x1p-24);
    for (int w = 0; w < 2; w++)
        for (int d = 0; d < 2; d++) {
            const char *how = d ? "queue destroyed" : "queue finished";
            for (int i = 1; i < OPS; i++) {
                double error =
                    worst_error(s, got[w][d][i], in.a[i], in.b[i], NULL);
                CHECK(error <= tolerance,
                      "%zux%zux%zu overlap %s, %s: C_%d off by %g (%g "
                      "allowed)",
                      s->m, s->n, s->k, switches[w], how, i, error, tolerance);
            }
            /* C_0 = A_0 B_0 + A_3 B_3 against float64 of both products. */
            double worst = 0;
            for (size_t i = 0; i < s->m; i++)
                for (size_t j = 0; j < s->n; j++) {
                    double want = 0, magnitude = 0;
                    for (size_t p = 0; p < s->k; p++) {
                        double t0 = (double)in.a[0][i * s->k + p] *
                                    in.b[0][p * s->n + j];
                        double t3 = (double)in.a[3][i * s->k + p] *
                                    in.b[3][p * s->n + j];
                        want += t0 + t3;
                        magnitude += fabs(t0) + fabs(t3);
                    }
                    double error = cuda_test_error(got[w][d][0][i * s->n + j],
                                                   want, magnitude);
                    if (!(error <= worst))
                        worst = error;
                }
            CHECK(worst <= 2 * tolerance,
                  "%zux%zux%zu overlap %s, %s: C_0 after the accumulation "
                  "off by %g (%g allowed)",
                  s->m, s->n, s->k, switches[w], how, worst, 2 * tolerance);
        }
    /* The same kernels on the same data: overlap changes where results
     * travel, never their bits. */
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < OPS; i++)
            CHECK(memcmp(got[0][d][i], got[1][d][i],
                         elements * sizeof(float)) == 0,
                  "%zux%zux%zu: C_%d differs with overlap on and off (%s)",
                  s->m, s->n, s->k, i, d ? "destroyed" : "finished");
release:
    for (int w = 0; w < 2; w++)
        for (int d = 0; d < 2; d++)
            for (int i = 0; i < OPS; i++)
                free(got[w][d][i]);
    free_inputs(&in);
}

int main(void)
{
    int opened = cuda_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    for (size_t i = 0; i < SHAPES; i++)
        test_shape(&shapes[i]);
    locus_context_destroy(context);
    return cuda_test_finish("test_cuda_queue_writeback");
}
