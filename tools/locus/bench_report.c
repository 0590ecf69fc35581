/* How `locus bench` shows its results: an aligned table with notes for
 * people, or the JSON contract of DESIGN.md for scripts. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bench_ref_blas.h"
#include "format.h"
#include "json.h"
#include "table.h"

/* "1.23 ms": people read scaled units faster than exponents. */
static void format_seconds(double seconds, char *text, size_t capacity)
{
    if (seconds >= 1.0) {
        snprintf(text, capacity, "%.3g s", seconds);
    } else if (seconds >= 1e-3) {
        snprintf(text, capacity, "%.3g ms", seconds * 1e3);
    } else {
        snprintf(text, capacity, "%.3g us", seconds * 1e6);
    }
}

static void format_rate(double rate, char *text, size_t capacity)
{
    snprintf(text, capacity, rate >= 10.0 ? "%.1f" : "%.3g", rate);
}

static double per_second(double amount, double seconds)
{
    return seconds > 0.0 ? amount / seconds : 0.0;
}

/* The fastest reference, which "reference" and "ratio" compare with: the
 * best a user could pick. */
static const bench_reference *best_reference(const bench_result *result)
{
    const bench_reference *best = NULL;
    for (size_t i = 0; i < result->reference_count; ++i) {
        const bench_reference *reference = &result->references[i];
        if (reference->seconds > 0.0 &&
            (best == NULL || reference->seconds < best->seconds)) {
            best = reference;
        }
    }
    return best;
}

/* The reference's time over ours: above 1, Locus is faster. */
static double reference_ratio(const bench_result *result,
                              const bench_reference *reference)
{
    return result->best_seconds > 0.0
               ? reference->seconds / result->best_seconds
               : 0.0;
}

/* The dtype the run used, as the record names it (the runtime fills it);
 * the requested one where the record has none. */
static const char *result_dtype(const bench_request *request,
                                const bench_result *result)
{
    return result->record.dtype[0] != '\0'
               ? result->record.dtype
               : locus_dtype_str(request->settings.dtype);
}

/* How far apart the timed runs were: (slowest - fastest) / median. */
static double run_spread(const bench_result *result)
{
    return result->median_seconds > 0.0
               ? (result->worst_seconds - result->best_seconds) /
                     result->median_seconds
               : 0.0;
}

static void print_result_rows(const bench_request *request,
                              const bench_outcome *outcome)
{
    static const char *const headers[] = {
        "op",          "device", "shape",  "dtype",   "algorithm",
        "time",        "median", "spread", "GFLOP/s", "GB/s",
        "max rel err", "check",  "local",  "remote",  "provenance"};
    table results;
    table_init(&results, sizeof(headers) / sizeof(headers[0]), headers);
    for (size_t column = 5; column <= 10; ++column) {
        table_align_right(&results, column);
    }
    table_align_right(&results, 12);
    table_align_right(&results, 13);
    for (size_t i = 0; i < outcome->result_count; ++i) {
        const bench_result *result = &outcome->results[i];
        char text[64];
        table_add_row(&results);
        table_set(&results, 0, "%s", result->op);
        table_set(&results, 1, "%s", result->device);
        table_set(&results, 2, "%s", result->shape);
        table_set(&results, 3, "%s", result_dtype(request, result));
        table_set(&results, 4, "%s", result->record.algorithm);
        format_seconds(result->best_seconds, text, sizeof(text));
        table_set(&results, 5, "%s", text);
        format_seconds(result->median_seconds, text, sizeof(text));
        table_set(&results, 6, "%s", text);
        table_set(&results, 7, "%.0f%%", run_spread(result) * 100.0);
        format_rate(per_second(result->flops, result->best_seconds) / 1e9, text,
                    sizeof(text));
        table_set(&results, 8, "%s", text);
        format_rate(per_second((double)result->bytes, result->best_seconds) /
                        1e9,
                    text, sizeof(text));
        table_set(&results, 9, "%s", text);
        table_set(&results, 10, "%.2g", result->max_rel_err);
        table_set(&results, 11, "%s%s", result->passed ? "ok" : "FAIL",
                  result->sampled ? " (sampled)" : "");
        if (result->record.provenance == LOCUS_PROVENANCE_NONE) {
            table_set(&results, 12, "-");
            table_set(&results, 13, "-");
        } else {
            format_bytes(result->record.local_bytes, text, sizeof(text));
            table_set(&results, 12, "%s", text);
            format_bytes(result->record.remote_bytes, text, sizeof(text));
            table_set(&results, 13, "%s", text);
        }
        table_set(&results, 14, "%s",
                  locus_provenance_str(result->record.provenance));
    }
    table_print(&results, stdout, 0);
    table_free(&results);
}

