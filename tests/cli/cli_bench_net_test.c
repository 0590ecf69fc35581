/* `locus bench conv --net`: the layer tables (tools/locus/bench_net_layers.c,
 * linked in) against facts of torchvision's ResNet-50 and MobileNetV2
 * that do not come from the tables themselves, the tables' own chaining
 * check shown to catch a broken copy, and the command on the cpu (JSON
 * and text), on a device that refuses every layer (the fake module as
 * cuda:0), and its usage errors.
 *
 * usage: cli_bench_net_test <path to locus> <case>; exit 0 pass. The fake
 * module's folder comes in LOCUS_TEST_FAKE_MODULE. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_net.h"
#include "expect.h"
#include "json_check.h"
#include "run_command.h"

static const char *locus_path;

static command_result run_locus(const char *const env[], ...)
{
    va_list arguments;
    va_start(arguments, env);
    const char *first = va_arg(arguments, const char *);
    command_result result = run_logged(locus_path, env, first, arguments);
    va_end(arguments);
    return result;
}

/* What torchvision's definitions give, counted independently of the
 * tables' layout: convs, stride-2 convs, depthwise convs, multiply-adds
 * at batch 1 (torchvision's model card: 4.09 and 0.30 GFLOPS, counting
 * multiply-adds and including the classifier's 2.05 M and 1.28 M). */
typedef struct net_facts {
    const char *name;
    unsigned convs, strided, depthwise, rows_at_least;
    double macs_low, macs_high;
} net_facts;

static const net_facts facts[] = {
    {"resnet50", 53, 7, 0, 20, 4.07e9, 4.10e9},
    {"mobilenetv2", 52, 5, 17, 30, 0.295e9, 0.302e9},
};

static void check_facts(const net_facts *want)
{
    const bench_net *net = bench_net_find(want->name);
    if (!expect(net != NULL, "%s: no such network", want->name))
        return;
    char why[256] = "";
    expect(bench_net_check(net, why, sizeof(why)), "%s: %s", want->name, why);
    unsigned convs = 0, strided = 0, depthwise = 0;
    double macs = 0.0;
    for (size_t i = 0; i < net->layer_count; ++i) {
        const bench_net_layer *layer = &net->layers[i];
        size_t p = 0, q = 0;
        expect(bench_net_layer_output(layer, &p, &q), "%s: no output",
               layer->name);
        /* The library's formula agrees with the table's. */
        locus_conv2d_desc desc;
        bench_net_layer_desc(layer, 1, LOCUS_DTYPE_F32, LOCUS_MATH_FP32, &desc);
        size_t lp = 0, lq = 0;
        expect(locus_conv2d_output_shape(&desc, &lp, &lq) == LOCUS_SUCCESS &&
                   lp == p && lq == q,
               "%s: locus_conv2d_output_shape gives %zux%zu, table %zux%zu",
               layer->name, lp, lq, p, q);
        expect(layer->bias && layer->dilation == 1 &&
                   layer->pad_top == layer->pad_bottom &&
                   layer->pad_left == layer->pad_right &&
                   layer->pad_top == layer->kernel_height / 2,
               "%s: torchvision pads k/2 on each side, dilation 1, and the "
               "folded batch norm gives a bias",
               layer->name);
        convs += layer->count;
        strided += layer->stride == 2 ? layer->count : 0;
        depthwise += layer->groups > 1 && layer->groups == layer->channels &&
                             layer->filters == layer->channels
                         ? layer->count
                         : 0;
        macs += (double)layer->count * (double)p * (double)q *
                (double)layer->filters *
                (double)(layer->channels / layer->groups) *
                (double)(layer->kernel_height * layer->kernel_width);
    }
    expect(convs == want->convs, "%s: %u convs, not %u", want->name, convs,
           want->convs);
    expect(strided == want->strided, "%s: %u stride-2 convs, not %u",
           want->name, strided, want->strided);
    expect(depthwise == want->depthwise, "%s: %u depthwise convs, not %u",
           want->name, depthwise, want->depthwise);
    expect(net->layer_count >= want->rows_at_least, "%s: only %zu rows",
           want->name, net->layer_count);
    expect(macs >= want->macs_low && macs <= want->macs_high,
           "%s: %.4g multiply-adds, torchvision's are in [%.4g, %.4g]",
           want->name, macs, want->macs_low, want->macs_high);
}

