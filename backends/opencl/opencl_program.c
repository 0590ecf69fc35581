/*
 * The kernels' program on one device: built once, at the first op on the
 * device, and kept on disk so that later processes (and later Locus
 * contexts of this one) load the binary instead of compiling, which takes
 * seconds per device with PoCL.
 *
 * The cache file is named by a hash of everything that changes the binary:
 * device name and vendor, platform and driver version, the build options
 * (which hold the tile sizes) and the source. opencl_cache.c writes it by
 * atomic rename and refuses a truncated or damaged one; a binary the driver
 * refuses is rebuilt too. So a stale or broken cache can cost a build, never
 * a wrong or failed op.
 *
 * LOCUS_OPENCL_TUNING (docs/ENVIRONMENT.md), read at every build, picks
 * the gpu or cpu tuning and kernel variants whatever the device type, so
 * that the GPU kernels can be tested on PoCL. The tuning is in the build
 * options, hence in the cache key: forcing it never loads the other
 * variant's binary.
 *
 * Two test-only hooks, read at every build (documented in
 * docs/ARCHITECTURE.md, not for production use):
 *  - LOCUS_OPENCL_EXTRA_SOURCE: OpenCL C appended to the source, so a test
 *    can make the build fail and check that the compiler's log reaches the
 *    error detail;
 *  - LOCUS_OPENCL_CACHE_REPORT: a file to which one line per program is
 *    appended, "<event> <cache file>", event one of built, loaded,
 *    rebuilt-damaged, rebuilt-refused; tests read it to see what the cache
 *    did.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opencl_cache.h"
#include "opencl_errors.h"
#include "opencl_internal.h"

extern const char locus__opencl_kernel_source[];
extern const size_t locus__opencl_kernel_source_size;
extern const char locus__opencl_kernel_source_f64[];
extern const size_t locus__opencl_kernel_source_f64_size;

static void release_f64(opencl_device *device);

/* GPU: the CUDA backend's FP32 design (gemm.cl): 128 x 128 tiles, k steps
 * of TK = 8, 256 work-items (WN x WM = 256 x 1) of 8 x 8 results each,
 * float4 local reads, double-buffered local memory (2 x 2 x TK x 132
 * floats: 16.5 KiB at TK = 8, 33 KiB at TK = 16, which builds too and is
 * the first thing to try against 8 on a new GPU). The register cap of 128
 * is the CUDA kernel's __launch_bounds__(256, 2): two groups per SM. It
 * serves every shape (any m, n, k, leading dimension, offset and batch).
 * Reduce groups of 256. CPU (PoCL and the like, which run a work-group as
 * loops on one thread): the LOCUS_CPU_KERNELS variants, one work-item per
 * group, because PoCL saves every work-item's accumulators at each barrier,
 * which leaves the GPU kernels a small fraction of the CPU backend's speed
 * there, and B read unpacked keeps the micro-kernels well short of it too
 * (docs/PERFORMANCE.md). Its gemm packs blocks of up to TM x TK of A and
 * TK x TN of B in local memory and runs 6 x 16 micro-kernels over them
 * (gemm.cl): TK = 256 keeps a 256 x 16 micro-panel of B in half of a 32 KiB
 * L1, as the CPU backend's blocking does; TM = 96 keeps the A block (96
 * KiB) in L2 and leaves enough row blocks at m = 256 to share out; TN = 256
 * packs each A block once per 256 columns. Of the sizes tried on PoCL
 * (docs/PERFORMANCE.md), the neighbours of these run alike on square GEMMs,
 * TM = 96 is ahead on conv's m = 64 GEMMs, and a smaller TM loses clearly.
 * Reduce: 8 groups per core for balance, each a float8 tree per 64 floats. */
static const opencl_tuning gpu_tuning = {.name = "gpu",
                                         .tm = 128,
                                         .tn = 128,
                                         .tk = 8,
                                         .wm = 1,
                                         .wn = 256,
                                         .rwg = 256,
                                         .groups_per_unit = 8,
                                         .cpu_kernels = 0,
                                         .max_registers = 128};
