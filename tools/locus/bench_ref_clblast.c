/* The gemm reference of an OpenCL device: CLBlast's SGEMM (row-major, no
 * transposes, alpha 1 and beta 0, as Locus's run) on the same device, on
 * the inputs Locus's op read, timed like every reference (one warm-up,
 * then the best of the repeats, each call waited for with clFinish) and
 * its result checked against float64 before its time is believed.
 *
 * libOpenCL (the ICD loader) and libclblast (Debian: libclblast1) are
 * loaded with dlopen at the first use, so neither the tool nor liblocus
 * links them: without them the tool still starts, and the reference is
 * reported unavailable, with the reason, once on stderr. Nothing here
 * needs their headers either: the few declarations and constants used are
 * written out below, with the values the OpenCL and CLBlast ABIs fix.
 *
 * "The same device": opencl:N is the N-th device Locus's OpenCL module
 * lists, which walks the platforms in the loader's order and their devices
 * of every type, skipping those not available (backends/opencl/
 * opencl_probe.c). The same walk here finds it, and its name must match
 * the one Locus reports, else the reference is skipped rather than timed
 * on another device. CLBlast needs its own context and queue on it (Locus
 * keeps its own inside the module); they are made once per device and
 * kept for the process, because CLBlast caches its compiled kernels per
 * context (a context released and another made at the same address would
 * find the old one's programs) and because NVIDIA's clReleaseContext can
 * hang (backends/opencl/opencl_queues.c). */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "progress.h"
#include "reference.h"

typedef int32_t ocl_int;
typedef uint32_t ocl_uint;
typedef struct ocl_opaque *ocl_handle; /* platform, device, context, ... */

#define OCL_SUCCESS 0
#define OCL_DEVICE_TYPE_ALL 0xFFFFFFFFu
#define OCL_DEVICE_AVAILABLE 0x1027u
#define OCL_DEVICE_NAME 0x102Bu
#define OCL_CONTEXT_PLATFORM 0x1084
#define OCL_MEM_READ_WRITE (1u << 0)
#define OCL_MEM_READ_ONLY (1u << 2)
#define OCL_TRUE 1u
#define CLBLAST_LAYOUT_ROW_MAJOR 101
#define CLBLAST_TRANSPOSE_NO 111

typedef struct opencl_api {
    ocl_int (*get_platform_ids)(ocl_uint, ocl_handle *, ocl_uint *);
    ocl_int (*get_device_ids)(ocl_handle, uint64_t, ocl_uint, ocl_handle *,
                              ocl_uint *);
    ocl_int (*get_device_info)(ocl_handle, ocl_uint, size_t, void *, size_t *);
    ocl_handle (*create_context)(const intptr_t *, ocl_uint, const ocl_handle *,
                                 void (*)(const char *, const void *, size_t,
                                          void *),
                                 void *, ocl_int *);
    ocl_handle (*create_command_queue)(ocl_handle, ocl_handle, uint64_t,
                                       ocl_int *);
    ocl_handle (*create_buffer)(ocl_handle, uint64_t, size_t, void *,
                                ocl_int *);
    ocl_int (*enqueue_write_buffer)(ocl_handle, ocl_handle, ocl_uint, size_t,
                                    size_t, const void *, ocl_uint,
                                    const ocl_handle *, ocl_handle *);
    ocl_int (*enqueue_read_buffer)(ocl_handle, ocl_handle, ocl_uint, size_t,
                                   size_t, void *, ocl_uint, const ocl_handle *,
                                   ocl_handle *);
    ocl_int (*finish)(ocl_handle);
    ocl_int (*release_mem_object)(ocl_handle);
    /* CLBlastSgemm; enums are passed as int, as the C ABI does. */
    int (*sgemm)(int layout, int trans_a, int trans_b, size_t m, size_t n,
                 size_t k, float alpha, ocl_handle a, size_t a_offset,
                 size_t lda, ocl_handle b, size_t b_offset, size_t ldb,
                 float beta, ocl_handle c, size_t c_offset, size_t ldc,
                 ocl_handle *queue, ocl_handle *event);
} opencl_api;

static opencl_api api;
static bool api_tried, api_loaded;
static char api_problem[512];

/* A context and queue per device index, kept for the process. */
#define MAX_QUEUES 16
static struct {
    int index;
    ocl_handle context, queue;
} queues[MAX_QUEUES];
static size_t queue_count;