/* Each result's references side by side with ours: one row per
 * reference, so an op with several (reduce: bandwidth and a plain loop)
 * shows them all. */
static void print_reference_rows(const bench_outcome *outcome)
{
    static const char *const headers[] = {"op",        "device", "shape",
                                          "reference", "time",   "GFLOP/s",
                                          "GB/s",      "ours",   "ratio"};
    table rows;
    table_init(&rows, sizeof(headers) / sizeof(headers[0]), headers);
    for (size_t column = 4; column <= 8; ++column) {
        table_align_right(&rows, column);
    }
    bool any = false;
    for (size_t i = 0; i < outcome->result_count; ++i) {
        const bench_result *result = &outcome->results[i];
        const bench_reference *best = best_reference(result);
        for (size_t r = 0; r < result->reference_count; ++r) {
            const bench_reference *reference = &result->references[r];
            char text[64];
            any = true;
            table_add_row(&rows);
            table_set(&rows, 0, "%s", result->op);
            table_set(&rows, 1, "%s", result->device);
            table_set(&rows, 2, "%s", result->shape);
            table_set(&rows, 3, "%s%s", reference->name,
                      reference == best && result->reference_count > 1
                          ? " (best)"
                          : "");
            format_seconds(reference->seconds, text, sizeof(text));
            table_set(&rows, 4, "%s", text);
            format_rate(reference->gflops, text, sizeof(text));
            table_set(&rows, 5, "%s", text);
            format_rate(reference->gbps, text, sizeof(text));
            table_set(&rows, 6, "%s", text);
            format_seconds(result->best_seconds, text, sizeof(text));
            table_set(&rows, 7, "%s", text);
            table_set(&rows, 8, "%.2f", reference_ratio(result, reference));
        }
    }
    if (any) {
        printf("\n");
        table_print(&rows, stdout, 0);
        printf("ratio: the reference's time over ours (above 1: Locus is "
               "faster), same inputs, same thread count; (best): the "
               "fastest, JSON's \"reference\" and \"ratio\"\n");
    }
    table_free(&rows);
}

/* The CPU BLAS libraries gemm was compared with, or why one was not:
 * a figure is only worth its library's name and version. */
static void print_blas_libraries(void)
{
    size_t count = 0;
    const bench_blas_library *libraries = bench_blas_libraries_used(&count);
    for (size_t i = 0; i < count; ++i) {
        const bench_blas_library *library = &libraries[i];
        if (library->found) {
            printf("reference %s %s: %s (%s)\n", library->label,
                   library->version, library->detail, library->path);
        } else {
            printf("reference %s: not found: %s\n", library->label,
                   library->reason);
        }
    }
}

static void write_blas_libraries_json(json_writer *json)
{
    size_t count = 0;
    const bench_blas_library *libraries = bench_blas_libraries_used(&count);
    json_key(json, "reference_libraries");
    json_begin_array(json);
    for (size_t i = 0; i < count; ++i) {
        const bench_blas_library *library = &libraries[i];
        json_begin_object(json);
        json_key(json, "name");
        json_string(json, library->label);
        json_key(json, "found");
        json_bool(json, library->found);
        json_key(json, "version");
        json_string(json, library->version);
        json_key(json, "detail");
        json_string(json, library->detail);
        json_key(json, "path");
        json_string(json, library->path);
        json_key(json, "reason");
        json_string(json, library->reason);
        json_end_object(json);
    }
    json_end_array(json);
}

