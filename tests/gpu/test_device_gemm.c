/* GEMM on the device under test (device_test.h) against float64, in every
 * math mode: odd and prime shapes (edge tiles everywhere), all four
 * transpose cases, leading dimensions larger than the rows, alpha and beta,
 * and beta == 0 with C full of NaN (C must not be read); the BLAS rules of
 * alpha, beta and zero sizes (gemm_blas_rules.h). Prints the
 * measured relative error of each mode (max |C - C64| / sum |terms| over
 * C). The split cases are also run twice and must give the same bits. */
#include "../common/gemm_blas_rules.h"
#include "device_test.h"

typedef struct gemm_case {
    size_t m, n, k;
    int trans_a, trans_b;
    size_t ld_pad; /* added to every leading dimension */
    double alpha, beta;
} gemm_case;

/* The last two are wide and shallow: on a GPU of 132 SMs (the H200) the
 * second takes the CUDA backend's 8x16-a-thread FP32 kernel, which it keeps
 * for grids of 264 or more 128x128 blocks; the first, like the other cases
 * of more than 64 rows, its 256-thread 8x8 one.
 *
 * The five before them have leading dimensions that are multiples of 4 (the
 * CUDA tensor-core modes then copy whole 16-byte vectors, zero-filling
 * partial ones): k not a multiple of 4 (1001, 37, 3) in all transpose
 * cases, edge tiles in m and n, and k deep enough (1540) for many turns of
 * the 3-stage pipeline.
 *
 * The two before them have k in several slices of OpenCL's CPU-variant blocking
 * (at most 256 deep, beta applied with the first slice only): 777 in 4,
 * with a transposed A and padded leading dimensions; 600 in 3, with A's
 * rows 32-byte aligned (its float8 packing) and a transposed B. */
static const gemm_case cases[] = {
    {1, 1, 1, 0, 0, 0, 1.0, 0.0},          {7, 7, 7, 0, 0, 0, 1.0, 0.0},
    {33, 17, 65, 0, 0, 0, 1.0, 0.0},       {33, 17, 65, 1, 0, 0, 1.0, 0.0},
    {33, 17, 65, 0, 1, 0, 1.0, 0.0},       {33, 17, 65, 1, 1, 0, 1.0, 0.0},
    {131, 257, 67, 0, 0, 3, 1.5, 0.5},     {131, 257, 67, 1, 0, 5, -1.0, 2.0},
    {131, 257, 67, 0, 1, 1, 0.5, -1.0},    {131, 257, 67, 1, 1, 7, 2.0, 1.0},
    {1000, 7, 33, 0, 0, 0, 1.0, 0.0},      {7, 1000, 33, 1, 1, 0, 1.0, 0.0},
    {1, 1023, 1000, 0, 0, 0, 1.0, 0.0},    {1023, 1, 1000, 1, 0, 0, 1.0, 0.0},
    {256, 128, 512, 0, 0, 0, 1.0, 0.0},    {256, 128, 512, 1, 1, 4, 1.0, 1.0},
    {1023, 1023, 1023, 0, 0, 0, 1.0, 0.0}, {509, 1021, 257, 0, 1, 0, 1.0, 0.0},
    {97, 401, 777, 1, 0, 3, 1.5, -0.5},    {200, 40, 600, 0, 1, 0, -1.0, 2.0},
    {301, 257, 1001, 0, 0, 3, 1.0, 0.0},   {301, 257, 1001, 1, 1, 3, 0.5, 1.5},
    {130, 130, 37, 1, 0, 2, 1.0, 0.0},     {129, 131, 3, 0, 1, 1, 1.0, 0.0},
    {300, 260, 1540, 0, 0, 0, 1.0, -1.0},  {1700, 1300, 5, 0, 0, 0, 1.0, 0.0},
    {2100, 2100, 7, 1, 1, 1, 1.0, 0.5},
};