static const opencl_tuning cpu_tuning = {.name = "cpu",
                                         .tm = 96,
                                         .tn = 256,
                                         .tk = 256,
                                         .wm = 1,
                                         .wn = 1,
                                         .rwg = 1,
                                         .groups_per_unit = 8,
                                         .cpu_kernels = 1,
                                         .max_registers = 0};

/* The tuning of a device: by its type, unless LOCUS_OPENCL_TUNING names
 * one (an empty value reads as unset). */
static locus_status choose_tuning(opencl_state *state, size_t index,
                                  opencl_device *device)
{
    const char *forced = getenv("LOCUS_OPENCL_TUNING");
    if (forced == NULL || forced[0] == '\0') {
        device->tuning =
            device->kind == LOCUS_DEVICE_GPU ? gpu_tuning : cpu_tuning;
    } else if (strcmp(forced, "gpu") == 0) {
        device->tuning = gpu_tuning;
    } else if (strcmp(forced, "cpu") == 0) {
        device->tuning = cpu_tuning;
    } else {
        return state->services->fail(
            LOCUS_ERROR_BAD_ENVIRONMENT,
            "opencl:%zu: LOCUS_OPENCL_TUNING is '%s'; expected gpu or cpu",
            index, forced);
    }
    return LOCUS_SUCCESS;
}

/* Whether the device's extension list names ext (a whole word). A failed
 * query reads as no, after a warning: the extension is only an option. */
static int has_extension(opencl_state *state, size_t index,
                         const opencl_device *device, const char *ext)
{
    size_t size = 0;
    cl_int err =
        clGetDeviceInfo(device->id, CL_DEVICE_EXTENSIONS, 0, NULL, &size);
    char *list = NULL;
    if (err == CL_SUCCESS && size > 0) {
        list = malloc(size + 1);
        if (list == NULL)
            return 0;
        err =
            clGetDeviceInfo(device->id, CL_DEVICE_EXTENSIONS, size, list, NULL);
        list[size] = '\0';
    }
    if (err != CL_SUCCESS) {
        state->services->log(state->runtime, LOCUS_LOG_WARN,
                             "opencl:%zu: CL_DEVICE_EXTENSIONS: %s (%d); "
                             "building without vendor options",
                             index, locus__opencl_error_name(err), (int)err);
        free(list);
        return 0;
    }
    int found = 0;
    const size_t length = strlen(ext);
    for (const char *p = list; p != NULL && *p != '\0';) {
        while (*p == ' ')
            p++;
        const char *end = strchr(p, ' ');
        const size_t word = end != NULL ? (size_t)(end - p) : strlen(p);
        if (word == length && strncmp(p, ext, length) == 0) {
            found = 1;
            break;
        }
        p = end;
    }
    free(list);
    return found;
}

/* The CPU gemm packs a TM x TK block of A and a TK x TN block of B into
 * local memory (gemm.cl). PoCL offers 512 KiB of it, which the table's
 * blocks fit; other CPU implementations offer less (Intel's, 32 KiB), so
 * the blocks are halved, the widest side first and staying whole
 * micro-tiles (TM a multiple of 6, TN of 16), until they fit. */
static void fit_local_memory(opencl_state *state, size_t index,
                             opencl_device *device)
{
    cl_ulong size = 0;
    cl_int err = clGetDeviceInfo(device->id, CL_DEVICE_LOCAL_MEM_SIZE,
                                 sizeof size, &size, NULL);
    if (err != CL_SUCCESS) {
        state->services->log(state->runtime, LOCUS_LOG_WARN,
                             "opencl:%zu: CL_DEVICE_LOCAL_MEM_SIZE: %s (%d); "
                             "keeping the default gemm blocks",
                             index, locus__opencl_error_name(err), (int)err);
        return;
    }
    opencl_tuning *t = &device->tuning;
    while (((cl_ulong)t->tm * t->tk + (cl_ulong)t->tk * t->tn) * sizeof(float) >
           size) {
        if (t->tn >= 64 && t->tn >= t->tk)
            t->tn = t->tn / 32 * 16;
        else if (t->tk >= 32 && t->tk >= t->tm)
            t->tk /= 2;
        else if (t->tm >= 12)
            t->tm = t->tm / 12 * 6;
        else
            break; /* the build or the launch reports what does not fit */
    }
}

