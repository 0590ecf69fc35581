/* The table a CUDA reference module of `locus bench` exports (one module
 * per vendor library: cub, cublas, cudnn; see tools/meson.build). The
 * modules are loaded with dlopen by bench_ref_cuda.c, so the `locus` tool
 * and liblocus never link a CUDA library, and a machine without CUDA, or
 * without one of the libraries, loses only that reference.
 *
 * Each module allocates its own device inputs, fills them with
 * reproducible pseudo-random values in [-1, 1) from the seed, runs one
 * warm-up, then `repeat` timed runs (CUDA events), and returns the best
 * time in seconds. Entries a module does not offer are NULL. On failure an
 * entry returns 1 with the reason in error; for a dtype it does not offer,
 * LOCUS_BENCH_CUDA_NOT_OFFERED.
 *
 * dtype is locus_dtype's value (locus.h; this header does not include
 * it): f32 and f64 hold every operand; bf16 and f16 are gemm inputs with
 * an f32 output and f32 accumulation, as Locus defines them. */
#ifndef LOCUS_BENCH_CUDA_API_H
#define LOCUS_BENCH_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the entries take a dtype. 3: conv_layer appended. */
#define LOCUS_BENCH_CUDA_ABI 3
#define LOCUS_BENCH_CUDA_NOT_OFFERED 2
enum {
    LOCUS_BENCH_CUDA_F32 = 1,
    LOCUS_BENCH_CUDA_F64 = 2,
    LOCUS_BENCH_CUDA_BF16 = 3,
    LOCUS_BENCH_CUDA_F16 = 4,
};
#define LOCUS_BENCH_CUDA_ENTRY "locus_bench_cuda_entry"

/* N, C, H, W, K, R, S, stride, pad, as `locus bench conv --size`. */
typedef struct locus_bench_cuda_conv {
    size_t batch, channels, height, width, filters, kernel_h, kernel_w;
    size_t stride, pad;
} locus_bench_cuda_conv;

/* A network's layer (`locus bench conv --net`): groups, dilation, the
 * four paddings, an optional bias of K and a fused activation (0 none, 1
 * relu, 2 relu6, as locus_activation). */
typedef struct locus_bench_cuda_conv_layer {
    size_t batch, channels, height, width, filters, kernel_h, kernel_w;
    size_t stride_h, stride_w;
    size_t pad_top, pad_bottom, pad_left, pad_right;
    size_t dilation_h, dilation_w;
    size_t groups;
    int bias;
    int activation;
} locus_bench_cuda_conv_layer;

typedef struct locus_bench_cuda {
    int abi; /* LOCUS_BENCH_CUDA_ABI */
    const char *library;
    /* Sum of count elements in dtype (f32 or f64). */
    int (*reduce)(size_t count, int dtype, uint64_t seed, int repeat,
                  double *seconds, char *error, size_t error_size);
    /* C = A B, row-major m x k times k x n, beta 0; tf32: tensor cores
     * (f32 only). */
    int (*gemm)(size_t m, size_t n, size_t k, int dtype, int tf32,
                uint64_t seed, int repeat, double *seconds, char *error,
                size_t error_size);
    /* Forward convolution, NCHW/KCRS in dtype; name gets the algorithm
     * used. */
    int (*conv)(const locus_bench_cuda_conv *shape, int dtype, int tf32,
                uint64_t seed, int repeat, double *seconds, char *name,
                size_t name_size, char *error, size_t error_size);
    /* An empty kernel launch plus stream synchronize. */
    int (*launch)(int repeat, double *seconds, char *error, size_t error_size);
    /* A network's layer with its bias and activation, NCHW/KCRS in dtype;
     * name gets the algorithm and how the bias and activation ran. A
     * feature the library lacks: LOCUS_BENCH_CUDA_NOT_OFFERED. */
    int (*conv_layer)(const locus_bench_cuda_conv_layer *layer, int dtype,
                      int tf32, uint64_t seed, int repeat, double *seconds,
                      char *name, size_t name_size, char *error,
                      size_t error_size);
} locus_bench_cuda;

typedef const locus_bench_cuda *(*locus_bench_cuda_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
