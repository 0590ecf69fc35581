/* How `locus bench conv --net` shows its rows: a table per device with
 * the whole network's conv time under it, or one JSON document. */
#include <stdio.h>
#include <string.h>

#include "bench_net.h"
#include "json.h"
#include "table.h"

/* The whole network on one device: sum of count x time. "both" sums only
 * the layers that Locus and the reference both measured, so its ratio
 * compares the same work. */
typedef struct net_totals {
    double locus, reference;           /* every layer each one measured */
    double locus_both, reference_both; /* the layers both measured */
    unsigned locus_convs, reference_convs, both_convs;
    unsigned refused_convs; /* not offered by the device */
    bool all_passed;
} net_totals;

static net_totals totals_of(const bench_net_row *rows, size_t count)
{
    net_totals totals = {.all_passed = true};
    for (size_t i = 0; i < count; ++i) {
        const bench_net_row *row = &rows[i];
        double n = (double)row->layer->count;
        if (row->measured) {
            totals.locus += n * row->seconds;
            totals.locus_convs += row->layer->count;
            totals.all_passed &= row->passed;
        } else {
            totals.refused_convs += row->layer->count;
        }
        if (row->reference_measured) {
            totals.reference += n * row->reference_seconds;
            totals.reference_convs += row->layer->count;
        }
        if (row->measured && row->reference_measured) {
            totals.locus_both += n * row->seconds;
            totals.reference_both += n * row->reference_seconds;
            totals.both_convs += row->layer->count;
        }
    }
    return totals;
}

static double ratio(double reference, double ours)
{
    return ours > 0.0 ? reference / ours : 0.0;
}

/* Rows are grouped by device, layer_count each. */
static size_t device_rows(const bench_net_request *request, size_t row_count)
{
    (void)row_count;
    return request->net->layer_count;
}

static const char *activation_name(locus_activation activation)
{
    switch (activation) {
    case LOCUS_ACTIVATION_RELU:
        return "relu";
    case LOCUS_ACTIVATION_RELU6:
        return "relu6";
    case LOCUS_ACTIVATION_NONE:
        break;
    }
    return "none";
}

/* "64x56x56 -> 256 1x1/1 g1" */
static void layer_shape(const bench_net_layer *layer, char *text, size_t size)
{
    snprintf(text, size, "%zux%zux%zu -> %zu %zux%zu/%zu%s", layer->channels,
             layer->height, layer->width, layer->filters, layer->kernel_height,
             layer->kernel_width, layer->stride,
             layer->groups == layer->channels && layer->groups > 1 ? " dw"
             : layer->groups > 1                                   ? " grouped"
                                                                   : "");
}

