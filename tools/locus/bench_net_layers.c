/* The conv layers of ResNet-50 and MobileNetV2 as torchvision's model
 * definitions (torchvision/models/resnet.py, mobilenetv2.py) build them
 * for a 224 x 224 input. Layers of identical shape, bias and activation
 * within a stage are one row with a count. */
#include "bench_net.h"

#include <stdio.h>
#include <string.h>

/* Symmetric padding, dilation 1, and the folded batch norm's bias: every
 * conv of both networks. */
#define FIELDS(name_, source_, pooled_, c, h, w, k, r, stride_, pad, groups_,  \
               activation_, count_)                                            \
    .name = name_, .source = source_, .pooled = pooled_, .channels = c,        \
    .height = h, .width = w, .filters = k, .kernel_height = r,                 \
    .kernel_width = r, .stride = stride_, .pad_top = pad, .pad_bottom = pad,   \
    .pad_left = pad, .pad_right = pad, .dilation = 1, .groups = groups_,       \
    .bias = true, .activation = activation_, .count = count_
#define LAYER(...)                                                             \
    {                                                                          \
        FIELDS(__VA_ARGS__)                                                    \
    }

#define RELU LOCUS_ACTIVATION_RELU
#define RELU6 LOCUS_ACTIVATION_RELU6
#define NONE LOCUS_ACTIVATION_NONE

/* ResNet-50 v1.5: the stride of a stage's first bottleneck is on its 3x3
 * (conv2), and its 1x1 downsample projection has it too. conv1 and conv2
 * are followed by ReLU; conv3 and the projection by the residual add
 * (the ReLU comes after it, so it is not the conv's). */
static const bench_net_layer resnet50_layers[] = {
    LAYER("conv1", NULL, false, 3, 224, 224, 64, 7, 2, 3, 1, RELU, 1),
    /* layer1: 64 -> 256 at 56 x 56, stride 1 */
    LAYER("layer1.0.conv1", "conv1", true, 64, 56, 56, 64, 1, 1, 0, 1, RELU, 1),
    {FIELDS("layer1.0-2.conv2", "layer1.0.conv1", false, 64, 56, 56, 64, 3, 1,
            1, 1, RELU, 3),
     .source2 = "layer1.1-2.conv1"},
    LAYER("layer1.0-2.conv3", "layer1.0-2.conv2", false, 64, 56, 56, 256, 1, 1,
          0, 1, NONE, 3),
    {FIELDS("layer1.0.downsample.0", "conv1", true, 64, 56, 56, 256, 1, 1, 0, 1,
            NONE, 1),
     .residual = "layer1.0-2.conv3"},
    LAYER("layer1.1-2.conv1", "layer1.0-2.conv3", false, 256, 56, 56, 64, 1, 1,
          0, 1, RELU, 2),
    /* layer2: 256 -> 512, 56 -> 28 */
    LAYER("layer2.0.conv1", "layer1.0-2.conv3", false, 256, 56, 56, 128, 1, 1,
          0, 1, RELU, 1),
    LAYER("layer2.0.conv2", "layer2.0.conv1", false, 128, 56, 56, 128, 3, 2, 1,
          1, RELU, 1),
    {FIELDS("layer2.0-3.conv3", "layer2.0.conv2", false, 128, 28, 28, 512, 1, 1,
            0, 1, NONE, 4),
     .source2 = "layer2.1-3.conv2"},
    {FIELDS("layer2.0.downsample.0", "layer1.0-2.conv3", false, 256, 56, 56,
            512, 1, 2, 0, 1, NONE, 1),
     .residual = "layer2.0-3.conv3"},
    LAYER("layer2.1-3.conv1", "layer2.0-3.conv3", false, 512, 28, 28, 128, 1, 1,
          0, 1, RELU, 3),
    LAYER("layer2.1-3.conv2", "layer2.1-3.conv1", false, 128, 28, 28, 128, 3, 1,
          1, 1, RELU, 3),
    /* layer3: 512 -> 1024, 28 -> 14 */
    LAYER("layer3.0.conv1", "layer2.0-3.conv3", false, 512, 28, 28, 256, 1, 1,
          0, 1, RELU, 1),
    LAYER("layer3.0.conv2", "layer3.0.conv1", false, 256, 28, 28, 256, 3, 2, 1,
          1, RELU, 1),
    {FIELDS("layer3.0-5.conv3", "layer3.0.conv2", false, 256, 14, 14, 1024, 1,
            1, 0, 1, NONE, 6),
     .source2 = "layer3.1-5.conv2"},
    {FIELDS("layer3.0.downsample.0", "layer2.0-3.conv3", false, 512, 28, 28,
            1024, 1, 2, 0, 1, NONE, 1),
     .residual = "layer3.0-5.conv3"},
    LAYER("layer3.1-5.conv1", "layer3.0-5.conv3", false, 1024, 14, 14, 256, 1,
          1, 0, 1, RELU, 5),
    LAYER("layer3.1-5.conv2", "layer3.1-5.conv1", false, 256, 14, 14, 256, 3, 1,
          1, 1, RELU, 5),
    /* layer4: 1024 -> 2048, 14 -> 7 */
    LAYER("layer4.0.conv1", "layer3.0-5.conv3", false, 1024, 14, 14, 512, 1, 1,
          0, 1, RELU, 1),
    LAYER("layer4.0.conv2", "layer4.0.conv1", false, 512, 14, 14, 512, 3, 2, 1,
          1, RELU, 1),
    {FIELDS("layer4.0-2.conv3", "layer4.0.conv2", false, 512, 7, 7, 2048, 1, 1,
            0, 1, NONE, 3),
     .source2 = "layer4.1-2.conv2"},
    {FIELDS("layer4.0.downsample.0", "layer3.0-5.conv3", false, 1024, 14, 14,
            2048, 1, 2, 0, 1, NONE, 1),
     .residual = "layer4.0-2.conv3"},
    LAYER("layer4.1-2.conv1", "layer4.0-2.conv3", false, 2048, 7, 7, 512, 1, 1,
          0, 1, RELU, 2),
    LAYER("layer4.1-2.conv2", "layer4.1-2.conv1", false, 512, 7, 7, 512, 3, 1,
          1, 1, RELU, 2),
};

