/* `locus bench split`, shared by its two files: bench_split.c measures,
 * bench_split_report.c prints the table or the JSON. */
#ifndef LOCUS_TOOL_BENCH_SPLIT_H
#define LOCUS_TOOL_BENCH_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <locus/locus.h>

#define SPLIT_MAX_DEVICES 16
#define SPLIT_MAX_SIZES 32

typedef struct split_request {
    size_t shapes[SPLIT_MAX_SIZES][3];
    size_t shape_count;
    const char *selectors[SPLIT_MAX_DEVICES];
    size_t selector_count;
    double weights[SPLIT_MAX_DEVICES];
    size_t weight_count;
    int repeat;
    uint64_t seed;
    bool json;
    char problem[160];
} split_request;

/* One way of running the gemm: the split, or one device alone. */
typedef struct split_timing {
    char device[64];
    char algorithm[32];
    bool ran;
    double median_seconds, best_seconds;
    double max_rel_err;
    bool passed;
    locus_status status;
    char error[512];
} split_timing;

typedef struct split_result {
    size_t m, n, k;
    char shape[64];
    size_t rows[SPLIT_MAX_DEVICES];
    double tolerance;
    split_timing split;
    split_timing singles[SPLIT_MAX_DEVICES];
    int best_single; /* -1: none ran */
} split_result;

/* The results as a table for people, or as JSON. */
void bench_split_print_table(const split_request *request,
                             const split_result *results, size_t result_count,
                             size_t device_count, const double *weights);
void bench_split_print_json(const split_request *request,
                            const split_result *results, size_t result_count,
                            size_t device_count, const double *weights);

#endif
