/* The references of a CUDA device: CUB DeviceReduce and a raw kernel
 * launch (reduce), cuBLAS SGEMM (gemm), cuDNN forward (conv), from the
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

static void note_failure(const char *what, const char *error)
{
    fprintf(stderr, "locus bench: reference %s failed: %s\n", what, error);
}

void bench_reference_cuda(const bench_reference_input *input,
                          bench_result *result)
{
    if (!loaded)
        load_modules();
    const bench_shape *shape = input->shape;
    const int repeat = input->settings->repeat;
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
                if (t->reduce(shape->u.reduce.count, seed, repeat, &seconds,
                              error, sizeof error) == 0)
                    bench_add_reference(result, "cub DeviceReduce::Sum",
                                        seconds);
                else
                    note_failure("cub DeviceReduce::Sum", error);
            }
            if (t->launch != NULL) {
                if (t->launch(repeat, &seconds, error, sizeof error) == 0)
                    bench_add_reference(result, "raw kernel launch + sync",
                                        seconds);
                else
                    note_failure("raw kernel launch", error);
            }
            break;
        case BENCH_GEMM:
            if (t->gemm != NULL) {
                const int tf32 = input->settings->math == LOCUS_MATH_TF32;
                const char *label =
                    tf32 ? "cublas sgemm tf32" : "cublas sgemm fp32";
                if (t->gemm(shape->u.gemm.m, shape->u.gemm.n, shape->u.gemm.k,
                            tf32, seed, repeat, &seconds, error,
                            sizeof error) == 0)
                    bench_add_reference(result, label, seconds);
                else
                    note_failure(label, error);
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
                const int tf32 = input->settings->math == LOCUS_MATH_TF32;
                if (t->conv(&cv, tf32, seed, repeat, &seconds, name,
                            sizeof name, error, sizeof error) == 0) {
                    char label[64];
                    snprintf(label, sizeof label, "cudnn %s %.24s",
                             tf32 ? "tf32" : "fp32", name);
                    bench_add_reference(result, label, seconds);
                } else {
                    note_failure("cudnn forward", error);
                }
            }
            break;
        }
    }
}
