/* `locus bench`: what the command line asks for (bench.c parses it and
 * reports) and how one op at one size is measured (bench_ops.c). */
#ifndef LOCUS_TOOL_BENCH_H
#define LOCUS_TOOL_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <locus/locus.h>

#include "random.h"

typedef enum bench_op {
    BENCH_REDUCE,
    BENCH_GEMM,
    BENCH_CONV,
} bench_op;

/* A convolution layer: NCHW input, K filters of R x S, square stride and
 * padding, and the output height and width (P, Q) they give. */
typedef struct bench_conv_shape {
    size_t batch, channels, height, width;
    size_t filters, kernel_height, kernel_width;
    size_t stride, pad;
    size_t out_height, out_width;
} bench_conv_shape;

/* One size of one op, as parsed from --size. */
typedef struct bench_shape {
    bench_op op;
    union {
        struct {
            size_t count;
        } reduce;
        struct {
            size_t m, n, k;
        } gemm;
        bench_conv_shape conv;
    } u;
} bench_shape;

typedef struct bench_settings {
    int repeat; /* timed runs after the warm-up */
    locus_math_mode math;
    locus_conv_algorithm conv_algorithm;
    locus_dtype dtype; /* --dtype: the inputs' type (f32 by default) */
} bench_settings;

/* Above either limit the reference is checked on a random sample of
 * output entries: a full float64 reference would cost more than the
 * benchmark itself (m n k multiply-adds), or too much memory. */
#define BENCH_FULL_CHECK_MAX_MACS ((uint64_t)1 << 30)
#define BENCH_FULL_CHECK_MAX_OUTPUTS ((size_t)1 << 22)
#define BENCH_SAMPLED_ENTRIES 256

#define BENCH_MAX_DIMS 12

/* References: the same work done by another implementation (a vendor
 * library, a plain loop) or a hardware limit (memory bandwidth), measured
 * in the same run on the same inputs, so a script can compare without
 * trusting figures from another day.
 *
 * Interface for adding one (stable; see bench_ref_*.c for examples):
 *  - write `void bench_reference_<op>(const bench_reference_input *input,
 *    bench_result *result)` in its own bench_ref_<name>.c, guarded by its
 *    LOCUS_HAVE_<LIB> define (tools/meson.build sets it when the library
 *    is found) so the tool builds without it;
 *  - time the work with bench_time_best() and record it with
 *    bench_add_reference(); several references per result are fine, in
 *    the order they are added;
 *  - call it from run_references() in bench_ops.c for its op.
 * The first reference is the result's "reference" in JSON and its "ratio";
 * every reference, the first included, is listed under "references" with
 * its own ratio. The ratio is the reference's seconds over ours: above 1,
 * Locus is faster. */
typedef struct bench_reference {
    char name[64];  /* e.g. "openblas cblas_sgemm", "read bandwidth" */
    double seconds; /* best of the timed runs, as ours */
    double gflops;  /* the op's counted flops over seconds */
    double gbps;    /* the op's fewest bytes over seconds */
} bench_reference;

#define BENCH_MAX_REFERENCES 4

typedef struct bench_result {
    const char *op; /* "reduce", "gemm", "conv2d", as in records */
    char device[32];
    char shape[96]; /* as --size spells it, so it can be fed back */
    const char *dim_names[BENCH_MAX_DIMS];
    size_t dim_values[BENCH_MAX_DIMS];
    size_t dim_count;

    locus_record record; /* of the last timed run */
    int repeat;
    double best_seconds;
    double median_seconds;
    /* The slowest timed run: with the best, the spread of the runs. */
    double worst_seconds;
    double flops;   /* counted by us: 2mnk, 2NKPQCRS, n */
    uint64_t bytes; /* the fewest bytes the op must move */
    double max_rel_err;
    double tolerance;
    bool sampled; /* checked on BENCH_SAMPLED_ENTRIES entries */
    size_t checked_entries;
    size_t output_entries;
    bool passed;

    bench_reference references[BENCH_MAX_REFERENCES];
    size_t reference_count;

    /* On failure: which step failed, and locus_last_error() copied at once,
     * before cleanup calls replace it. */
    char failed_step[128];
    char error[512];
} bench_result;

#define MAX_SIZE_ARGUMENTS 64
#define MAX_SHAPES 256
#define MAX_DEVICE_SELECTORS 16

/* What the command line asks for. */
typedef struct bench_request {
    bench_op op;
    const char *op_word;
    const char *sizes[MAX_SIZE_ARGUMENTS];
    size_t size_count;
    const char *selectors[MAX_DEVICE_SELECTORS];
    size_t selector_count;
    bench_settings settings;
    bool algorithm_given;
    bool math_given;
    bool seed_given;
    uint64_t seed;
    bool json;
    const char *svg_path; /* --svg FILE; NULL: no picture */
    bench_shape shapes[MAX_SHAPES];
    size_t shape_count;
    char size_problem[160]; /* why a --size value was refused */
} bench_request;

/* A run that produced no result: unsupported, or failed. */
typedef struct bench_skip {
    const char *op;
    char device[32];
    char shape[96];
    locus_status status;
    char reason[512];
} bench_skip;

typedef struct bench_outcome {
    bench_result *results;
    size_t result_count;
    bench_skip *skips;
    size_t skip_count;
    bool any_failure; /* a Locus call failed, or a check did */
} bench_outcome;