/* MobileNetV2 (width 1.0): features.0 is the 3x3/2 stem, features.1-17
 * the inverted residual blocks of the setting (t, c, n, s) = (1,16,1,1),
 * (6,24,2,2), (6,32,3,2), (6,64,4,2), (6,96,3,1), (6,160,3,2),
 * (6,320,1,1), each an expansion 1x1 (none where t = 1), a depthwise 3x3
 * (groups = channels) with the block's stride, and a projection 1x1;
 * features.18 the 1x1 to 1280. ReLU6 after every conv but the
 * projections (linear bottlenecks). */
static const bench_net_layer mobilenetv2_layers[] = {
    LAYER("features.0", NULL, false, 3, 224, 224, 32, 3, 2, 1, 1, RELU6, 1),
    LAYER("features.1.dw", "features.0", false, 32, 112, 112, 32, 3, 1, 1, 32,
          RELU6, 1),
    LAYER("features.1.project", "features.1.dw", false, 32, 112, 112, 16, 1, 1,
          0, 1, NONE, 1),
    /* 24 channels, 112 -> 56 */
    LAYER("features.2.expand", "features.1.project", false, 16, 112, 112, 96, 1,
          1, 0, 1, RELU6, 1),
    LAYER("features.2.dw", "features.2.expand", false, 96, 112, 112, 96, 3, 2,
          1, 96, RELU6, 1),
    LAYER("features.2.project", "features.2.dw", false, 96, 56, 56, 24, 1, 1, 0,
          1, NONE, 1),
    LAYER("features.3.expand", "features.2.project", false, 24, 56, 56, 144, 1,
          1, 0, 1, RELU6, 1),
    LAYER("features.3.dw", "features.3.expand", false, 144, 56, 56, 144, 3, 1,
          1, 144, RELU6, 1),
    LAYER("features.3.project", "features.3.dw", false, 144, 56, 56, 24, 1, 1,
          0, 1, NONE, 1),
    /* 32 channels, 56 -> 28 */
    LAYER("features.4.expand", "features.3.project", false, 24, 56, 56, 144, 1,
          1, 0, 1, RELU6, 1),
    LAYER("features.4.dw", "features.4.expand", false, 144, 56, 56, 144, 3, 2,
          1, 144, RELU6, 1),
    LAYER("features.4.project", "features.4.dw", false, 144, 28, 28, 32, 1, 1,
          0, 1, NONE, 1),
    {FIELDS("features.5-6.expand", "features.4.project", false, 32, 28, 28, 192,
            1, 1, 0, 1, RELU6, 2),
     .source2 = "features.5-6.project"},
    LAYER("features.5-6.dw", "features.5-6.expand", false, 192, 28, 28, 192, 3,
          1, 1, 192, RELU6, 2),
    LAYER("features.5-6.project", "features.5-6.dw", false, 192, 28, 28, 32, 1,
          1, 0, 1, NONE, 2),
    /* 64 channels, 28 -> 14 */
    LAYER("features.7.expand", "features.5-6.project", false, 32, 28, 28, 192,
          1, 1, 0, 1, RELU6, 1),
    LAYER("features.7.dw", "features.7.expand", false, 192, 28, 28, 192, 3, 2,
          1, 192, RELU6, 1),
    LAYER("features.7.project", "features.7.dw", false, 192, 14, 14, 64, 1, 1,
          0, 1, NONE, 1),
    {FIELDS("features.8-10.expand", "features.7.project", false, 64, 14, 14,
            384, 1, 1, 0, 1, RELU6, 3),
     .source2 = "features.8-10.project"},
    LAYER("features.8-10.dw", "features.8-10.expand", false, 384, 14, 14, 384,
          3, 1, 1, 384, RELU6, 3),
    LAYER("features.8-10.project", "features.8-10.dw", false, 384, 14, 14, 64,
          1, 1, 0, 1, NONE, 3),
    /* 96 channels, stride 1 */
    LAYER("features.11.expand", "features.8-10.project", false, 64, 14, 14, 384,
          1, 1, 0, 1, RELU6, 1),
    LAYER("features.11.dw", "features.11.expand", false, 384, 14, 14, 384, 3, 1,
          1, 384, RELU6, 1),
    LAYER("features.11.project", "features.11.dw", false, 384, 14, 14, 96, 1, 1,
          0, 1, NONE, 1),
    {FIELDS("features.12-13.expand", "features.11.project", false, 96, 14, 14,
            576, 1, 1, 0, 1, RELU6, 2),
     .source2 = "features.12-13.project"},
    LAYER("features.12-13.dw", "features.12-13.expand", false, 576, 14, 14, 576,
          3, 1, 1, 576, RELU6, 2),
    LAYER("features.12-13.project", "features.12-13.dw", false, 576, 14, 14, 96,
          1, 1, 0, 1, NONE, 2),
    /* 160 channels, 14 -> 7 */
    LAYER("features.14.expand", "features.12-13.project", false, 96, 14, 14,
          576, 1, 1, 0, 1, RELU6, 1),
    LAYER("features.14.dw", "features.14.expand", false, 576, 14, 14, 576, 3, 2,
          1, 576, RELU6, 1),
    LAYER("features.14.project", "features.14.dw", false, 576, 7, 7, 160, 1, 1,
          0, 1, NONE, 1),
    {FIELDS("features.15-16.expand", "features.14.project", false, 160, 7, 7,
            960, 1, 1, 0, 1, RELU6, 2),
     .source2 = "features.15-16.project"},
    LAYER("features.15-16.dw", "features.15-16.expand", false, 960, 7, 7, 960,
          3, 1, 1, 960, RELU6, 2),
    LAYER("features.15-16.project", "features.15-16.dw", false, 960, 7, 7, 160,
          1, 1, 0, 1, NONE, 2),
    /* 320 channels */
    LAYER("features.17.expand", "features.15-16.project", false, 160, 7, 7, 960,
          1, 1, 0, 1, RELU6, 1),
    LAYER("features.17.dw", "features.17.expand", false, 960, 7, 7, 960, 3, 1,
          1, 960, RELU6, 1),
    LAYER("features.17.project", "features.17.dw", false, 960, 7, 7, 320, 1, 1,
          0, 1, NONE, 1),
    LAYER("features.18", "features.17.project", false, 320, 7, 7, 1280, 1, 1, 0,
          1, RELU6, 1),
};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

