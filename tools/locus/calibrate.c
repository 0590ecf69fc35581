/* `locus calibrate`: measures each device's figures for the scheduler's
 * cost model now and rewrites their cache files, or (--cached) shows the
 * figures in use without measuring what is already cached. */
#include <string.h>

#include <locus/locus.h>

#include "args.h"
#include "cli.h"
#include "json.h"
#include "table.h"

void calibrate_usage(FILE *out)
{
    fputs("usage: locus calibrate [--json] [--device SELECTOR] [--cached]\n"
          "\n"
          "Measures, for every device (or the one named), what the\n"
          "scheduler's cost model needs: the time of the smallest op, the\n"
          "gemm and conv rates with their fixed costs (fitted over a sweep\n"
          "of sizes), the reduce bandwidth, host <-> device copy rates\n"
          "from ordinary and from pinned memory, and for the CPU what an op\n"
          "pays to wake the worker pool after a pause (wake us). The\n"
          "figures are kept per host and device in $XDG_CACHE_HOME/locus/\n"
          "(else ~/.cache/locus/), which later processes read instead of\n"
          "measuring; a change of device, driver, worker count or Locus\n"
          "version is a new file.\n"
          "\n"
          "options:\n"
          "  --device SELECTOR  only this device (e.g. cpu, cuda:0, opencl:1)\n"
          "  --cached           show the figures in use; measure only\n"
          "                     devices that have none cached\n"
          "  --json             the same as JSON on stdout\n"
          "  -h, --help         this text\n"
          "\n"
          "Exit status: 0 every device's figures are in use and cached; 1 a\n"
          "device could not be measured, figures could not be cached, or\n"
          "the --device named is not there; 2 a bad command line (an\n"
          "unknown option, a --device that is no selector).\n",
          out);
}

typedef struct calibrate_options {
    bool json;
    bool cached;
    const char *device;
} calibrate_options;

static int parse_arguments(int argc, char **argv, calibrate_options *options)
{
    memset(options, 0, sizeof *options);
    for (int index = 1; index < argc; ++index) {
        const char *value = NULL;
        arg_match match;
        if (arg_is_flag(argv[index], "--help", "-h")) {
            calibrate_usage(stdout);
            return EXIT_SUCCESS;
        } else if (arg_is_flag(argv[index], "--json", NULL)) {
            options->json = true;
        } else if (arg_is_flag(argv[index], "--cached", NULL)) {
            options->cached = true;
        } else if ((match = arg_value(argc, argv, &index, "--device",
                                      &value)) != ARG_NO_MATCH) {
            if (match == ARG_MISSING_VALUE)
                return usage_error("calibrate", calibrate_usage,
                                   "--device needs a selector");
            options->device = value;
        } else {
            return usage_error("calibrate", calibrate_usage,
                               "unknown argument '%s'", argv[index]);
        }
    }
    return -1;
}

static void json_device(json_writer *json, const locus_device_info *info,
                        const locus_calibration *c)
{
    json_begin_object(json);
    json_key(json, "device");
    json_string(json, info->selector);
    json_key(json, "name");
    json_string(json, info->name);
    json_key(json, "source");
    json_string(json, c->source);
    const struct {
        const char *key;
        double value;
    } fields[] = {
        {"launch_seconds", c->launch_seconds},
        {"gemm_fixed_seconds", c->gemm_fixed_seconds},
        {"gemm_flops_per_second", c->gemm_flops_per_second},
        {"conv_fixed_seconds", c->conv_fixed_seconds},
        {"conv_flops_per_second", c->conv_flops_per_second},
        {"reduce_bytes_per_second", c->reduce_bytes_per_second},
        {"upload_pageable_bytes_per_second",
         c->upload_pageable_bytes_per_second},
        {"upload_pinned_bytes_per_second", c->upload_pinned_bytes_per_second},
        {"download_pinned_bytes_per_second",
         c->download_pinned_bytes_per_second},
        {"download_bytes_per_second", c->download_bytes_per_second},
        {"copy_latency_seconds", c->copy_latency_seconds},
        {"wake_seconds", c->wake_seconds},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        json_key(json, fields[i].key);
        json_double(json, fields[i].value);
    }
    json_end_object(json);
}