static void report(const char *event, const char *path)
{
    const char *file = getenv("LOCUS_OPENCL_CACHE_REPORT");
    if (file == NULL || file[0] == '\0')
        return;
    char line[4300];
    int length = snprintf(line, sizeof line, "%s %s\n", event, path);
    if (length <= 0 || (size_t)length >= sizeof line)
        return;
    /* One write() of a whole line with O_APPEND: lines of concurrent
     * writers never interleave. */
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)length) != length) {
        /* Test-only; a short write shows as a failed check there. */
    }
    close(fd);
}

/* An embedded source plus the test hook's text (caller frees). */
static char *full_source(const char *embedded, size_t base, size_t *bytes)
{
    const char *extra = getenv("LOCUS_OPENCL_EXTRA_SOURCE");
    size_t extra_bytes = extra != NULL ? strlen(extra) : 0;
    char *source = malloc(base + extra_bytes + 2);
    if (source == NULL)
        return NULL;
    memcpy(source, embedded, base);
    source[base] = '\n';
    memcpy(source + base + 1, extra != NULL ? extra : "", extra_bytes);
    source[base + 1 + extra_bytes] = '\0';
    *bytes = base + 1 + extra_bytes;
    return source;
}

static locus_status build_failed(opencl_state *state, size_t index,
                                 opencl_device *device, cl_program program,
                                 cl_int err)
{
    size_t size = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(program, device->id, CL_PROGRAM_BUILD_LOG, 0,
                              NULL, &size) == CL_SUCCESS &&
        size > 0 && (log = malloc(size + 1)) != NULL) {
        if (clGetProgramBuildInfo(program, device->id, CL_PROGRAM_BUILD_LOG,
                                  size, log, NULL) != CL_SUCCESS)
            size = 0;
        log[size] = '\0';
    }
    locus_status status = state->services->fail(
        LOCUS_ERROR_BACKEND,
        "clBuildProgram failed on opencl:%zu (%s): %s (%d); build log:\n%s",
        index, device->name, locus__opencl_error_name(err), (int)err,
        log != NULL && log[0] != '\0' ? log : "(empty)");
    free(log);
    return status;
}

/* The binary of a built program, written to path. Failures only cost a
 * later build, so they are logged, not returned. */
static void store_binary(opencl_state *state, opencl_device *device,
                         cl_program program, const char *path)
{
    size_t bytes = 0;
    cl_int err = clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES,
                                  sizeof bytes, &bytes, NULL);
    unsigned char *binary = NULL;
    char why[256] = "";
    if (err != CL_SUCCESS || bytes == 0) {
        snprintf(why, sizeof why, "CL_PROGRAM_BINARY_SIZES: %s (%d)",
                 locus__opencl_error_name(err), (int)err);
        goto log;
    }
    binary = malloc(bytes);
    if (binary == NULL) {
        snprintf(why, sizeof why, "out of memory for %zu bytes", bytes);
        goto log;
    }
    err = clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary,
                           NULL);
    if (err != CL_SUCCESS) {
        snprintf(why, sizeof why, "CL_PROGRAM_BINARIES: %s (%d)",
                 locus__opencl_error_name(err), (int)err);
        goto log;
    }
    if (locus__opencl_cache_write(path, binary, bytes, why, sizeof why) == 0)
        why[0] = '\0';
log:
    if (why[0] != '\0')
        state->services->log(state->runtime, LOCUS_LOG_WARN,
                             "opencl: not caching the program of %s in %s: %s",
                             device->name, path, why);
    free(binary);
}

/* A program from a cached binary; NULL when the driver refuses it. */
static cl_program load_binary(opencl_device *device,
                              const unsigned char *binary, size_t bytes,
                              const char *options)
{
    cl_int err = CL_SUCCESS, binary_status = CL_SUCCESS;
    cl_program program = clCreateProgramWithBinary(
        device->context, 1, &device->id, &bytes, &binary, &binary_status, &err);
    if (program == NULL || err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (program != NULL)
            clReleaseProgram(program);
        return NULL;
    }
    if (clBuildProgram(program, 1, &device->id, options, NULL, NULL) !=
        CL_SUCCESS) {
        clReleaseProgram(program);
        return NULL;
    }
    return program;
}

