/* How `locus bench split` shows its results: an aligned table, or JSON
 * whose results carry, besides the split's own timing, its rows per
 * device, each device alone, and the ratio against the best of those. */
#include <stdio.h>
#include <string.h>

#include "bench_split.h"
#include "json.h"
#include "table.h"

static double ratio_of(const split_result *result)
{
    if (!result->split.ran || result->best_single < 0 ||
        result->split.median_seconds <= 0)
        return 0;
    return result->singles[result->best_single].median_seconds /
           result->split.median_seconds;
}

static double gflops(const split_result *result, const split_timing *timing)
{
    double flops =
        2.0 * (double)result->m * (double)result->n * (double)result->k;
    return timing->median_seconds > 0 ? flops / timing->median_seconds / 1e9
                                      : 0;
}

static void format_seconds(double seconds, char *text, size_t capacity)
{
    if (seconds >= 1.0)
        snprintf(text, capacity, "%.3g s", seconds);
    else if (seconds >= 1e-3)
        snprintf(text, capacity, "%.3g ms", seconds * 1e3);
    else
        snprintf(text, capacity, "%.3g us", seconds * 1e6);
}

static void add_row(table *t, const split_result *result,
                    const split_timing *timing, const char *rows, bool first)
{
    table_add_row(t);
    table_set(t, 0, "%s", first ? result->shape : "");
    table_set(t, 1, "%s", timing->device);
    table_set(t, 2, "%s", rows);
    if (!timing->ran) {
        table_set(t, 3, "failed");
        return;
    }
    char text[32];
    format_seconds(timing->median_seconds, text, sizeof text);
    table_set(t, 3, "%s", text);
    format_seconds(timing->best_seconds, text, sizeof text);
    table_set(t, 4, "%s", text);
    table_set(t, 5, "%.1f", gflops(result, timing));
    table_set(t, 6, "%.2g", timing->max_rel_err);
    table_set(t, 7, "%s", timing->passed ? "ok" : "FAIL");
    if (first && ratio_of(result) > 0)
        table_set(t, 8, "%.3f", ratio_of(result));
}

void bench_split_print_table(const split_request *request,
                             const split_result *results, size_t result_count,
                             size_t device_count, const double *weights)
{
    printf("gemm split over %s, weights: ",
           result_count ? results[0].split.device : "");
    if (!weights) {
        printf("the cost model's");
    } else {
        for (size_t i = 0; i < device_count; i++)
            printf("%s%g", i ? "," : "", weights[i]);
    }
    printf("; median of %d runs, data from the host and back\n\n",
           request->repeat);
    static const char *const headers[] = {"shape",       "device", "rows",
                                          "median",      "best",   "GFLOP/s",
                                          "max rel err", "check",  "ratio"};
    table t;
    table_init(&t, sizeof headers / sizeof headers[0], headers);
    for (size_t column = 3; column <= 6; column++)
        table_align_right(&t, column);
    table_align_right(&t, 8);
    for (size_t r = 0; r < result_count; r++) {
        const split_result *result = &results[r];
        char rows[128] = "";
        for (size_t i = 0; i < device_count; i++) {
            size_t used = strlen(rows);
            snprintf(rows + used, sizeof rows - used, "%s%zu", i ? "+" : "",
                     result->rows[i]);
        }
        add_row(&t, result, &result->split, rows, true);
        for (size_t i = 0; i < device_count; i++) {
            char all[32];
            snprintf(all, sizeof all, "%zu", result->m);
            add_row(&t, result, &result->singles[i], all, false);
        }
    }
    table_print(&t, stdout, 0);
    table_free(&t);
    printf("\nratio: the best single device's median over the split's "
           "(above 1: the split is faster)\n");
    for (size_t r = 0; r < result_count; r++) {
        const split_timing *all[SPLIT_MAX_DEVICES + 1];
        all[0] = &results[r].split;
        for (size_t i = 0; i < device_count; i++)
            all[i + 1] = &results[r].singles[i];
        for (size_t i = 0; i <= device_count; i++)
            if (!all[i]->ran)
                printf("%s on %s failed: %s\n", results[r].shape,
                       all[i]->device, all[i]->error);
    }
}

static void json_timing(json_writer *w, const split_result *result,
                        const split_timing *timing)
{
    json_key(w, "device");
    json_string(w, timing->device);
    json_key(w, "passed");
    json_bool(w, timing->ran && timing->passed);
    if (!timing->ran) {
        json_key(w, "status");
        json_string(w, locus_status_name(timing->status));
        json_key(w, "error");
        json_string(w, timing->error);
        return;
    }
    json_key(w, "algorithm");
    json_string(w, timing->algorithm);
    json_key(w, "seconds");
    json_double(w, timing->median_seconds);
    json_key(w, "best_seconds");
    json_double(w, timing->best_seconds);
    json_key(w, "gflops");
    json_double(w, gflops(result, timing));
    json_key(w, "max_rel_err");
    json_double(w, timing->max_rel_err);
}

void bench_split_print_json(const split_request *request,
                            const split_result *results, size_t result_count,
                            size_t device_count, const double *weights)
{
    json_writer w;
    json_document_begin(&w, stdout, "bench split");
    json_key(&w, "seed");
    json_uint(&w, request->seed);
    json_key(&w, "repeat");
    json_int(&w, request->repeat);
    json_key(&w, "weights");
    if (weights) {
        json_begin_inline_array(&w);
        for (size_t i = 0; i < device_count; i++)
            json_double(&w, weights[i]);
        json_end_array(&w);
    } else {
        json_string(&w, "cost model");
    }
    json_key(&w, "results");
    json_begin_array(&w);
    for (size_t r = 0; r < result_count; r++) {
        const split_result *result = &results[r];
        json_begin_object(&w);
        json_key(&w, "op");
        json_string(&w, "gemm");
        json_key(&w, "shape");
        json_string(&w, result->shape);
        json_key(&w, "m");
        json_uint(&w, result->m);
        json_key(&w, "n");
        json_uint(&w, result->n);
        json_key(&w, "k");
        json_uint(&w, result->k);
        json_timing(&w, result, &result->split);
        json_key(&w, "tolerance");
        json_double(&w, result->tolerance);
        json_key(&w, "rows");
        json_begin_array(&w);
        for (size_t i = 0; i < device_count; i++) {
            json_begin_object(&w);
            json_key(&w, "device");
            json_string(&w, result->singles[i].device);
            json_key(&w, "rows");
            json_uint(&w, result->rows[i]);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_key(&w, "singles");
        json_begin_array(&w);
        for (size_t i = 0; i < device_count; i++) {
            json_begin_object(&w);
            json_timing(&w, result, &result->singles[i]);
            json_end_object(&w);
        }
        json_end_array(&w);
        json_key(&w, "best_single");
        json_string_or_null(&w,
                            result->best_single >= 0
                                ? result->singles[result->best_single].device
                                : NULL);
        /* As in `locus bench`: the reference is what the ratio compares
         * against, here the best device alone. */
        json_key(&w, "reference");
        if (result->best_single >= 0) {
            const split_timing *best = &result->singles[result->best_single];
            json_begin_object(&w);
            json_key(&w, "name");
            json_string(&w, best->device);
            json_key(&w, "seconds");
            json_double(&w, best->median_seconds);
            json_key(&w, "gflops");
            json_double(&w, gflops(result, best));
            json_end_object(&w);
        } else {
            json_null(&w);
        }
        json_key(&w, "ratio");
        if (ratio_of(result) > 0)
            json_double(&w, ratio_of(result));
        else
            json_null(&w);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);
    json_finish(&w);
}
