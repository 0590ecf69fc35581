#include "scheduler.h"

#include <string.h>

#include "device.h"
#include "status.h"

/* Nominal rates until calibration measures them (a later issue): modest
 * figures for each kind of device, so that the order of the choices is right
 * for the usual cases: a small op stays on the host, a large matmul goes to
 * a GPU, and data already on a device weighs toward it. */
typedef struct nominal_rates {
    double flops_per_second_per_unit;
    double bytes_per_second;
    double launch_seconds;
    double link_bytes_per_second; /* host <-> device; 0: host memory */
} nominal_rates;

static nominal_rates rates_of(const locus_device *device)
{
    bool is_cuda = strcmp(device->backend->name, "cuda") == 0;
    bool is_cpu_backend = device->backend->table->host_memory != 0;
    if (is_cpu_backend)
        return (nominal_rates){8e9, 10e9, 5e-6, 0};
    if (device->info.kind == LOCUS_DEVICE_GPU)
        return (nominal_rates){is_cuda ? 128e9 : 64e9, 1e12,
                               is_cuda ? 10e-6 : 30e-6, 12e9};
    /* An OpenCL CPU device shares the cores with our workers. */
    return (nominal_rates){4e9, 10e9, 50e-6, 10e9};
}

bool locus__device_offers(const locus_device *device, locus__op_kind op)
{
    const locus_backend *table = device->backend->table;
    switch (op) {
    case LOCUS__OP_REDUCE:
        return table->reduce != NULL;
    case LOCUS__OP_GEMM:
        return table->gemm != NULL;
    case LOCUS__OP_CONV2D:
        return table->conv2d != NULL;
    }
    return false;
}

static double stale_input_bytes(const locus_device *device,
                                const locus__op_cost *cost)
{
    uint64_t bit = device->backend->table->host_memory
                       ? LOCUS__HOST_COPY
                       : UINT64_C(1) << (device->ordinal + 1);
    double bytes = 0;
    for (size_t i = 0; i < cost->input_count; i++) {
        locus_buffer *buffer = cost->inputs[i];
        pthread_mutex_lock(&buffer->state_lock);
        if (!(buffer->valid & bit))
            bytes += (double)buffer->bytes;
        pthread_mutex_unlock(&buffer->state_lock);
    }
    return bytes;
}

static double estimate_seconds(const locus_device *device,
                               const locus__op_cost *cost)
{
    nominal_rates rates = rates_of(device);
    int units = device->info.compute_units > 0 ? device->info.compute_units : 1;
    double compute = cost->flops / (rates.flops_per_second_per_unit * units);
    double memory = cost->bytes / rates.bytes_per_second;
    double transfer = 0;
    double stale = stale_input_bytes(device, cost);
    if (rates.link_bytes_per_second > 0)
        transfer = stale / rates.link_bytes_per_second;
    return rates.launch_seconds + (compute > memory ? compute : memory) +
           transfer;
}

double locus__sched_rate(locus_context *context, locus_device *device,
                         locus__op_kind op)
{
    (void)context;
    (void)op;
    nominal_rates rates = rates_of(device);
    int units = device->info.compute_units > 0 ? device->info.compute_units : 1;
    return rates.flops_per_second_per_unit * units;
}

static locus_device *cheapest(locus_context *context,
                              const locus__op_cost *cost)
{
    locus_device *best = NULL;
    double best_seconds = 0;
    for (size_t d = 0; d < context->device_count; d++) {
        locus_device *device = &context->devices[d];
        if (!locus__device_offers(device, cost->op))
            continue;
        double seconds = estimate_seconds(device, cost);
        if (!best || seconds < best_seconds) {
            best = device;
            best_seconds = seconds;
        }
    }
    return best;
}

locus_status locus__sched_choose(locus_context *context,
                                 const locus__op_cost *cost, locus_device **out)
{
    const locus__selector_list *list = &context->config.device;
    bool any_auto = false;
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].kind == LOCUS__SELECT_AUTO) {
            any_auto = true;
            break;
        }
        locus_device *device = locus__device_match(context, &list->items[i]);
        if (device && locus__device_offers(device, cost->op)) {
            *out = device;
            return LOCUS_SUCCESS;
        }
    }
    if (!any_auto) {
        const char *raw = context->config.settings[LOCUS__SET_DEVICE].raw;
        if (context->config.strict)
            return locus__fail(LOCUS_ERROR_DEVICE_UNAVAILABLE,
                               "LOCUS_DEVICE='%s' names no available device "
                               "that offers this op, and LOCUS_STRICT=1",
                               raw ? raw : "");
        locus__log(context, LOCUS_LOG_WARN,
                   "LOCUS_DEVICE='%s' names no available device that offers "
                   "this op; choosing automatically",
                   raw ? raw : "");
    }
    locus_device *device = cheapest(context, cost);
    if (!device)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "no available device offers this op");
    *out = device;
    return LOCUS_SUCCESS;
}

locus_device *locus__sched_default_device(locus_context *context)
{
    /* A 2048^3 gemm with its inputs on the host. */
    locus__op_cost cost = {LOCUS__OP_GEMM, 2.0 * 2048 * 2048 * 2048,
                           3.0 * 4 * 2048 * 2048, NULL, 0};
    locus_device *device = cheapest(context, &cost);
    if (!device && context->device_count > 0)
        device = &context->devices[0];
    return device;
}