static const bench_net nets[] = {
    {
        .name = "resnet50",
        .in_channels = 3,
        .in_height = 224,
        .in_width = 224,
        .last_layer = "layer4.0-2.conv3",
        .out_channels = 2048,
        .out_height = 7,
        .out_width = 7,
        .conv_layers = 53,
        .layers = resnet50_layers,
        .layer_count = COUNT(resnet50_layers),
    },
    {
        .name = "mobilenetv2",
        .in_channels = 3,
        .in_height = 224,
        .in_width = 224,
        .last_layer = "features.18",
        .out_channels = 1280,
        .out_height = 7,
        .out_width = 7,
        .conv_layers = 52,
        .layers = mobilenetv2_layers,
        .layer_count = COUNT(mobilenetv2_layers),
    },
};

const bench_net *bench_net_find(const char *name)
{
    for (size_t i = 0; i < COUNT(nets); ++i) {
        if (strcmp(nets[i].name, name) == 0) {
            return &nets[i];
        }
    }
    return NULL;
}

const char *bench_net_names(void)
{
    return "resnet50, mobilenetv2";
}

static bool output_extent(size_t in, size_t pad_before, size_t pad_after,
                          size_t kernel, size_t dilation, size_t stride,
                          size_t *out)
{
    size_t span = (kernel - 1) * dilation + 1;
    if (stride == 0 || kernel == 0 || in + pad_before + pad_after < span) {
        return false;
    }
    *out = (in + pad_before + pad_after - span) / stride + 1;
    return true;
}