/* What the columns mean, then what did not run and what failed. */
static void print_notes(const bench_request *request,
                        const bench_outcome *outcome)
{
    bool any_sampled = false;
    for (size_t i = 0; i < outcome->result_count; ++i) {
        any_sampled = any_sampled || outcome->results[i].sampled;
    }
    if (outcome->result_count > 0) {
        printf("\ntime: best of %d runs after one warm-up; median: of those "
               "runs; spread: (slowest - fastest) / median; seed %llu\n",
               request->settings.repeat, (unsigned long long)request->seed);
        printf("max rel err: max |result - reference| / sum |terms|, "
               "float64 reference\n");
    }
    if (any_sampled) {
        printf("(sampled): %d random output entries checked, a full float64 "
               "reference costing too much\n",
               BENCH_SAMPLED_ENTRIES);
    }
    for (size_t i = 0; i < outcome->skip_count;) {
        const bench_skip *skip = &outcome->skips[i];
        /* A device that lacks the op lacks it at every size: one line for
         * the run of skips with the same device and reason. */
        size_t same = 1;
        while (i + same < outcome->skip_count &&
               outcome->skips[i + same].status == skip->status &&
               strcmp(outcome->skips[i + same].device, skip->device) == 0 &&
               strcmp(outcome->skips[i + same].reason, skip->reason) == 0) {
            same++;
        }
        if (skip->status == LOCUS_ERROR_NOT_SUPPORTED) {
            if (same == 1) {
                printf("not offered: %s %s %s on %s: %s\n", skip->op,
                       locus_dtype_str(request->settings.dtype), skip->shape,
                       skip->device, skip->reason);
            } else {
                printf("not offered: %s %s on %s (%zu sizes): %s\n", skip->op,
                       locus_dtype_str(request->settings.dtype), skip->device,
                       same, skip->reason);
            }
        }
        i += same;
    }
    for (size_t i = 0; i < outcome->result_count; ++i) {
        const bench_result *result = &outcome->results[i];
        if (!result->passed) {
            printf("FAIL: %s %s on %s: max rel err %.3g above tolerance "
                   "%.3g\n",
                   result->op, result->shape, result->device,
                   result->max_rel_err, result->tolerance);
        }
    }
}

void bench_print_table(const bench_request *request,
                       const bench_outcome *outcome)
{
    if (outcome->result_count == 0) {
        printf("no results\n");
    } else {
        print_result_rows(request, outcome);
        print_reference_rows(outcome);
    }
    print_blas_libraries();
    print_notes(request, outcome);
}

/* {"name", "seconds", "gflops", "gbps"}, plus "ratio" when result is
 * given (the entries of "references"). */
static void write_reference_json(json_writer *json,
                                 const bench_reference *reference,
                                 const bench_result *result)
{
    json_begin_object(json);
    json_key(json, "name");
    json_string(json, reference->name);
    json_key(json, "seconds");
    json_double(json, reference->seconds);
    json_key(json, "gflops");
    json_double(json, reference->gflops);
    json_key(json, "gbps");
    json_double(json, reference->gbps);
    if (result != NULL) {
        json_key(json, "ratio");
        json_double(json, reference_ratio(result, reference));
    }
    json_end_object(json);
}

