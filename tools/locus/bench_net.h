/* `locus bench conv --net NAME`: every convolution of a real network, as
 * torchvision's model definition builds it at 224 x 224, run layer by
 * layer beside the device's vendor library, and the whole network's conv
 * time as one figure (bench_net.c runs, bench_net_report.c reports,
 * bench_net_layers.c holds the tables). */
#ifndef LOCUS_TOOL_BENCH_NET_H
#define LOCUS_TOOL_BENCH_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <locus/locus.h>

#include "bench.h"

/* One distinct convolution of a network and how often it occurs: the
 * layers of identical shape (and bias and activation) are measured once
 * and counted `count` times. Batch is not part of the table. */
typedef struct bench_net_layer {
    const char *name; /* torchvision's module path(s), e.g. "layer1.0.conv2" */
    /* The layer whose output this one reads (by name), or NULL for the
     * network's input; `pooled`: through the stem's 3x3/2 pad-1 max pool
     * first. Only the tables' test uses it, to check that the shapes
     * chain. */
    const char *source;
    bool pooled;
    /* Merged rows read several layers' outputs: source2 (any row) gives
     * the same shape. residual: the layer whose output this one's is
     * added to (a downsample projection and its block's last conv). */
    const char *source2;
    const char *residual;
    size_t channels, height, width;
    size_t filters, kernel_height, kernel_width;
    size_t stride;
    size_t pad_top, pad_bottom, pad_left, pad_right;
    size_t dilation;
    size_t groups;
    /* Every conv of both networks is followed by a batch norm, which an
     * inference engine folds into the conv as a bias; activation is the
     * one that follows the norm directly (none where a residual add comes
     * first). */
    bool bias;
    locus_activation activation;
    unsigned count;
} bench_net_layer;

typedef struct bench_net {
    const char *name; /* "resnet50", "mobilenetv2" */
    size_t in_channels, in_height, in_width;
    /* The last conv (by name) and its output, which the tables' test
     * checks too. */
    const char *last_layer;
    size_t out_channels, out_height, out_width;
    unsigned conv_layers; /* the network's conv count: 53, 52 */
    const bench_net_layer *layers;
    size_t layer_count;
} bench_net;

/* The network of that name, or NULL. */
const bench_net *bench_net_find(const char *name);
/* "resnet50, mobilenetv2", for messages. */
const char *bench_net_names(void);

/* P and Q of a layer; false when the kernel does not fit. */
bool bench_net_layer_output(const bench_net_layer *layer, size_t *out_height,
                            size_t *out_width);

/* The whole table checked: counts add up to conv_layers, each layer's
 * output fits, its input is its source's output (C = K, H and W = P and
 * Q, after the pool where pooled; source2 likewise), a residual partner
 * has the same output, every output is read by some layer, groups divide
 * the channels, names are
 * unique, and the last conv gives the network's output. False with the
 * reason in why. */
bool bench_net_check(const bench_net *net, char *why, size_t why_size);

/* The descriptor of one layer at a batch (resolved: every field
 * explicit, NCHW, auto algorithm). */
void bench_net_layer_desc(const bench_net_layer *layer, size_t batch,
                          locus_dtype dtype, locus_math_mode math,
                          locus_conv2d_desc *desc);

/* One layer's outcome on one device. */
typedef struct bench_net_row {
    const bench_net_layer *layer;
    char device[32];
    bool measured; /* Locus ran it */
    char algorithm[32];
    double seconds; /* best of the timed runs */
    double median_seconds;
    double max_rel_err, tolerance;
    size_t checked_entries;
    bool passed;
    double flops;
    uint64_t bytes;
    uint64_t workspace_bytes;
    locus_status status; /* why not measured */
    char reason[384];
    /* The device's vendor library on the same layer. */
    bool reference_measured;
    char reference_name[64];
    double reference_seconds;
    char reference_reason[256]; /* why there is none */
} bench_net_row;

/* The oneDNN and cuDNN references of a layer (bench_ref_onednn.c,
 * bench_ref_cuda.c): true with the best time and the library's name, or
 * false with the reason (a feature or dtype it lacks, a missing
 * library). oneDNN runs on the given NCHW/KCRS host data (bias NULL:
 * none) and leaves its NCHW output in output for the caller's check;
 * cuDNN's module makes device data of its own. */
bool bench_onednn_conv_layer(const locus_conv2d_desc *desc, const float *input,
                             const float *filter, const float *bias,
                             float *output, int threads, int repeat,
                             double *seconds, char *name, size_t name_size,
                             char *why, size_t why_size);
bool bench_cudnn_conv_layer(const locus_conv2d_desc *desc, bool bias,
                            int repeat, double *seconds, char *name,
                            size_t name_size, char *why, size_t why_size);

/* What the command line asks for. */
typedef struct bench_net_request {
    const bench_net *net;
    size_t batch;
    const char *selectors[16];
    size_t selector_count;
    locus_dtype dtype;
    locus_math_mode math;
    int repeat;
    uint64_t seed;
    bool json;
} bench_net_request;

/* Text table and totals, or the JSON document (bench_net_report.c). */
void bench_net_print_table(const bench_net_request *request,
                           const bench_net_row *rows, size_t row_count);
void bench_net_print_json(const bench_net_request *request,
                          const bench_net_row *rows, size_t row_count);

/* Whether argv (after "bench") asks for --net. */
bool bench_net_requested(int argc, char **argv);
/* `locus bench conv --net NAME ...`; argv[0] is "bench". */
int bench_net_command(int argc, char **argv);
void bench_net_usage(FILE *out);

#endif
