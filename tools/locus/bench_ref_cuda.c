/* The references of a CUDA device, in the bench's dtype: CUB
 * DeviceReduce (f32, f64) and a raw kernel launch (reduce), cuBLAS SGEMM,
 * DGEMM or GemmEx bf16/f16 with an f32 C (gemm), cuDNN forward (conv, f32
 * and f64), from the
 * modules of tools/locus/bench_cuda, loaded with dlopen on first use from
 * $LOCUS_BENCH_CUDA_PATH, the folder of the `locus` executable (the build
 * tree), then the install folder. A module that is absent or fails to load
 * is reported once on stderr and its references are skipped; the tool
 * never links a CUDA library. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_cuda/bench_cuda_api.h"
#include "bench_net.h"

#ifndef LOCUS_BENCH_MODULE_DIR
#define LOCUS_BENCH_MODULE_DIR "."
#endif

static const char *const module_names[] = {"cub", "cublas", "cudnn"};
#define MODULE_COUNT (sizeof module_names / sizeof module_names[0])

static const locus_bench_cuda *modules[MODULE_COUNT];
static bool loaded;

static void *open_in(const char *dir, const char *name, char *why,
                     size_t why_size)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/locus-bench-%s.so", dir, name);
    if (access(path, F_OK) != 0)
        return NULL;
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL)
        snprintf(why, why_size, "%s", dlerror());
    return handle;
}

static void load_modules(void)
{
    loaded = true;
    char exe_dir[PATH_MAX] = ".";
    ssize_t length = readlink("/proc/self/exe", exe_dir, sizeof exe_dir - 1);
    if (length > 0) {
        exe_dir[length] = '\0';
        char *slash = strrchr(exe_dir, '/');
        if (slash != NULL)
            *slash = '\0';
    }
    const char *env = getenv("LOCUS_BENCH_CUDA_PATH");
    const char *dirs[] = {env, exe_dir, LOCUS_BENCH_MODULE_DIR};
    for (size_t m = 0; m < MODULE_COUNT; m++) {
        char why[512] = "not built or not installed";
        void *handle = NULL;
        for (size_t d = 0; d < 3 && handle == NULL; d++)
            if (dirs[d] != NULL && dirs[d][0] != '\0')
                handle = open_in(dirs[d], module_names[m], why, sizeof why);
        locus_bench_cuda_entry_fn entry =
            handle != NULL ? (locus_bench_cuda_entry_fn)(uintptr_t)dlsym(
                                 handle, LOCUS_BENCH_CUDA_ENTRY)
                           : NULL;
        const locus_bench_cuda *table = entry != NULL ? entry() : NULL;
        if (table == NULL || table->abi != LOCUS_BENCH_CUDA_ABI) {
            fprintf(stderr,
                    "locus bench: CUDA reference module locus-bench-%s "
                    "unavailable (%s); its references are skipped\n",
                    module_names[m],
                    handle != NULL ? "no entry or another ABI" : why);
            continue;
        }
        modules[m] = table; /* never closed: the process ends first */
    }
}

/* A module's result: the reference added, or why not. A dtype the
 * module does not offer is no failure: the reference is just absent.
 * Callers run the module first and pass its time after: as arguments of
 * one call, C leaves open whether `seconds` is read before the module
 * writes it (it was, and every cuBLAS and CUB row read the previous
 * row's time). */
static void take(int code, bench_result *result, const char *what,
                 double seconds, const char *error)
{
    if (code == 0)
        bench_add_reference(result, what, seconds);
    else if (code != LOCUS_BENCH_CUDA_NOT_OFFERED)
        fprintf(stderr, "locus bench: reference %s failed: %s\n", what, error);
}

static const char *gemm_label(locus_dtype dtype, int tf32)
{
    switch (dtype) {
    case LOCUS_DTYPE_F64:
        return "cublas dgemm";
    case LOCUS_DTYPE_BF16:
        return "cublas gemmex bf16 (f32 out)";
    case LOCUS_DTYPE_F16:
        return "cublas gemmex f16 (f32 out)";
    case LOCUS_DTYPE_F32:
        break;
    }
    return tf32 ? "cublas sgemm tf32" : "cublas sgemm fp32";
}