/* Cases CUDA runs with k split in every mode (gemm.cu): fewer
 * 128 x 128 tiles than the GPU has SMs, k at least 256, and leading
 * dimensions that are multiples of 4 (m, n and k alike modulo 4, so one
 * pad serves every transpose case). k 1001 and 4095 leave a shorter last
 * chunk (a second launch, with a partial vector at the k edge); 2048 and
 * 1024 divide evenly. The partial products are summed in a fixed order,
 * so each call is run twice and must give the same bits; the record must
 * name the split, so that a change that stops taking it fails here. */
static const gemm_case split_cases[] = {
    {201, 129, 1001, 0, 0, 3, 1.0, 0.0},  {201, 129, 1001, 1, 0, 7, 1.5, 0.5},
    {201, 129, 1001, 0, 1, 3, -1.0, 2.0}, {201, 129, 1001, 1, 1, 3, 0.5, 0.0},
    {256, 256, 2048, 0, 0, 0, 1.0, 0.0},  {256, 256, 2048, 1, 1, 4, 1.0, 1.0},
    {7, 33, 4095, 0, 1, 1, 1.0, 0.5},     {1024, 1024, 1024, 0, 0, 0, 1.0, 0.0},
};

/* The largest error of each mode over all cases, reported at the end. */
static double worst[3];

/* The GPU's compute units (SMs on CUDA): k is split for grids of fewer
 * tiles. */
static int gpu_units;

static double element(const float *x, size_t ld, int trans, size_t row,
                      size_t col)
{
    return trans ? (double)x[col * ld + row] : (double)x[row * ld + col];
}

/* A split case's call again, C made from c0 again: it must give the bits
 * of the first call, `first` (c_count floats, the padding included). On
 * CUDA, every mode but the wgmma path must have taken the split (record: the
 * first call's), with workspace for at least two partial products. */
static void check_split(locus_context *context, locus_device *gpu,
                        const locus_gemm_desc *desc, locus_buffer *ba,
                        locus_buffer *bb, const float *c0, const float *first,
                        size_t c_count, const locus_record *record, int math)
{
#ifndef LOCUS_TEST_BACKEND_OPENCL
    /* tf32 takes the Hopper kernel instead where there is one (compute
     * capability 9.0 exactly), which is not split. */
    const size_t tiles = (desc->m + 127) / 128 * ((desc->n + 127) / 128);
    if (strncmp(record->algorithm, "wgmma", 5) != 0 &&
        tiles < (size_t)gpu_units) {
        CHECK(strstr(record->algorithm, "k split") != NULL,
              "gemm %zux%zux%zu trans %d%d %s on %d SMs ran \"%s\", not a k "
              "split",
              desc->m, desc->n, desc->k, desc->trans_a == LOCUS_TRANS,
              desc->trans_b == LOCUS_TRANS, cuda_test_math_names[math],
              gpu_units, record->algorithm);
        CHECK(record->workspace_bytes >= 2 * desc->m * desc->n * sizeof(float),
              "gemm %zux%zux%zu %s (%s): workspace_bytes %llu", desc->m,
              desc->n, desc->k, cuda_test_math_names[math], record->algorithm,
              (unsigned long long)record->workspace_bytes);
    }
#else
    (void)record;
#endif
    float *again = malloc(c_count * sizeof(float));
    CHECK(again != NULL, "malloc");
    locus_buffer *bc = cuda_test_buffer(context, c0, c_count);
    if (again != NULL && bc != NULL) {
        locus_status status = locus_gemm(context, gpu, desc, ba, bb, bc, NULL);
        CHECK(status == LOCUS_SUCCESS, "gemm %zux%zux%zu %s again: %s", desc->m,
              desc->n, desc->k, cuda_test_math_names[math], locus_last_error());
        if (status == LOCUS_SUCCESS && cuda_test_read(bc, again, c_count))
            CHECK(memcmp(again, first, c_count * sizeof(float)) == 0,
                  "gemm %zux%zux%zu trans %d%d %s: a second call gave "
                  "other bits",
                  desc->m, desc->n, desc->k, desc->trans_a == LOCUS_TRANS,
                  desc->trans_b == LOCUS_TRANS, cuda_test_math_names[math]);
    }
    locus_buffer_destroy(bc);
    free(again);
}