static void write_result_json(json_writer *json, const bench_request *request,
                              const bench_result *result)
{
    json_begin_object(json);
    json_key(json, "op");
    json_string(json, result->op);
    json_key(json, "device");
    json_string(json, result->device);
    json_key(json, "shape");
    json_string(json, result->shape);
    json_key(json, "dims");
    json_begin_object(json);
    for (size_t i = 0; i < result->dim_count; ++i) {
        json_key(json, result->dim_names[i]);
        json_uint(json, result->dim_values[i]);
    }
    json_end_object(json);
    json_key(json, "dtype");
    json_string(json, result_dtype(request, result));
    json_key(json, "algorithm");
    json_string(json, result->record.algorithm);
    if (request->op != BENCH_REDUCE) {
        json_key(json, "math");
        json_string(json, bench_math_name(request->settings.math));
    }
    json_key(json, "seconds");
    json_double(json, result->best_seconds);
    json_key(json, "seconds_median");
    json_double(json, result->median_seconds);
    json_key(json, "seconds_max");
    json_double(json, result->worst_seconds);
    json_key(json, "repeat");
    json_int(json, result->repeat);
    json_key(json, "gflops");
    json_double(json, per_second(result->flops, result->best_seconds) / 1e9);
    json_key(json, "gbps");
    json_double(json,
                per_second((double)result->bytes, result->best_seconds) / 1e9);
    json_key(json, "flops");
    json_double(json, result->flops);
    json_key(json, "bytes");
    json_uint(json, result->bytes);
    json_key(json, "max_rel_err");
    /* Infinity (a NaN in the output) has no JSON spelling: null. */
    json_double(json, result->max_rel_err);
    json_key(json, "tolerance");
    json_double(json, result->tolerance);
    json_key(json, "passed");
    json_bool(json, result->passed);
    json_key(json, "check");
    json_string(json, result->sampled ? "sampled" : "full");
    json_key(json, "checked_entries");
    json_uint(json, result->checked_entries);
    json_key(json, "output_entries");
    json_uint(json, result->output_entries);
    json_key(json, "local_bytes");
    json_uint(json, result->record.local_bytes);
    json_key(json, "remote_bytes");
    json_uint(json, result->record.remote_bytes);
    json_key(json, "provenance");
    json_string(json, locus_provenance_str(result->record.provenance));
    json_key(json, "bytes_to_device");
    json_uint(json, result->record.bytes_to_device);
    json_key(json, "bytes_from_device");
    json_uint(json, result->record.bytes_from_device);
    json_key(json, "workspace_bytes");
    json_uint(json, result->record.workspace_bytes);
    /* The keys are part of the contract: null when nothing was measured. */
    const bench_reference *best = best_reference(result);
    json_key(json, "reference");
    if (best != NULL) {
        write_reference_json(json, best, NULL);
    } else {
        json_null(json);
    }
    json_key(json, "ratio");
    if (best != NULL && result->best_seconds > 0.0) {
        json_double(json, reference_ratio(result, best));
    } else {
        json_null(json);
    }
    json_key(json, "references");
    json_begin_array(json);
    for (size_t i = 0; i < result->reference_count; ++i) {
        write_reference_json(json, &result->references[i], result);
    }
    json_end_array(json);
    json_end_object(json);
}

void bench_print_json(const bench_request *request,
                      const bench_outcome *outcome)
{
    json_writer json;
    json_document_begin(&json, stdout, "bench");
    json_key(&json, "seed");
    json_uint(&json, request->seed);
    json_key(&json, "repeat");
    json_int(&json, request->settings.repeat);
    json_key(&json, "timing");
    json_string(&json, "best");
    json_key(&json, "results");
    json_begin_array(&json);
    for (size_t i = 0; i < outcome->result_count; ++i) {
        write_result_json(&json, request, &outcome->results[i]);
    }
    json_end_array(&json);
    write_blas_libraries_json(&json);
    json_key(&json, "skipped");
    json_begin_array(&json);
    for (size_t i = 0; i < outcome->skip_count; ++i) {
        const bench_skip *skip = &outcome->skips[i];
        json_begin_object(&json);
        json_key(&json, "op");
        json_string(&json, skip->op);
        json_key(&json, "device");
        json_string(&json, skip->device);
        json_key(&json, "shape");
        json_string(&json, skip->shape);
        json_key(&json, "status");
        json_string(&json, locus_status_name(skip->status));
        json_key(&json, "reason");
        json_string(&json, skip->reason);
        json_end_object(&json);
    }
    json_end_array(&json);
    json_document_end(&json);
}
