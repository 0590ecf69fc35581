/* The CMake consumer's program (tests/install/cmake_consumer): a context,
 * one small gemm on the default device, the result checked exactly (small
 * integers, so every sum is exact in float32), and the library's version
 * against the header's. Exits 0 when all holds. */
#include <stdio.h>
#include <stdlib.h>

#include <locus/locus.h>

#define M 3
#define N 2
#define K 4

/* Prints the failure and its detail; returns 1 for main's exit status. */
static int failed(const char *what, locus_status status)
{
    fprintf(stderr, "consumer: %s: %s (%s)\n", what, locus_status_str(status),
            locus_last_error());
    return 1;
}

int main(void)
{
    if (locus_version() != LOCUS_VERSION) {
        fprintf(stderr, "consumer: header %d, library %d\n", LOCUS_VERSION,
                locus_version());
        return 1;
    }
    float a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; ++i) {
        a[i] = (float)(i % 5) - 2.0f;
    }
    for (int i = 0; i < K * N; ++i) {
        b[i] = (float)(i % 3) + 1.0f;
    }
    locus_context *context = NULL;
    locus_status status = locus_context_create(NULL, &context);
    if (status != LOCUS_SUCCESS) {
        return failed("creating a context", status);
    }
    int result = 1;
    locus_buffer *buffer_a = NULL, *buffer_b = NULL, *buffer_c = NULL;
    if ((status = locus_buffer_wrap(context, a, sizeof a, &buffer_a)) != 0 ||
        (status = locus_buffer_wrap(context, b, sizeof b, &buffer_b)) != 0 ||
        (status = locus_buffer_wrap(context, c, sizeof c, &buffer_c)) != 0) {
        result = failed("wrapping the matrices", status);
        goto destroy_buffers;
    }
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = M;
    desc.n = N;
    desc.k = K;
    desc.alpha = 1.0;
    desc.beta = 0.0;
    locus_record record;
    locus_record_init(&record);
    status =
        locus_gemm(context, NULL, &desc, buffer_a, buffer_b, buffer_c, &record);
    if (status != LOCUS_SUCCESS) {
        result = failed("gemm", status);
        goto destroy_buffers;
    }
    result = 0;
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            float want = 0.0f;
            for (int p = 0; p < K; ++p) {
                want += a[i * K + p] * b[p * N + j];
            }
            if (c[i * N + j] != want) {
                fprintf(stderr, "consumer: c[%d][%d] = %g, want %g\n", i, j,
                        (double)c[i * N + j], (double)want);
                result = 1;
            }
        }
    }
    if (result == 0) {
        printf("consumer: locus %s, gemm %dx%dx%d on %s: ok\n",
               locus_version_string(), M, N, K, record.device);
    }
destroy_buffers:
    locus_buffer_destroy(buffer_c);
    locus_buffer_destroy(buffer_b);
    locus_buffer_destroy(buffer_a);
    locus_context_destroy(context);
    return result;
}