static void check_case(locus_context *context, locus_device *gpu,
                       const gemm_case *t, int split)
{
    const size_t a_rows = t->trans_a ? t->k : t->m;
    const size_t a_cols = t->trans_a ? t->m : t->k;
    const size_t b_rows = t->trans_b ? t->n : t->k;
    const size_t b_cols = t->trans_b ? t->k : t->n;
    const size_t lda = a_cols + t->ld_pad, ldb = b_cols + t->ld_pad;
    const size_t ldc = t->n + t->ld_pad;
    const size_t a_count = a_rows * lda, b_count = b_rows * ldb;
    const size_t c_count = t->m * ldc;
    float *a = malloc(a_count * sizeof(float));
    float *b = malloc(b_count * sizeof(float));
    float *c0 = malloc(c_count * sizeof(float));
    float *c = malloc(c_count * sizeof(float));
    double *expected = malloc(t->m * t->n * sizeof(double));
    double *magnitude = malloc(t->m * t->n * sizeof(double));
    CHECK(a && b && c0 && c && expected && magnitude, "malloc");
    if (!(a && b && c0 && c && expected && magnitude))
        goto free_host;
    cuda_test_fill(a, a_count);
    cuda_test_fill(b, b_count);
    cuda_test_fill(c0, c_count);
    if (t->beta == 0.0)
        for (size_t i = 0; i < c_count; i++)
            c0[i] = NAN;
    for (size_t i = 0; i < t->m; i++)
        for (size_t j = 0; j < t->n; j++) {
            double sum = 0.0, mag = 0.0;
            for (size_t p = 0; p < t->k; p++) {
                double term = element(a, lda, t->trans_a, i, p) *
                              element(b, ldb, t->trans_b, p, j);
                sum += term;
                mag += fabs(term);
            }
            double e = t->alpha * sum, g = fabs(t->alpha) * mag;
            if (t->beta != 0.0) {
                e += t->beta * c0[i * ldc + j];
                g += fabs(t->beta * c0[i * ldc + j]);
            }
            expected[i * t->n + j] = e;
            magnitude[i * t->n + j] = g;
        }

    locus_buffer *ba = cuda_test_buffer(context, a, a_count);
    locus_buffer *bb = cuda_test_buffer(context, b, b_count);
    for (int math = 0; math < 3 && ba != NULL && bb != NULL; math++) {
        locus_buffer *bc = cuda_test_buffer(context, c0, c_count);
        if (bc == NULL)
            break;
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.trans_a = t->trans_a ? LOCUS_TRANS : LOCUS_NO_TRANS;
        desc.trans_b = t->trans_b ? LOCUS_TRANS : LOCUS_NO_TRANS;
        desc.m = t->m;
        desc.n = t->n;
        desc.k = t->k;
        desc.lda = lda;
        desc.ldb = ldb;
        desc.ldc = ldc;
        desc.alpha = t->alpha;
        desc.beta = t->beta;
        desc.math = (locus_math_mode)math;
        locus_record record;
        locus_record_init(&record);
        locus_status status =
            locus_gemm(context, gpu, &desc, ba, bb, bc, &record);
        CHECK(status == LOCUS_SUCCESS,
              "gemm %zux%zux%zu trans %d%d ld+%zu %s: %s", t->m, t->n, t->k,
              t->trans_a, t->trans_b, t->ld_pad, cuda_test_math_names[math],
              locus_last_error());
        if (status == LOCUS_SUCCESS && cuda_test_read(bc, c, c_count)) {
            double error = 0.0;
            size_t where = 0;
            for (size_t i = 0; i < t->m; i++)
                for (size_t j = 0; j < t->n; j++) {
                    double e =
                        cuda_test_error(c[i * ldc + j], expected[i * t->n + j],
                                        magnitude[i * t->n + j]);
                    if (!(e <= error)) {
                        error = e;
                        where = i * t->n + j;
                    }
                }
            /* Padding columns of C are never written. */
            int padding_kept = 1;
            for (size_t i = 0; i < t->m; i++)
                for (size_t j = t->n; j < ldc; j++)
                    if (memcmp(&c[i * ldc + j], &c0[i * ldc + j],
                               sizeof(float)) != 0)
                        padding_kept = 0;
            double tolerance =
                cuda_test_tolerance(t->k, cuda_test_math_roundoff[math]);
            CHECK(error <= tolerance,
                  "gemm %zux%zux%zu trans %d%d ld+%zu alpha %g beta %g %s "
                  "(%s): relative error %.3g at (%zu, %zu) (got %.9g, "
                  "expected %.9g), tolerance %.3g",
                  t->m, t->n, t->k, t->trans_a, t->trans_b, t->ld_pad, t->alpha,
                  t->beta, cuda_test_math_names[math], record.algorithm, error,
                  where / t->n, where % t->n,
                  (double)c[(where / t->n) * ldc + where % t->n],
                  expected[where], tolerance);
            CHECK(padding_kept, "gemm %zux%zux%zu %s wrote C's padding columns",
                  t->m, t->n, t->k, cuda_test_math_names[math]);
            if (!(error <= worst[math]))
                worst[math] = error;
            if (split)
                check_split(context, gpu, &desc, ba, bb, c0, c, c_count,
                            &record, math);
        }
        locus_buffer_destroy(bc);
    }
    locus_buffer_destroy(ba);
    locus_buffer_destroy(bb);
free_host:
    free(a);
    free(b);
    free(c0);
    free(c);
    free(expected);
    free(magnitude);
}