static void *symbol(void *library, const char *name, const char *file)
{
    void *found = dlsym(library, name);
    if (found == NULL && api_problem[0] == '\0')
        snprintf(api_problem, sizeof api_problem, "%s has no %s", file, name);
    return found;
}

/* The first name that loads; else NULL, with the first name's error (the
 * versioned name, the one a runtime package installs). */
static void *open_first(const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        void *library = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (library != NULL)
            return library;
        if (i == 0)
            snprintf(api_problem, sizeof api_problem, "%s", dlerror());
    }
    return NULL;
}

/* Fills api, or api_problem with why not; the libraries stay loaded. */
static void load_api(void)
{
    api_tried = true;
    static const char *const opencl_names[] = {"libOpenCL.so.1",
                                               "libOpenCL.so"};
    static const char *const clblast_names[] = {"libclblast.so.1",
                                                "libclblast.so"};
    void *opencl = open_first(opencl_names, 2);
    if (opencl == NULL)
        return;
    void *clblast = open_first(clblast_names, 2);
    if (clblast == NULL)
        return;
    /* Through a void * so that -Wpedantic accepts the cast to functions,
     * which POSIX guarantees for dlsym. */
    struct {
        void **slot;
        void *library;
        const char *name, *file;
    } table[] = {
        {(void **)&api.get_platform_ids, opencl, "clGetPlatformIDs",
         "libOpenCL"},
        {(void **)&api.get_device_ids, opencl, "clGetDeviceIDs", "libOpenCL"},
        {(void **)&api.get_device_info, opencl, "clGetDeviceInfo", "libOpenCL"},
        {(void **)&api.create_context, opencl, "clCreateContext", "libOpenCL"},
        {(void **)&api.create_command_queue, opencl, "clCreateCommandQueue",
         "libOpenCL"},
        {(void **)&api.create_buffer, opencl, "clCreateBuffer", "libOpenCL"},
        {(void **)&api.enqueue_write_buffer, opencl, "clEnqueueWriteBuffer",
         "libOpenCL"},
        {(void **)&api.enqueue_read_buffer, opencl, "clEnqueueReadBuffer",
         "libOpenCL"},
        {(void **)&api.finish, opencl, "clFinish", "libOpenCL"},
        {(void **)&api.release_mem_object, opencl, "clReleaseMemObject",
         "libOpenCL"},
        {(void **)&api.sgemm, clblast, "CLBlastSgemm", "libclblast"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        void *found = symbol(table[i].library, table[i].name, table[i].file);
        if (found == NULL)
            return;
        memcpy(table[i].slot, &found, sizeof found);
    }
    api_loaded = true;
}

/* The device Locus calls opencl:index, found by the module's walk; 0 when
 * found, else 1 with why. */
static int find_device(int index, const char *name, ocl_handle *platform_out,
                       ocl_handle *device_out, char *why, size_t why_size)
{
    ocl_uint platform_count = 0;
    ocl_int err = api.get_platform_ids(0, NULL, &platform_count);
    if (err != OCL_SUCCESS || platform_count == 0) {
        snprintf(why, why_size, "clGetPlatformIDs: error %d, %u platforms",
                 (int)err, (unsigned)platform_count);
        return 1;
    }
    ocl_handle *platforms = calloc(platform_count, sizeof *platforms);
    if (platforms == NULL ||
        (err = api.get_platform_ids(platform_count, platforms, NULL)) !=
            OCL_SUCCESS) {
        snprintf(why, why_size, "clGetPlatformIDs: error %d", (int)err);
        free(platforms);
        return 1;
    }
    int seen = 0, found = 0;
    for (ocl_uint p = 0; p < platform_count && !found; p++) {
        ocl_uint count = 0;
        if (api.get_device_ids(platforms[p], OCL_DEVICE_TYPE_ALL, 0, NULL,
                               &count) != OCL_SUCCESS ||
            count == 0)
            continue;
        ocl_handle *devices = calloc(count, sizeof *devices);
        if (devices == NULL)
            break;
        if (api.get_device_ids(platforms[p], OCL_DEVICE_TYPE_ALL, count,
                               devices, NULL) != OCL_SUCCESS)
            count = 0;
        for (ocl_uint d = 0; d < count && !found; d++) {
            ocl_uint available = 0;
            if (api.get_device_info(devices[d], OCL_DEVICE_AVAILABLE,
                                    sizeof available, &available,
                                    NULL) != OCL_SUCCESS ||
                !available)
                continue;
            if (seen++ != index)
                continue;
            char device_name[4096] = "";
            size_t length = 0;
            if (api.get_device_info(devices[d], OCL_DEVICE_NAME, 0, NULL,
                                    &length) != OCL_SUCCESS ||
                length >= sizeof device_name ||
                api.get_device_info(devices[d], OCL_DEVICE_NAME, length,
                                    device_name, NULL) != OCL_SUCCESS)
                device_name[0] = '\0';
            /* Locus keeps the first 127 bytes of the name. */
            if (strncmp(device_name, name, 127) != 0) {
                snprintf(why, why_size,
                         "OpenCL device %d here is \"%.100s\", not \"%.100s\"",
                         index, device_name, name);
                free(devices);
                free(platforms);
                return 1;
            }
            *platform_out = platforms[p];
            *device_out = devices[d];
            found = 1;
        }
        free(devices);
    }
    free(platforms);
    if (!found)
        snprintf(why, why_size, "no OpenCL device %d found", index);
    return found ? 0 : 1;
}

/* The kept queue of opencl:index, made at its first use; NULL with why. */
static ocl_handle device_queue(int index, const char *name, ocl_handle *context,
                               char *why, size_t why_size)
{
    for (size_t i = 0; i < queue_count; i++)
        if (queues[i].index == index) {
            *context = queues[i].context;
            return queues[i].queue;
        }
    if (queue_count == MAX_QUEUES) {
        snprintf(why, why_size, "more than %d OpenCL devices", MAX_QUEUES);
        return NULL;
    }
    ocl_handle platform = NULL, device = NULL;
    if (find_device(index, name, &platform, &device, why, why_size) != 0)
        return NULL;
    const intptr_t properties[] = {OCL_CONTEXT_PLATFORM, (intptr_t)platform, 0};
    ocl_int err = OCL_SUCCESS;
    ocl_handle made =
        api.create_context(properties, 1, &device, NULL, NULL, &err);
    if (made == NULL || err != OCL_SUCCESS) {
        snprintf(why, why_size, "clCreateContext: error %d", (int)err);
        return NULL;
    }
    ocl_handle queue = api.create_command_queue(made, device, 0, &err);
    if (queue == NULL || err != OCL_SUCCESS) {
        /* The context is kept all the same: see the top of the file. */
        snprintf(why, why_size, "clCreateCommandQueue: error %d", (int)err);
        return NULL;
    }
    queues[queue_count].index = index;
    queues[queue_count].context = made;
    queues[queue_count].queue = queue;
    queue_count++;
    *context = made;
    return queue;
}

typedef struct clblast_work {
    size_t m, n, k;
    ocl_handle a, b, c, queue;
    int status; /* the first failure's CLBlast or OpenCL code, else 0 */
    const char *failed;
} clblast_work;

static void sgemm_once(void *arg)
{
    clblast_work *work = arg;
    if (work->status != 0)
        return;
    ocl_handle queue = work->queue;
    int status = api.sgemm(CLBLAST_LAYOUT_ROW_MAJOR, CLBLAST_TRANSPOSE_NO,
                           CLBLAST_TRANSPOSE_NO, work->m, work->n, work->k,
                           1.0f, work->a, 0, work->k, work->b, 0, work->n, 0.0f,
                           work->c, 0, work->n, &queue, NULL);
    if (status != 0) {
        work->status = status;
        work->failed = "CLBlastSgemm";
        return;
    }
    status = api.finish(queue);
    if (status != OCL_SUCCESS) {
        work->status = status;
        work->failed = "clFinish";
    }
}

/* The largest error relative to the terms' magnitude over a sample of C's
 * entries (all of them when there are few), against float64. */
static double sampled_error(const float *a, const float *b, const float *c,
                            size_t m, size_t n, size_t k)
{
    random_state random;
    random_seed(&random, 0xc1b1a57ull);
    const size_t outputs = m * n;
    const size_t count =
        outputs < BENCH_SAMPLED_ENTRIES ? outputs : BENCH_SAMPLED_ENTRIES;
    double worst = 0.0;
    for (size_t s = 0; s < count; s++) {
        const size_t at = count == outputs ? s : random_below(&random, outputs);
        double expected = 0.0, magnitude = 0.0;
        reference_gemm_entry(a, b, n, k, at / n, at % n, &expected, &magnitude);
        const double error =
            reference_relative_error((double)c[at], expected, magnitude);
        if (!(error <= worst))
            worst = error; /* NaN too: an unwritten entry fails */
    }
    return worst;
}

static void note(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    progress_clear();
    fputs("locus bench: CLBlast reference ", stderr);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
}

/* Uploads the inputs, times the calls, checks C; the reference's seconds,
 * or a negative value after a note on stderr. */
static double measure(clblast_work *work, ocl_handle context, const float *a,
                      const float *b, const bench_settings *settings)
{
    const size_t m = work->m, n = work->n, k = work->k;
    double seconds = -1.0;
    ocl_int err = OCL_SUCCESS;
    float *c = malloc(m * n * sizeof(float));
    if (c == NULL) {
        note("skipped: out of host memory for C (%zu x %zu)", m, n);
        return -1.0;
    }
    /* NaN in C: an entry CLBlast never writes fails the check. */
    for (size_t i = 0; i < m * n; i++)
        c[i] = NAN;
    const struct {
        ocl_handle *buffer;
        uint64_t flags;
        const float *host;
        size_t count;
    } buffers[] = {
        {&work->a, OCL_MEM_READ_ONLY, a, m * k},
        {&work->b, OCL_MEM_READ_ONLY, b, k * n},
        {&work->c, OCL_MEM_READ_WRITE, c, m * n},
    };
    for (size_t i = 0; i < 3; i++) {
        const size_t bytes = buffers[i].count * sizeof(float);
        *buffers[i].buffer =
            api.create_buffer(context, buffers[i].flags, bytes, NULL, &err);
        if (*buffers[i].buffer == NULL || err != OCL_SUCCESS) {
            note("skipped: clCreateBuffer of %zu bytes: error %d", bytes,
                 (int)err);
            goto release;
        }
        err =
            api.enqueue_write_buffer(work->queue, *buffers[i].buffer, OCL_TRUE,
                                     0, bytes, buffers[i].host, 0, NULL, NULL);
        if (err != OCL_SUCCESS) {
            note("skipped: clEnqueueWriteBuffer: error %d", (int)err);
            goto release;
        }
    }
    const double best = bench_time_best(sgemm_once, work, settings);
    if (work->status != 0) {
        /* CLBlast's own codes are below -1000, OpenCL's above. */
        note("failed: %s returned %d", work->failed, work->status);
        goto release;
    }
    err = api.enqueue_read_buffer(work->queue, work->c, OCL_TRUE, 0,
                                  m * n * sizeof(float), c, 0, NULL, NULL);
    if (err != OCL_SUCCESS) {
        note("skipped: clEnqueueReadBuffer: error %d", (int)err);
        goto release;
    }
    const double error = sampled_error(a, b, c, m, n, k);
    const double tolerance = bench_tolerance(k, LOCUS_MATH_FP32);
    if (!(error <= tolerance)) {
        note("dropped: its result fails the float64 check (max rel err "
             "%.3g, tolerance %.3g)",
             error, tolerance);
        goto release;
    }
    seconds = best;
release:
    for (size_t i = 0; i < 3; i++)
        if (*buffers[i].buffer != NULL)
            api.release_mem_object(*buffers[i].buffer);
    free(c);
    return seconds;
}

void bench_reference_clblast(const locus_device_info *info,
                             const bench_settings *settings,
                             const bench_shape *shape, locus_buffer *first,
                             locus_buffer *second, bench_result *result)
{
    if (shape->op != BENCH_GEMM)
        return;
    if (!api_tried) {
        load_api();
        if (!api_loaded)
            note("unavailable (%s); install libclblast1 to measure it",
                 api_problem);
    }
    if (!api_loaded)
        return;
    char why[512] = "";
    ocl_handle context = NULL;
    ocl_handle queue = device_queue(info->index_in_backend, info->name,
                                    &context, why, sizeof why);
    if (queue == NULL) {
        note("unavailable on %s: %s", info->selector, why);
        return;
    }
    void *a = NULL, *b = NULL;
    if (locus_buffer_map(first, LOCUS_MAP_READ, &a) != LOCUS_SUCCESS) {
        note("skipped: mapping A: %s", locus_last_error());
        return;
    }
    if (locus_buffer_map(second, LOCUS_MAP_READ, &b) != LOCUS_SUCCESS) {
        note("skipped: mapping B: %s", locus_last_error());
        locus_buffer_unmap(first);
        return;
    }
    clblast_work work = {
        .m = shape->u.gemm.m,
        .n = shape->u.gemm.n,
        .k = shape->u.gemm.k,
        .queue = queue,
    };
    const double seconds = measure(&work, context, a, b, settings);
    locus_buffer_unmap(second);
    locus_buffer_unmap(first);
    if (seconds >= 0.0)
        bench_add_reference(result, "clblast sgemm", seconds);
}