static void table_device(table *t, const locus_device_info *info,
                         const locus_calibration *c)
{
    table_add_row(t);
    table_set(t, 0, "%s", info->selector);
    table_set(t, 1, "%s", c->source);
    table_set(t, 2, "%.1f", c->launch_seconds * 1e6);
    table_set(t, 3, "%.1f + %.0f us", c->gemm_flops_per_second * 1e-9,
              c->gemm_fixed_seconds * 1e6);
    table_set(t, 4, "%.1f + %.0f us", c->conv_flops_per_second * 1e-9,
              c->conv_fixed_seconds * 1e6);
    table_set(t, 5, "%.1f", c->reduce_bytes_per_second * 1e-9);
    if (c->upload_pageable_bytes_per_second > 0) {
        table_set(t, 6, "%.1f", c->upload_pageable_bytes_per_second * 1e-9);
        table_set(t, 7, c->upload_pinned_bytes_per_second > 0 ? "%.1f" : "-",
                  c->upload_pinned_bytes_per_second * 1e-9);
        table_set(t, 8,
                  c->download_pinned_bytes_per_second > 0 ? "%.1f (%.1f)"
                                                          : "%.1f",
                  c->download_bytes_per_second * 1e-9,
                  c->download_pinned_bytes_per_second * 1e-9);
        table_set(t, 9, "%.1f", c->copy_latency_seconds * 1e6);
    } else {
        for (size_t column = 6; column <= 9; column++)
            table_set(t, column, "-");
    }
    /* Only a device whose ops run on the worker pool wakes it. */
    table_set(t, 10, c->wake_seconds > 0 ? "%.1f" : "-", c->wake_seconds * 1e6);
}

int calibrate_command(int argc, char **argv)
{
    calibrate_options options;
    int parsed = parse_arguments(argc, argv, &options);
    if (parsed >= 0)
        return parsed;
    locus_context *context = NULL;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS) {
        report_context_failure();
        return EXIT_FAILURE;
    }
    int result = EXIT_SUCCESS;
    size_t count = 0;
    locus_device_count(context, &count);
    locus_device *only = NULL;
    locus_status found = options.device != NULL
                             ? locus_device_find(context, options.device, &only)
                             : LOCUS_SUCCESS;
    if (found != LOCUS_SUCCESS) {
        int status = EXIT_FAILURE;
        if (found == LOCUS_ERROR_INVALID_ARGUMENT) {
            /* Not a selector at all: the command line is wrong. */
            status = usage_error("calibrate", calibrate_usage,
                                 "bad --device value: %s", locus_last_error());
        } else {
            report_locus_failure("--device %s", options.device);
            report_absent_backends(context, options.device);
        }
        locus_context_destroy(context);
        return status;
    }
    static const char *const headers[] = {
        "device",       "source",       "launch us",
        "gemm GFLOP/s", "conv GFLOP/s", "reduce GB/s",
        "upload GB/s",  "pinned GB/s",  "download (pinned)",
        "copy us",      "wake us"};
    table t;
    table_init(&t, 11, headers);
    for (size_t column = 2; column < 11; column++)
        table_align_right(&t, column);
    json_writer json;
    if (options.json) {
        json_document_begin(&json, stdout, "calibrate");
        json_key(&json, "devices");
        json_begin_array(&json);
    }
    for (size_t i = 0; i < count; i++) {
        locus_device *device = NULL;
        locus_device_get(context, i, &device);
        if (only && device != only)
            continue;
        locus_device_info info;
        locus_device_info_init(&info);
        locus_device_get_info(device, &info);
        /* --cached measures only a device with nothing cached, and the
         * table's source column says which it was. */
        if (!options.json)
            fprintf(stderr, "%s %s (%s)...\n",
                    options.cached ? "reading the cached figures (measuring "
                                     "them if there are none) of"
                                   : "calibrating",
                    info.selector, info.name);
        locus_calibration c;
        locus_calibration_init(&c);
        locus_status status =
            locus_device_calibration(device, !options.cached, &c);
        if (status != LOCUS_SUCCESS) {
            report_locus_failure("calibrating %s", info.selector);
            result = EXIT_FAILURE;
            /* Not cached: the figures were measured and are shown. */
            if (status != LOCUS_ERROR_SYSTEM)
                continue;
        }
        if (options.json)
            json_device(&json, &info, &c);
        else
            table_device(&t, &info, &c);
    }
    if (options.json) {
        json_end_array(&json);
        json_end_object(&json);
        json_finish(&json);
    } else {
        table_print(&t, stdout, 0);
    }
    table_free(&t);
    locus_context_destroy(context);
    return result;
}