static void print_device(const bench_net_request *request,
                         const bench_net_row *rows, size_t count)
{
    static const char *const headers[] = {
        "layer",     "n",   "shape",     "act",      "locus",
        "algorithm", "err", "reference", "ref time", "ratio"};
    table t;
    table_init(&t, 10, headers);
    table_align_right(&t, 1);
    table_align_right(&t, 4);
    table_align_right(&t, 6);
    table_align_right(&t, 8);
    table_align_right(&t, 9);
    for (size_t i = 0; i < count; ++i) {
        const bench_net_row *row = &rows[i];
        char shape[96];
        layer_shape(row->layer, shape, sizeof(shape));
        table_add_row(&t);
        table_set(&t, 0, "%s", row->layer->name);
        table_set(&t, 1, "%u", row->layer->count);
        table_set(&t, 2, "%s", shape);
        table_set(&t, 3, "%s", activation_name(row->layer->activation));
        if (row->measured) {
            table_set(&t, 4, "%.4g ms", row->seconds * 1e3);
            table_set(&t, 5, "%s", row->algorithm);
            table_set(&t, 6, "%.2g%s", row->max_rel_err,
                      row->passed ? "" : " FAIL");
        } else {
            table_set(&t, 4, "-");
            table_set(&t, 5, "%s",
                      row->status == LOCUS_ERROR_NOT_SUPPORTED ? "not offered"
                                                               : "failed");
        }
        if (row->reference_measured) {
            table_set(&t, 7, "%s", row->reference_name);
            table_set(&t, 8, "%.4g ms", row->reference_seconds * 1e3);
            if (row->measured)
                table_set(&t, 9, "%.2f",
                          ratio(row->reference_seconds, row->seconds));
        } else {
            table_set(&t, 7, "none");
        }
    }
    printf("%s, batch %zu, %s, on %s:\n", request->net->name, request->batch,
           locus_dtype_str(request->dtype), rows[0].device);
    table_print(&t, stdout, 2);
    table_free(&t);
    /* Why a layer has no figure, once per distinct reason. */
    for (size_t i = 0; i < count; ++i) {
        const char *reasons[2] = {
            rows[i].measured ? NULL : rows[i].reason,
            rows[i].reference_measured ? NULL : rows[i].reference_reason};
        for (int r = 0; r < 2; ++r) {
            if (reasons[r] == NULL || reasons[r][0] == '\0')
                continue;
            bool seen = false;
            for (size_t j = 0; j < i && !seen; ++j)
                seen =
                    strcmp(r == 0 ? rows[j].reason : rows[j].reference_reason,
                           reasons[r]) == 0;
            if (!seen)
                printf("  %s %s: %s\n", rows[i].layer->name,
                       r == 0 ? "(locus)" : "(reference)", reasons[r]);
        }
    }
    net_totals totals = totals_of(rows, count);
    unsigned convs = request->net->conv_layers;
    printf("  whole network, sum of count x time: locus %.4g ms (%u of %u "
           "convs), reference %.4g ms (%u of %u)\n",
           totals.locus * 1e3, totals.locus_convs, convs,
           totals.reference * 1e3, totals.reference_convs, convs);
    if (totals.both_convs > 0)
        printf("  ratio (reference / locus) over the %u convs both ran: "
               "%.3f%s\n",
               totals.both_convs,
               ratio(totals.reference_both, totals.locus_both),
               totals.both_convs < convs ? " (partial network)" : "");
    printf("\n");
}

void bench_net_print_table(const bench_net_request *request,
                           const bench_net_row *rows, size_t row_count)
{
    size_t per_device = device_rows(request, row_count);
    for (size_t start = 0; start < row_count; start += per_device)
        print_device(request, &rows[start], per_device);
    printf("Each layer runs with the bias of its folded batch norm and the\n"
           "activation after it fused; ratio above 1: Locus is faster.\n");
}