/* The program's kernels; those marked gpu_only are in the GPU variant's
 * source only (gemm.cl). */
static locus_status create_kernels(opencl_state *state, size_t index,
                                   opencl_device *device)
{
    struct {
        cl_kernel *kernel;
        const char *name;
        int gpu_only;
    } table[] = {
        {&device->gemm, "locus_gemm", 0},
        {&device->gemm_scale_c, "locus_gemm_scale_c", 0},
        {&device->reduce, "locus_reduce", 0},
        {&device->im2col, "locus_im2col", 0},
        {&device->mec_lower, "locus_mec_lower", 0},
        {&device->filter_krcs, "locus_filter_krcs", 0},
        {&device->gemm_short, "locus_gemm_short", 1},
        {&device->conv_implicit, "locus_conv_implicit", 1},
        {&device->conv_implicit_short, "locus_conv_implicit_short", 1},
        {&device->winograd_filter, "locus_winograd_filter", 0},
        {&device->winograd_input, "locus_winograd_input", 0},
        {&device->winograd_output, "locus_winograd_output", 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].gpu_only && device->tuning.cpu_kernels)
            continue;
        cl_int err = CL_SUCCESS;
        *table[i].kernel = clCreateKernel(device->program, table[i].name, &err);
        if (*table[i].kernel == NULL || err != CL_SUCCESS) {
            *table[i].kernel = NULL;
            return state->services->fail(
                locus__opencl_status_of(err),
                "clCreateKernel(%s) failed on opencl:%zu (%s): %s (%d)",
                table[i].name, index, device->name,
                locus__opencl_error_name(err), (int)err);
        }
    }
    return LOCUS_SUCCESS;
}

/* The program of `source` with `options`, loaded from the disk cache or
 * compiled (and then cached). The cache key holds the device, its
 * platform and driver, the options, the variant's name ("f32", "f64":
 * the two programs never share a file, whatever their options) and the
 * source. */
static locus_status compile_cached(opencl_state *state, size_t index,
                                   opencl_device *device, const char *source,
                                   size_t source_bytes, const char *options,
                                   const char *variant, cl_program *out)
{
    uint64_t key = LOCUS_OPENCL_HASH_SEED;
    const char *parts[] = {device->name, device->vendor, device->version,
                           options, variant};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        key = locus__opencl_hash(key, parts[i], strlen(parts[i]) + 1);
    key = locus__opencl_hash(key, source, source_bytes);
    char dir[4000], path[4100] = "";
    const int cached = locus__opencl_cache_dir(dir, sizeof dir);
    if (cached)
        snprintf(path, sizeof path, "%s/%016llx.bin", dir,
                 (unsigned long long)key);

    cl_program program = NULL;
    const char *event = "built";
    if (cached) {
        unsigned char *binary = NULL;
        size_t bytes = 0;
        char why[256] = "";
        cache_read_result read =
            locus__opencl_cache_read(path, &binary, &bytes, why, sizeof why);
        if (read == CACHE_VALID) {
            program = load_binary(device, binary, bytes, options);
            event = program != NULL ? "loaded" : "rebuilt-refused";
        } else if (read == CACHE_DAMAGED) {
            event = "rebuilt-damaged";
            state->services->log(state->runtime, LOCUS_LOG_WARN,
                                 "opencl: cache file %s is damaged (%s); "
                                 "rebuilding",
                                 path, why);
        }
        free(binary);
    }
    if (program == NULL) {
        cl_int err = CL_SUCCESS;
        const char *text = source;
        program = clCreateProgramWithSource(device->context, 1, &text,
                                            &source_bytes, &err);
        if (program == NULL || err != CL_SUCCESS)
            return state->services->fail(
                locus__opencl_status_of(err),
                "clCreateProgramWithSource failed on opencl:%zu (%s): %s (%d)",
                index, device->name, locus__opencl_error_name(err), (int)err);
        err = clBuildProgram(program, 1, &device->id, options, NULL, NULL);
        if (err != CL_SUCCESS) {
            locus_status status =
                build_failed(state, index, device, program, err);
            clReleaseProgram(program);
            return status;
        }
        if (cached)
            store_binary(state, device, program, path);
    }
    state->services->log(state->runtime, LOCUS_LOG_DEBUG,
                         "opencl: %s program of opencl:%zu (%s) %s %s", variant,
                         index, device->name, event,
                         cached ? path : "(no cache directory)");
    report(event, cached ? path : "-");
    *out = program;
    return LOCUS_SUCCESS;
}