/* The results as a table for people, or as JSON (bench_report.c). */
void bench_print_table(const bench_request *request,
                       const bench_outcome *outcome);
void bench_print_json(const bench_request *request,
                      const bench_outcome *outcome);

/* The op's name in records and reports. */
const char *bench_op_name(bench_op op);
/* The math mode as --math spells it, for the reports and the pictures
 * (inline: the svg test program links the pictures without the
 * reports). */
static inline const char *bench_math_name(locus_math_mode math)
{
    switch (math) {
    case LOCUS_MATH_TF32:
        return "tf32";
    case LOCUS_MATH_3XTF32:
        return "3xtf32";
    case LOCUS_MATH_FP32:
        break;
    }
    return "fp32";
}
/* Fills result->shape, dims, flops and bytes (in the dtype's element
 * sizes); no Locus call (bench_shape.c). */
void bench_describe(const bench_shape *shape, locus_dtype dtype,
                    bench_result *result);
/* Checks that every buffer size fits a size_t in every dtype; false when
 * one overflows. */
bool bench_shape_fits(const bench_shape *shape);

/* Runs one op at one size on one device: fresh random inputs, a float64
 * reference, one warm-up, settings->repeat timed runs, the check. On
 * failure returns the status with failed_step and error filled in;
 * LOCUS_ERROR_NOT_SUPPORTED means the device does not offer the op. */
locus_status bench_run(locus_context *context, locus_device *device,
                       const bench_settings *settings, const bench_shape *shape,
                       random_state *random, bench_result *result);

/* What a reference implementation is handed: the inputs the op read, in
 * host memory (the op's buffers mapped for reading; second is NULL for
 * reduce), the shape and settings, and how many threads to use: the
 * device's worker count, so the comparison is thread for thread. */
typedef struct bench_reference_input {
    const bench_shape *shape;
    const bench_settings *settings;
    const void *first, *second; /* in settings->dtype */
    int threads;
    /* The CPU device's context and nodes (OS numbers; 0: all), where the
     * read bandwidth places its threads; NULL for other devices. */
    const locus_context *context;
    uint64_t node_mask;
} bench_reference_input;

/* One call of the reference's work; arg is the reference's own state. */
typedef void (*bench_work_fn)(void *arg);

/* Runs work once to warm up, then settings->repeat times, and returns the
 * best time in seconds (the statistic Locus's own runs report). */
double bench_time_best(bench_work_fn work, void *arg,
                       const bench_settings *settings);

/* Waits until a library's idle threads have stopped spinning (OpenBLAS
 * and OpenMP runtimes busy-wait for a while after each call), so they do
 * not take cores from the next measurement. Call after a reference that
 * ran such threads. */
void bench_quiesce(void);

/* Appends a reference measured at `seconds` for the result's work (its
 * flops and bytes give the rates); ignored beyond BENCH_MAX_REFERENCES. */
void bench_add_reference(bench_result *result, const char *name,
                         double seconds);

/* The references of each op (bench_ref_*.c). Each adds what it can
 * measure and nothing when its library was not built in. */
void bench_reference_gemm(const bench_reference_input *input,
                          bench_result *result);
void bench_reference_reduce(const bench_reference_input *input,
                            bench_result *result);
/* oneDNN, then im2col + OpenBLAS (bench_ref_conv.h). */
void bench_reference_conv(const bench_reference_input *input,
                          bench_result *result);
/* A CUDA device's references (bench_ref_cuda.c): CUB and a raw launch for
 * reduce, cuBLAS for gemm, cuDNN for conv, from modules loaded with dlopen;
 * the input pointers are not used (the modules make their own device
 * data of the same shape). */
void bench_reference_cuda(const bench_reference_input *input,
                          bench_result *result);

/* An OpenCL device's gemm reference (bench_ref_clblast.c): CLBlast's
 * SGEMM on the same device, from libclblast and libOpenCL loaded with
 * dlopen, on the op's inputs (first and second, mapped for reading here);
 * without the libraries it says so once on stderr and adds nothing. */
void bench_reference_clblast(const locus_device_info *info,
                             const bench_settings *settings,
                             const bench_shape *shape, locus_buffer *first,
                             locus_buffer *second, bench_result *result);

/* The tolerance of a result whose entries each sum `terms` products, under
 * a math mode (bench_ops.c), for references that check their own. */
double bench_tolerance(size_t terms, locus_math_mode math);

/* An OpenCL device's other reference (bench_ref_locus.c): Locus's own CPU
 * backend for an OpenCL CPU device, cuda:0 for an OpenCL GPU, run through
 * bench_run with bench_references_off set (no references of its own). */
extern bool bench_references_off;
void bench_reference_locus(locus_context *context,
                           const locus_device_info *info,
                           const bench_settings *settings,
                           const bench_shape *shape, bench_result *result);

/* The monotonic clock in seconds, and the best and median of `count`
 * timings (sorted in place): what every bench reports (bench_ops.c). */
double bench_seconds_now(void);
void bench_best_and_median(double *times, size_t count, double *best,
                           double *median);

/* `locus bench split` (bench_split.c), reached through bench_command: one
 * gemm split across several devices against each device alone. */
int bench_split_command(int argc, char **argv);
void bench_split_usage(FILE *out);

/* `locus bench pipeline` (bench_pipeline.c): gemms from the host through
 * one queue, with its overlapped uploads on and off. */
int bench_pipeline_command(int argc, char **argv);
void bench_pipeline_usage(FILE *out);

#endif