bool bench_net_layer_output(const bench_net_layer *layer, size_t *out_height,
                            size_t *out_width)
{
    return output_extent(layer->height, layer->pad_top, layer->pad_bottom,
                         layer->kernel_height, layer->dilation, layer->stride,
                         out_height) &&
           output_extent(layer->width, layer->pad_left, layer->pad_right,
                         layer->kernel_width, layer->dilation, layer->stride,
                         out_width);
}

static const bench_net_layer *layer_named(const bench_net *net,
                                          const char *name)
{
    for (size_t i = 0; i < net->layer_count; ++i) {
        if (strcmp(net->layers[i].name, name) == 0) {
            return &net->layers[i];
        }
    }
    return NULL;
}

/* The input a layer's source gives: C, H, W. */
static bool source_shape(const bench_net *net, const bench_net_layer *layer,
                         size_t shape[3], char *why, size_t why_size)
{
    if (layer->source == NULL) {
        shape[0] = net->in_channels;
        shape[1] = net->in_height;
        shape[2] = net->in_width;
        return true;
    }
    const bench_net_layer *source = layer_named(net, layer->source);
    if (source == NULL || source >= layer) {
        snprintf(why, why_size, "%s: its source %s is no earlier layer",
                 layer->name, layer->source);
        return false;
    }
    shape[0] = source->filters;
    if (!bench_net_layer_output(source, &shape[1], &shape[2])) {
        snprintf(why, why_size, "%s: its kernel does not fit", source->name);
        return false;
    }
    if (layer->pooled) {
        /* torchvision's max pool: 3x3, stride 2, padding 1. */
        shape[1] = (shape[1] + 2 - 3) / 2 + 1;
        shape[2] = (shape[2] + 2 - 3) / 2 + 1;
    }
    return true;
}

/* Whether some layer reads or adds this one's output. */
static bool consumed(const bench_net *net, const bench_net_layer *layer)
{
    if (layer->residual != NULL || strcmp(layer->name, net->last_layer) == 0)
        return true;
    for (size_t i = 0; i < net->layer_count; ++i) {
        const bench_net_layer *other = &net->layers[i];
        const char *links[] = {other->source, other->source2, other->residual};
        for (int l = 0; l < 3; ++l)
            if (links[l] != NULL && strcmp(links[l], layer->name) == 0)
                return true;
    }
    return false;
}

/* source2 gives the same input as source; a residual partner has the
 * same output; and the output goes somewhere. */