void bench_reference_cuda(const bench_reference_input *input,
                          bench_result *result)
{
    if (!loaded)
        load_modules();
    const bench_shape *shape = input->shape;
    const int repeat = input->settings->repeat;
    const locus_dtype dtype = input->settings->dtype;
    const int tf32 =
        input->settings->math == LOCUS_MATH_TF32 && dtype == LOCUS_DTYPE_F32;
    const uint64_t seed = 12345;
    char error[512] = "", name[64] = "";
    double seconds = 0.0;
    for (size_t m = 0; m < MODULE_COUNT; m++) {
        const locus_bench_cuda *t = modules[m];
        if (t == NULL)
            continue;
        switch (shape->op) {
        case BENCH_REDUCE:
            if (t->reduce != NULL) {
                int code = t->reduce(shape->u.reduce.count, (int)dtype, seed,
                                     repeat, &seconds, error, sizeof error);
                take(code, result,
                     dtype == LOCUS_DTYPE_F64 ? "cub DeviceReduce::Sum f64"
                                              : "cub DeviceReduce::Sum",
                     seconds, error);
            }
            if (t->launch != NULL) {
                int code = t->launch(repeat, &seconds, error, sizeof error);
                take(code, result, "raw kernel launch + sync", seconds, error);
            }
            break;
        case BENCH_GEMM:
            if (t->gemm != NULL) {
                int code = t->gemm(shape->u.gemm.m, shape->u.gemm.n,
                                   shape->u.gemm.k, (int)dtype, tf32, seed,
                                   repeat, &seconds, error, sizeof error);
                take(code, result, gemm_label(dtype, tf32), seconds, error);
            }
            break;
        case BENCH_CONV:
            if (t->conv != NULL) {
                const bench_conv_shape *c = &shape->u.conv;
                const locus_bench_cuda_conv cv = {
                    c->batch,        c->channels, c->height,
                    c->width,        c->filters,  c->kernel_height,
                    c->kernel_width, c->stride,   c->pad,
                };
                int code =
                    t->conv(&cv, (int)dtype, tf32, seed, repeat, &seconds, name,
                            sizeof name, error, sizeof error);
                char label[64];
                snprintf(label, sizeof label, "cudnn %s %.24s",
                         dtype == LOCUS_DTYPE_F64 ? "f64"
                         : tf32                   ? "tf32"
                                                  : "fp32",
                         name);
                take(code, result, code == 0 ? label : "cudnn forward", seconds,
                     error);
            }
            break;
        }
    }
}

bool bench_cudnn_conv_layer(const locus_conv2d_desc *d, bool bias, int repeat,
                            double *seconds, char *name, size_t name_size,
                            char *why, size_t why_size)
{
    if (!loaded)
        load_modules();
    const locus_bench_cuda *t = modules[2];
    if (t == NULL || t->conv_layer == NULL) {
        snprintf(why, why_size, "cudnn: module locus-bench-cudnn unavailable");
        return false;
    }
    const locus_bench_cuda_conv_layer layer = {
        .batch = d->batch,
        .channels = d->in_channels,
        .height = d->in_height,
        .width = d->in_width,
        .filters = d->out_channels,
        .kernel_h = d->kernel_height,
        .kernel_w = d->kernel_width,
        .stride_h = d->stride_h,
        .stride_w = d->stride_w,
        .pad_top = d->pad_h,
        .pad_bottom = d->pad_bottom == LOCUS_CONV_PAD_SAME_AS_TOP
                          ? d->pad_h
                          : d->pad_bottom,
        .pad_left = d->pad_w,
        .pad_right = d->pad_right == LOCUS_CONV_PAD_SAME_AS_TOP ? d->pad_w
                                                                : d->pad_right,
        .dilation_h = d->dilation_h > 0 ? d->dilation_h : 1,
        .dilation_w = d->dilation_w > 0 ? d->dilation_w : 1,
        .groups = d->groups > 0 ? d->groups : 1,
        .bias = bias,
        .activation = (int)d->activation,
    };
    const int tf32 = d->math == LOCUS_MATH_TF32 && d->dtype == LOCUS_DTYPE_F32;
    char algorithm[48] = "", error[256] = "";
    int code =
        t->conv_layer(&layer, (int)d->dtype, tf32, 12345, repeat, seconds,
                      algorithm, sizeof algorithm, error, sizeof error);
    if (code != 0) {
        snprintf(why, why_size, "%s", error);
        return false;
    }
    snprintf(name, name_size, "cudnn %s %s",
             d->dtype == LOCUS_DTYPE_F64 ? "f64"
             : tf32                      ? "tf32"
                                         : "fp32",
             algorithm);
    return true;
}