/* A copy of a table with one field broken must fail the check. */
static void check_breakage(const char *name, size_t row, int field)
{
    const bench_net *net = bench_net_find(name);
    bench_net_layer *copy = malloc(net->layer_count * sizeof(*copy));
    memcpy(copy, net->layers, net->layer_count * sizeof(*copy));
    bench_net broken = *net;
    broken.layers = copy;
    switch (field) {
    case 0:
        copy[row].stride = copy[row].stride == 1 ? 2 : 1;
        break;
    case 1:
        copy[row].count += 1;
        break;
    default:
        copy[row].filters *= 2;
        break;
    }
    char why[256] = "";
    expect(!bench_net_check(&broken, why, sizeof(why)),
           "%s: row %zu with field %d broken still passes", name, row, field);
    free(copy);
}

static void case_tables(void)
{
    for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); ++i)
        check_facts(&facts[i]);
    expect(bench_net_find("vgg16") == NULL, "an unknown network is found");
    const char *names[] = {"resnet50", "mobilenetv2"};
    for (int n = 0; n < 2; ++n) {
        const bench_net *net = bench_net_find(names[n]);
        for (size_t row = 0; row < net->layer_count; ++row)
            for (int field = 0; field < 3; ++field)
                check_breakage(names[n], row, field);
    }
}

static const char *string_of(const json_value *object, const char *key)
{
    const json_value *value = json_get(object, key);
    return json_is(value, JSON_STRING) ? value->string : NULL;
}

static double number_of(const json_value *object, const char *key)
{
    const json_value *value = json_get(object, key);
    return json_is(value, JSON_NUMBER) ? value->number : -1.0;
}

/* The rows of one run as JSON: each layer once, counts adding up, and
 * per row either a measurement or a NOT_SUPPORTED with a reason; the
 * reference either measured or with a reason. */
static json_value *check_rows(command_result *result, const char *net,
                              size_t batch, unsigned convs, bool must_measure)
{
    char error[256];
    json_value *root =
        json_parse(result->out, result->out_length, error, sizeof(error));
    if (!expect(root != NULL, "%s: stdout is not JSON: %s", net, error))
        return NULL;
    expect(string_of(root, "command") != NULL &&
               strcmp(string_of(root, "command"), "bench net") == 0,
           "%s: command is not \"bench net\"", net);
    const json_value *results = json_get(root, "results");
    size_t count = json_is(results, JSON_ARRAY) ? results->count : 0;
    unsigned counted = 0;
    for (size_t i = 0; i < count; ++i) {
        const json_value *row = json_at(results, i);
        counted += (unsigned)number_of(row, "count");
        const json_value *dims = json_get(row, "dims");
        expect(number_of(dims, "N") == (double)batch,
               "%s row %zu: N is not %zu", net, i, batch);
        const json_value *measured = json_get(row, "measured");
        bool ran = json_is(measured, JSON_BOOL) && measured->boolean;
        if (ran) {
            const json_value *passed = json_get(row, "passed");
            expect(json_is(passed, JSON_BOOL) && passed->boolean &&
                       number_of(row, "max_rel_err") <=
                           number_of(row, "tolerance") &&
                       number_of(row, "seconds") > 0.0,
                   "%s row %zu: measured but not passed", net, i);
        } else {
            const char *status = string_of(row, "status");
            expect(!must_measure, "%s row %zu: not measured on the cpu", net,
                   i);
            expect(status != NULL &&
                       strcmp(status, "LOCUS_ERROR_NOT_SUPPORTED") == 0 &&
                       string_of(row, "reason") != NULL,
                   "%s row %zu: refused without NOT_SUPPORTED and a reason",
                   net, i);
        }
        expect(json_is(json_get(row, "reference"), JSON_OBJECT) ||
                   string_of(row, "reference_reason") != NULL,
               "%s row %zu: no reference and no reason", net, i);
    }
    expect(counted == convs, "%s: the rows count %u convs, not %u", net,
           counted, convs);
    const json_value *networks = json_get(root, "networks");
    const json_value *total = json_at(networks, 0);
    expect(json_is(total, JSON_OBJECT) &&
               number_of(total, "conv_layers") == (double)convs,
           "%s: no networks entry of %u convs", net, convs);
    if (must_measure)
        expect(number_of(total, "locus_convs") == (double)convs &&
                   number_of(total, "locus_seconds") > 0.0,
               "%s: the whole network was not measured", net);
    return root;
}