static bool links_agree(const bench_net *net, const bench_net_layer *layer,
                        size_t p, size_t q, char *why, size_t why_size)
{
    const char *names[] = {layer->source2, layer->residual};
    for (int l = 0; l < 2; ++l) {
        if (names[l] == NULL)
            continue;
        const bench_net_layer *other = layer_named(net, names[l]);
        size_t op = 0, oq = 0;
        if (other == NULL || !bench_net_layer_output(other, &op, &oq)) {
            snprintf(why, why_size, "%s: no layer %s", layer->name, names[l]);
            return false;
        }
        size_t want[3] = {l == 0 ? layer->channels : layer->filters,
                          l == 0 ? layer->height : p,
                          l == 0 ? layer->width : q};
        if (other->filters != want[0] || op != want[1] || oq != want[2]) {
            snprintf(why, why_size,
                     "%s: %s gives %zux%zux%zu, this layer %s %zux%zux%zu",
                     layer->name, other->name, other->filters, op, oq,
                     l == 0 ? "reads" : "adds it to", want[0], want[1],
                     want[2]);
            return false;
        }
    }
    if (!consumed(net, layer)) {
        snprintf(why, why_size, "%s: no layer reads its output", layer->name);
        return false;
    }
    return true;
}

bool bench_net_check(const bench_net *net, char *why, size_t why_size)
{
    unsigned total = 0;
    for (size_t i = 0; i < net->layer_count; ++i) {
        const bench_net_layer *layer = &net->layers[i];
        total += layer->count;
        if (layer->count == 0 || layer->groups == 0 ||
            layer->channels % layer->groups != 0 ||
            layer->filters % layer->groups != 0) {
            snprintf(why, why_size,
                     "%s: count %u, groups %zu for %zu -> %zu channels",
                     layer->name, layer->count, layer->groups, layer->channels,
                     layer->filters);
            return false;
        }
        for (size_t j = 0; j < i; ++j) {
            if (strcmp(net->layers[j].name, layer->name) == 0) {
                snprintf(why, why_size, "%s: named twice", layer->name);
                return false;
            }
        }
        size_t shape[3], p = 0, q = 0;
        if (!source_shape(net, layer, shape, why, why_size)) {
            return false;
        }
        if (shape[0] != layer->channels || shape[1] != layer->height ||
            shape[2] != layer->width) {
            snprintf(why, why_size,
                     "%s: input %zux%zux%zu but %s gives %zux%zux%zu",
                     layer->name, layer->channels, layer->height, layer->width,
                     layer->source ? layer->source : "the network's input",
                     shape[0], shape[1], shape[2]);
            return false;
        }
        if (!bench_net_layer_output(layer, &p, &q)) {
            snprintf(why, why_size, "%s: its kernel does not fit", layer->name);
            return false;
        }
        if (!links_agree(net, layer, p, q, why, why_size)) {
            return false;
        }
        if (strcmp(layer->name, net->last_layer) == 0 &&
            (layer->filters != net->out_channels || p != net->out_height ||
             q != net->out_width)) {
            snprintf(why, why_size,
                     "%s: the last output is %zux%zux%zu, the network's "
                     "%zux%zux%zu",
                     layer->name, layer->filters, p, q, net->out_channels,
                     net->out_height, net->out_width);
            return false;
        }
    }
    if (layer_named(net, net->last_layer) == NULL) {
        snprintf(why, why_size, "%s: no layer %s", net->name, net->last_layer);
        return false;
    }
    if (total != net->conv_layers) {
        snprintf(why, why_size, "%s: %u conv layers counted, %u expected",
                 net->name, total, net->conv_layers);
        return false;
    }
    return true;
}

void bench_net_layer_desc(const bench_net_layer *layer, size_t batch,
                          locus_dtype dtype, locus_math_mode math,
                          locus_conv2d_desc *desc)
{
    locus_conv2d_desc_init(desc);
    desc->dtype = dtype;
    desc->batch = batch;
    desc->in_channels = layer->channels;
    desc->in_height = layer->height;
    desc->in_width = layer->width;
    desc->out_channels = layer->filters;
    desc->kernel_height = layer->kernel_height;
    desc->kernel_width = layer->kernel_width;
    desc->stride_h = layer->stride;
    desc->stride_w = layer->stride;
    desc->pad_h = layer->pad_top;
    desc->pad_w = layer->pad_left;
    desc->pad_bottom = layer->pad_bottom;
    desc->pad_right = layer->pad_right;
    desc->dilation_h = layer->dilation;
    desc->dilation_w = layer->dilation;
    desc->groups = layer->groups;
    desc->activation = layer->activation;
    desc->algorithm = LOCUS_CONV_AUTO;
    desc->math = math;
}