/* The BLAS rules (tests/common/gemm_blas_rules.h) on the device, through
 * the scheduler (device NULL), a queue of the device, and a split of the
 * rows between the device and the cpu. */
static void check_blas_rules(locus_context *context, locus_device *gpu,
                             locus_device *cpu)
{
    gemm_rules_call direct = {context, DEVICE_TEST_BACKEND, gemm_rules_direct,
                              gpu};
    CHECK(gemm_blas_rules_check(&direct) == 0, "the BLAS rules on %s",
          direct.label);
    gemm_rules_call automatic = {context, "device NULL", gemm_rules_direct,
                                 NULL};
    CHECK(gemm_blas_rules_check(&automatic) == 0, "the BLAS rules on %s",
          automatic.label);
    locus_queue *queue = NULL;
    CHECK(locus_queue_create(context, gpu, &queue) == LOCUS_SUCCESS,
          "locus_queue_create: %s", locus_last_error());
    if (queue != NULL) {
        gemm_rules_call queued = {context, DEVICE_TEST_BACKEND " queue",
                                  gemm_rules_queued, queue};
        CHECK(gemm_blas_rules_check(&queued) == 0, "the BLAS rules on %s",
              queued.label);
        locus_queue_destroy(queue);
    }
    locus_device *both[2] = {gpu, cpu};
    static const double halves[2] = {1.0, 1.0};
    gemm_rules_split_devices split = {both, 2, halves};
    gemm_rules_call split_call = {context, DEVICE_TEST_BACKEND " + cpu split",
                                  gemm_rules_split, &split};
    CHECK(gemm_blas_rules_check(&split_call) == 0, "the BLAS rules on %s",
          split_call.label);
}

int main(void)
{
    locus_context *context = NULL;
    locus_device *gpu = NULL, *cpu = NULL;
    int opened = device_test_open(&context, &gpu, &cpu);
    if (opened != 0)
        return opened;
    locus_device_info info;
    locus_device_info_init(&info);
    locus_status status = locus_device_get_info(gpu, &info);
    CHECK(status == LOCUS_SUCCESS, "locus_device_get_info: %s",
          locus_last_error());
    gpu_units = info.compute_units;
    check_blas_rules(context, gpu, cpu);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(context, gpu, &cases[i], 0);
    for (size_t i = 0; i < sizeof split_cases / sizeof split_cases[0]; i++)
        check_case(context, gpu, &split_cases[i], 1);
    for (int math = 0; math < 3; math++)
        printf("gemm %s: worst relative error vs float64 %.3g "
               "(tolerance at k = 1023: %.3g)\n",
               cuda_test_math_names[math], worst[math],
               cuda_test_tolerance(1023, cuda_test_math_roundoff[math]));
    locus_context_destroy(context);
    return cuda_test_finish("test_" DEVICE_TEST_BACKEND "_gemm");
}