static void case_cpu_json(void)
{
    int before = failures;
    command_result result =
        run_locus(NULL, "bench", "conv", "--net", "mobilenetv2", "--batch", "2",
                  "--repeat", "1", "--device", "cpu", "--json", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    json_free(check_rows(&result, "mobilenetv2", 2, 52, true));
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_cpu_text(void)
{
    int before = failures;
    command_result result =
        run_locus(NULL, "bench", "conv", "--net", "resnet50", "--repeat", "1",
                  "--device", "cpu", NULL);
    expect(result.exit_status == 0, "exit status %d", result.exit_status);
    expect(strstr(result.out, "layer4.0.downsample.0") != NULL &&
               strstr(result.out, "locus") != NULL &&
               strstr(result.out, "(53 of 53 convs)") != NULL,
           "the table lacks a layer or the whole network's 53 convs");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

/* The fake module's device has no conv features: every layer is listed
 * as not offered, nothing crashes, and having measured nothing is the
 * command's failure (1), not a usage error. */
static void case_refused(void)
{
    const char *dir = getenv("LOCUS_TEST_FAKE_MODULE");
    if (dir == NULL) {
        printf("LOCUS_TEST_FAKE_MODULE not set\n");
        failures++;
        return;
    }
    char plugin[1024];
    snprintf(plugin, sizeof(plugin), "LOCUS_PLUGIN_PATH=%s", dir);
    const char *env[] = {plugin, NULL};
    int before = failures;
    command_result result =
        run_locus(env, "bench", "conv", "--net", "mobilenetv2", "--repeat", "1",
                  "--device", "cuda:0", "--json", NULL);
    expect(result.exit_status == 1, "exit status %d, not 1",
           result.exit_status);
    json_free(check_rows(&result, "mobilenetv2", 1, 52, false));
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void expect_usage(const char *what, const char *a, const char *b,
                         const char *c, const char *d)
{
    int before = failures;
    command_result result = run_locus(NULL, "bench", a, b, c, d, NULL);
    expect(result.exit_status == 2, "%s: exit status %d, not 2", what,
           result.exit_status);
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static void case_usage(void)
{
    expect_usage("unknown network", "conv", "--net", "vgg16", NULL);
    expect_usage("not conv", "gemm", "--net", "resnet50", NULL);
    expect_usage("batch 0", "conv", "--net", "resnet50", "--batch=0");
    expect_usage("bf16", "conv", "--net", "resnet50", "--dtype=bf16");
    expect_usage("with --size", "conv", "--net", "resnet50", "--size=1");
    expect_usage("no value", "conv", "--batch", "2", "--net");
    expect_usage("no selector", "conv", "--net=resnet50", "--device",
                 "cpu:bogus");
    int before = failures;
    command_result result =
        run_locus(NULL, "bench", "conv", "--net", "x", "--help", NULL);
    expect(result.exit_status == 2, "--net x --help: %d", result.exit_status);
    command_result_free(&result);
    result =
        run_locus(NULL, "bench", "conv", "--help", "--net", "resnet50", NULL);
    expect(result.exit_status == 0 && strstr(result.out, "--batch") != NULL,
           "--help with --net does not show the --net usage");
    show_output_if_failed(before, &result);
    command_result_free(&result);
}

static const cli_case cases[] = {
    {"tables", case_tables},     {"cpu-json", case_cpu_json},
    {"cpu-text", case_cpu_text}, {"refused", case_refused},
    {"usage", case_usage},
};

int main(int argc, char **argv)
{
    return run_named_case(argc, argv, &locus_path, cases,
                          sizeof cases / sizeof cases[0]);
}