static locus_status build_program(opencl_state *state, size_t index,
                                  opencl_device *device)
{
    locus_status chosen = choose_tuning(state, index, device);
    if (chosen != LOCUS_SUCCESS)
        return chosen;
    if (device->tuning.cpu_kernels)
        fit_local_memory(state, index, device);
    const opencl_tuning *t = &device->tuning;
    char registers[48] = "";
    if (t->max_registers > 0 &&
        has_extension(state, index, device, "cl_nv_compiler_options"))
        snprintf(registers, sizeof registers, " -cl-nv-maxrregcount=%u",
                 t->max_registers);
    char options[256];
    snprintf(options, sizeof options,
             "-cl-std=CL1.2 -DTM=%u -DTN=%u -DTK=%u -DWM=%u -DWN=%u "
             "-DRWG=%u%s%s",
             t->tm, t->tn, t->tk, t->wm, t->wn, t->rwg,
             t->cpu_kernels ? " -DLOCUS_CPU_KERNELS" : "", registers);
    size_t source_bytes = 0;
    char *source = full_source(locus__opencl_kernel_source,
                               locus__opencl_kernel_source_size, &source_bytes);
    if (source == NULL)
        return state->services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                     "opencl: out of host memory for the "
                                     "program source");
    locus_status status =
        compile_cached(state, index, device, source, source_bytes, options,
                       "f32", &device->program);
    free(source);
    if (status != LOCUS_SUCCESS)
        return status;
    state->services->log(state->runtime, LOCUS_LOG_DEBUG,
                         "opencl: opencl:%zu takes the %s tuning", index,
                         t->name);
    status = create_kernels(state, index, device);
    if (status != LOCUS_SUCCESS)
        locus__opencl_program_release(device);
    return status;
}

/* The f64 program (kernels/f64.cl): the variant and reduce group of the
 * f32 tuning the device gets (LOCUS_OPENCL_TUNING included), which its
 * build options and so its cache key hold. */
static locus_status build_f64(opencl_state *state, size_t index,
                              opencl_device *device)
{
    opencl_tuning saved = device->tuning;
    locus_status status = choose_tuning(state, index, device);
    const opencl_tuning t = device->tuning;
    /* The f32 program keeps the tuning it was built with. */
    if (device->program != NULL)
        device->tuning = saved;
    if (status != LOCUS_SUCCESS)
        return status;
    char options[128];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DRWG=%u%s", t.rwg,
             t.cpu_kernels ? " -DLOCUS_CPU_KERNELS" : "");
    size_t source_bytes = 0;
    char *source =
        full_source(locus__opencl_kernel_source_f64,
                    locus__opencl_kernel_source_f64_size, &source_bytes);
    if (source == NULL)
        return state->services->fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                     "opencl: out of host memory for the "
                                     "program source");
    status = compile_cached(state, index, device, source, source_bytes, options,
                            "f64", &device->program_f64);
    free(source);
    if (status != LOCUS_SUCCESS)
        return status;
    device->f64_cpu_kernels = t.cpu_kernels;
    device->f64_rwg = t.rwg;
    device->f64_groups_per_unit = t.groups_per_unit;
    struct {
        cl_kernel *kernel;
        const char *name;
    } table[] = {
        {&device->gemm_f64, "locus_gemm"},
        {&device->gemm_scale_c_f64, "locus_gemm_scale_c"},
        {&device->reduce_f64, "locus_reduce"},
        {&device->im2col_f64, "locus_im2col"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        cl_int err = CL_SUCCESS;
        *table[i].kernel =
            clCreateKernel(device->program_f64, table[i].name, &err);
        if (*table[i].kernel == NULL || err != CL_SUCCESS) {
            *table[i].kernel = NULL;
            status = state->services->fail(
                locus__opencl_status_of(err),
                "clCreateKernel(%s, f64) failed on opencl:%zu (%s): %s (%d)",
                table[i].name, index, device->name,
                locus__opencl_error_name(err), (int)err);
            release_f64(device);
            return status;
        }
    }
    return LOCUS_SUCCESS;
}