static void write_row(json_writer *json, const bench_net_request *request,
                      const bench_net_row *row)
{
    const bench_net_layer *layer = row->layer;
    json_begin_object(json);
    json_key(json, "op");
    json_string(json, "conv2d");
    json_key(json, "layer");
    json_string(json, layer->name);
    json_key(json, "count");
    json_uint(json, layer->count);
    json_key(json, "device");
    json_string(json, row->device);
    json_key(json, "dims");
    json_begin_object(json);
    const char *names[] = {"N",        "C",          "H",        "W",
                           "K",        "R",          "S",        "stride",
                           "pad_top",  "pad_bottom", "pad_left", "pad_right",
                           "dilation", "groups"};
    size_t values[] = {
        request->batch,      layer->channels, layer->height,
        layer->width,        layer->filters,  layer->kernel_height,
        layer->kernel_width, layer->stride,   layer->pad_top,
        layer->pad_bottom,   layer->pad_left, layer->pad_right,
        layer->dilation,     layer->groups};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
        json_key(json, names[i]);
        json_uint(json, values[i]);
    }
    json_end_object(json);
    json_key(json, "bias");
    json_bool(json, layer->bias);
    json_key(json, "activation");
    json_string(json, activation_name(layer->activation));
    json_key(json, "dtype");
    json_string(json, locus_dtype_str(request->dtype));
    json_key(json, "measured");
    json_bool(json, row->measured);
    json_key(json, "algorithm");
    json_string_or_null(json, row->measured ? row->algorithm : NULL);
    json_key(json, "seconds");
    if (row->measured)
        json_double(json, row->seconds);
    else
        json_null(json);
    json_key(json, "seconds_median");
    if (row->measured)
        json_double(json, row->median_seconds);
    else
        json_null(json);
    json_key(json, "flops");
    json_double(json, row->flops);
    json_key(json, "bytes");
    json_uint(json, row->bytes);
    json_key(json, "workspace_bytes");
    json_uint(json, row->workspace_bytes);
    json_key(json, "max_rel_err");
    json_double(json, row->measured ? row->max_rel_err : 0.0);
    json_key(json, "tolerance");
    json_double(json, row->tolerance);
    json_key(json, "passed");
    json_bool(json, row->measured && row->passed);
    json_key(json, "check");
    json_string(json, "sampled");
    json_key(json, "checked_entries");
    json_uint(json, row->checked_entries);
    json_key(json, "status");
    json_string(json, row->measured ? "LOCUS_SUCCESS"
                                    : locus_status_name(row->status));
    json_key(json, "reason");
    json_string_or_null(json, row->measured ? NULL : row->reason);
    json_key(json, "reference");
    if (row->reference_measured) {
        json_begin_object(json);
        json_key(json, "name");
        json_string(json, row->reference_name);
        json_key(json, "seconds");
        json_double(json, row->reference_seconds);
        json_end_object(json);
    } else {
        json_null(json);
    }
    json_key(json, "reference_reason");
    json_string_or_null(json,
                        row->reference_measured ? NULL : row->reference_reason);
    json_key(json, "ratio");
    if (row->measured && row->reference_measured)
        json_double(json, ratio(row->reference_seconds, row->seconds));
    else
        json_null(json);
    json_end_object(json);
}

static void write_totals(json_writer *json, const bench_net_request *request,
                         const bench_net_row *rows, size_t count)
{
    net_totals totals = totals_of(rows, count);
    json_begin_object(json);
    json_key(json, "device");
    json_string(json, rows[0].device);
    json_key(json, "conv_layers");
    json_uint(json, request->net->conv_layers);
    json_key(json, "locus_seconds");
    json_double(json, totals.locus);
    json_key(json, "locus_convs");
    json_uint(json, totals.locus_convs);
    json_key(json, "reference_seconds");
    json_double(json, totals.reference);
    json_key(json, "reference_convs");
    json_uint(json, totals.reference_convs);
    json_key(json, "both_convs");
    json_uint(json, totals.both_convs);
    json_key(json, "ratio");
    if (totals.both_convs > 0)
        json_double(json, ratio(totals.reference_both, totals.locus_both));
    else
        json_null(json);
    json_key(json, "complete");
    json_bool(json, totals.both_convs == request->net->conv_layers);
    json_key(json, "passed");
    json_bool(json, totals.all_passed);
    json_end_object(json);
}

void bench_net_print_json(const bench_net_request *request,
                          const bench_net_row *rows, size_t row_count)
{
    json_writer json;
    json_document_begin(&json, stdout, "bench net");
    json_key(&json, "net");
    json_string(&json, request->net->name);
    json_key(&json, "batch");
    json_uint(&json, request->batch);
    json_key(&json, "dtype");
    json_string(&json, locus_dtype_str(request->dtype));
    json_key(&json, "seed");
    json_uint(&json, request->seed);
    json_key(&json, "repeat");
    json_int(&json, request->repeat);
    json_key(&json, "timing");
    json_string(&json, "best");
    json_key(&json, "results");
    json_begin_array(&json);
    for (size_t i = 0; i < row_count; ++i)
        write_row(&json, request, &rows[i]);
    json_end_array(&json);
    json_key(&json, "networks");
    json_begin_array(&json);
    size_t per_device = device_rows(request, row_count);
    for (size_t start = 0; start < row_count; start += per_device)
        write_totals(&json, request, &rows[start], per_device);
    json_end_array(&json);
    json_document_end(&json);
}
