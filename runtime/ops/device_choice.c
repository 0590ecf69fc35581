/* The public questions of which device: the first a selector matches
 * ("auto" is the scheduler's default device), the one an op given none
 * runs on, and whether a device offers an op. They ask the scheduler about
 * ops of the op table, so they live with the ops, not with the device
 * list (device.c). */
#include <locus/locus.h>

#include "context_types.h"
#include "device.h"
#include "ops.h"
#include "scheduler.h"
#include "status.h"

/* What "auto" names without an op: where a 2048^3 f32 gemm with its
 * inputs on the host would go. */
static locus_device *default_device(locus_context *context)
{
    const double n = 2048;
    locus__op_cost cost = {.op = &locus__gemm_op.model,
                           .flops = 2 * n * n * n,
                           .bytes = 3 * 4 * n * n,
                           .dtype = LOCUS_DTYPE_F32};
    return locus__sched_default_device(context, &cost);
}

LOCUS_API locus_status locus_device_find(locus_context *context,
                                         const char *selector,
                                         locus_device **out)
{
    locus__clear_error();
    if (!context || !selector || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context    ? "context"
                           : !selector ? "selector"
                                       : "out");
    *out = NULL;
    locus__selector_list list;
    locus_status status = locus__parse_selector_list(selector, &list);
    if (status != LOCUS_SUCCESS)
        return status;
    for (size_t i = 0; i < list.count; i++) {
        char why[512];
        if (!locus__selector_valid(context, &list.items[i], why, sizeof why))
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "device selector '%s': %s", selector, why);
    }
    for (size_t i = 0; i < list.count; i++) {
        locus_device *device =
            list.items[i].is_auto
                ? default_device(context)
                : locus__device_match(context, &list.items[i]);
        if (device) {
            *out = device;
            return LOCUS_SUCCESS;
        }
    }
    return locus__fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                       "no device matches '%s' (run `locus info` to list "
                       "them)",
                       selector);
}

/* The same walk as locus__sched_choose's over the device list, less the
 * op's own check (whether the device offers it). */
LOCUS_API locus_status locus_default_device(locus_context *context,
                                            locus_device **out,
                                            locus_default_choice *how)
{
    locus__clear_error();
    if (!context || !out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           context ? "out" : "context");
    *out = NULL;
    locus_default_choice choice = LOCUS_DEFAULT_FALLBACK;
    const locus__selector_list *list = &context->config.device;
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].is_auto) {
            choice = LOCUS_DEFAULT_AUTO;
            break;
        }
        locus_device *device = locus__device_match(context, &list->items[i]);
        if (device) {
            *out = device;
            choice = LOCUS_DEFAULT_SELECTED;
            break;
        }
    }
    if (!*out)
        *out = default_device(context);
    if (how)
        *how = choice;
    if (!*out)
        return locus__fail(LOCUS_ERROR_DEVICE_NOT_FOUND,
                           "the context has no device");
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_device_offers(const locus_device *device,
                                           locus_op_kind op, int algorithm,
                                           locus_dtype dtype, int *offered)
{
    locus__clear_error();
    if (!device || !offered)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           device ? "offered" : "device");
    *offered = 0;
    if ((int)op < (int)LOCUS_OP_REDUCE || (int)op > (int)LOCUS_OP_CONV2D)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "op kind %d is unknown", (int)op);
    if (locus_dtype_size(dtype) == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "dtype %d is unknown",
                           (int)dtype);
    if (op == LOCUS_OP_CONV2D && (algorithm < (int)LOCUS_CONV_AUTO ||
                                  algorithm > (int)LOCUS_CONV_WINOGRAD))
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d algorithm %d is unknown", algorithm);
    const locus__op_model *model =
        &locus__op_type_of((locus__op_kind)op)->model;
    if (op != LOCUS_OP_CONV2D && algorithm != 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "%s has one algorithm: pass 0, not %d", model->name,
                           algorithm);
    *offered = locus__device_offers_variant(device, model, algorithm, dtype);
    return LOCUS_SUCCESS;
}