/* One program build at a time in the process, whichever context or device
 * it is for: each device's lock orders its own contexts' ops, but PoCL
 * 3.1's compiler set-up (its first build in the process, the LLVM state
 * behind it) is not safe to enter from several contexts at once, which is
 * what eight threads creating contexts and running their first op do
 * (docs/RELIABILITY.md, "Start-up and limits"). A build happens once a
 * device a context, and a cached binary loads in milliseconds, so the
 * wait costs little; the cache file is written under it too, so two
 * contexts of this process do not both compile and write the same file. */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

locus_status locus__opencl_program_ready(opencl_state *state, size_t index,
                                         opencl_device *device)
{
    if (device->program != NULL)
        return LOCUS_SUCCESS;
    pthread_mutex_lock(&build_lock);
    locus_status status = build_program(state, index, device);
    pthread_mutex_unlock(&build_lock);
    return status;
}

locus_status locus__opencl_f64_ready(opencl_state *state, size_t index,
                                     opencl_device *device)
{
    if (device->program_f64 != NULL)
        return LOCUS_SUCCESS;
    if (!device->has_fp64)
        return state->services->fail(LOCUS_ERROR_NOT_SUPPORTED,
                                     "opencl:%zu has no cl_khr_fp64 (%s): "
                                     "no f64 ops there",
                                     index, device->name);
    pthread_mutex_lock(&build_lock);
    locus_status status = build_f64(state, index, device);
    pthread_mutex_unlock(&build_lock);
    return status;
}

static void release_f64(opencl_device *device)
{
    locus__opencl_conv_layer_release(device, 1);
    cl_kernel *kernels[] = {&device->gemm_f64, &device->gemm_scale_c_f64,
                            &device->reduce_f64, &device->im2col_f64};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (*kernels[i] != NULL)
            clReleaseKernel(*kernels[i]);
        *kernels[i] = NULL;
    }
    if (device->program_f64 != NULL)
        clReleaseProgram(device->program_f64);
    device->program_f64 = NULL;
    if (device->reduce_partials_f64 != NULL)
        clReleaseMemObject(device->reduce_partials_f64);
    device->reduce_partials_f64 = NULL;
    device->reduce_partials_f64_groups = 0;
}

void locus__opencl_program_release(opencl_device *device)
{
    release_f64(device);
    locus__opencl_conv_layer_release(device, 0);
    cl_kernel *kernels[] = {&device->gemm,
                            &device->gemm_scale_c,
                            &device->reduce,
                            &device->im2col,
                            &device->mec_lower,
                            &device->filter_krcs,
                            &device->gemm_short,
                            &device->conv_implicit,
                            &device->conv_implicit_short,
                            &device->winograd_filter,
                            &device->winograd_input,
                            &device->winograd_output};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (*kernels[i] != NULL)
            clReleaseKernel(*kernels[i]);
        *kernels[i] = NULL;
    }
    if (device->program != NULL)
        clReleaseProgram(device->program);
    device->program = NULL;
    for (size_t i = 0;
         i < sizeof device->workspace / sizeof device->workspace[0]; i++) {
        if (device->workspace[i] != NULL)
            clReleaseMemObject(device->workspace[i]);
        device->workspace[i] = NULL;
        device->workspace_bytes[i] = 0;
    }
    if (device->reduce_partials != NULL)
        clReleaseMemObject(device->reduce_partials);
    device->reduce_partials = NULL;
    device->reduce_partials_count = 0;
    locus__opencl_release_staging(device);
}
