/* The plan of a gemm split over several devices: the checks of a split
 * call, and how many of C's rows each device gets, from the caller's
 * weights or the scheduler's cost model. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "buffer.h"
#include "device.h"
#include "gemm_split.h"
#include "ops.h"
#include "scheduler.h"
#include "status.h"

static locus_status check_devices(locus_context *context,
                                  locus_device *const *devices, size_t count)
{
    if (count == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device_count is 0: a split needs at least one "
                           "device");
    if (count > LOCUS__MAX_DEVICES)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device_count %zu is more than a context has (%d)",
                           count, LOCUS__MAX_DEVICES);
    for (size_t i = 0; i < count; i++) {
        const locus_device *device = devices[i];
        if (!device)
            return locus__fail(LOCUS_ERROR_NULL_ARGUMENT,
                               "devices[%zu] is NULL", i);
        if (device->context != context)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "devices[%zu] (%s) belongs to another context",
                               i, device->info.selector);
        for (size_t j = 0; j < i; j++)
            if (devices[j] == device)
                return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                   "devices[%zu] and devices[%zu] are both "
                                   "%s: list each device once",
                                   j, i, device->info.selector);
        if (!locus__device_offers(device, &locus__gemm_op.model))
            return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                               "gemm is not supported on devices[%zu], %s "
                               "(%s)",
                               i, device->info.selector, device->info.name);
    }
    return LOCUS_SUCCESS;
}

/* Two devices that are views of one piece of hardware (the same PCI
 * address: cuda:0 and NVIDIA's OpenCL opencl:1 on the H200 machine) are
 * one device to the plan: of each such group, only the view the model
 * expects to do the whole problem soonest (fixed + m * per_row; the
 * earlier in the caller's order on a tie) stays in, the others get no
 * rows. The two views are two driver contexts on one GPU: their blocks do
 * not add compute, they take turns on the same SMs and copy engines, and
 * the model, which sees two independent rates, would give the slower view
 * rows that only delay the faster one. On the H200 at 8192^3 the plan
 * gave opencl:1 31 rows and cuda:0 8161, and the split ran at 0.81x of
 * cuda:0 alone. Given weights are the caller's own plan and are kept. */
static void keep_one_view_per_hardware(locus_context *context,
                                       locus_device *const *devices,
                                       size_t count, double m,
                                       const double *fixed,
                                       const double *per_row, bool *used)
{
    for (size_t i = 0; i < count; i++) {
        for (size_t j = i + 1; used[i] && j < count; j++) {
            if (!used[j] ||
                !locus__device_same_hardware(devices[i], devices[j]))
                continue;
            double alone_i = fixed[i] + m * per_row[i];
            double alone_j = fixed[j] + m * per_row[j];
            size_t out = alone_j < alone_i ? i : j;
            size_t kept = out == i ? j : i;
            used[out] = false;
            locus__log(context, LOCUS_LOG_INFO,
                       "gemm split: %s and %s are one device (PCI %s); %s "
                       "(alone %.3g s) planned out, %s (alone %.3g s) keeps "
                       "the rows: two contexts on one GPU contend",
                       devices[i]->info.selector, devices[j]->info.selector,
                       devices[i]->info.pci_bus_id, devices[out]->info.selector,
                       out == i ? alone_i : alone_j,
                       devices[kept]->info.selector,
                       kept == i ? alone_i : alone_j);
        }
    }
}

/* The default shares: the scheduler models a block of r rows on device i
 * as fixed_i + r * per_row_i (B moved whole is fixed; A's and C's rows and
 * the flops are per row), and the plan finds the finishing time T at which
 * the blocks that fit, max(0, (T - fixed_i) / per_row_i), add up to m: all
 * devices finish together, and a device whose fixed cost alone is past T
 * gets nothing. A plain proportional split by throughput would give a slow
 * device that must first move all of B far too many rows. */
static locus_status model_shares(locus_context *context,
                                 locus_device *const *devices, size_t count,
                                 const locus_gemm_desc *desc, locus_buffer *b,
                                 bool c_read, double *shares)
{
    double fixed[LOCUS__MAX_DEVICES], per_row[LOCUS__MAX_DEVICES];
    double min_rows[LOCUS__MAX_DEVICES];
    bool used[LOCUS__MAX_DEVICES];
    double m = (double)desc->m;
    for (size_t i = 0; i < count; i++) {
        locus__sched_gemm_rows(context, devices[i], desc, b, c_read, &fixed[i],
                               &per_row[i], &min_rows[i]);
        if (!(per_row[i] > 0) || !isfinite(fixed[i]))
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "the scheduler's model of %s gives no rate; "
                               "give weights",
                               devices[i]->info.selector);
        used[i] = true;
    }
    keep_one_view_per_hardware(context, devices, count, m, fixed, per_row,
                               used);
    /* A device whose block would be too small to keep its workers busy,
     * and which would then finish after the others, is left out and the
     * rest planned again: at most once per device. */
    for (size_t round = 0; round <= count; round++) {
        double low = INFINITY, high = 0;
        for (size_t i = 0; i < count; i++) {
            if (!used[i])
                continue;
            low = fixed[i] < low ? fixed[i] : low;
            double alone = fixed[i] + m * per_row[i];
            high = alone > high ? alone : high;
        }
        for (int step = 0; step < 100; step++) {
            double t = 0.5 * (low + high), rows = 0;
            for (size_t i = 0; i < count; i++)
                if (used[i] && t > fixed[i])
                    rows += (t - fixed[i]) / per_row[i];
            if (rows < m)
                low = t;
            else
                high = t;
        }
        size_t in_use = 0;
        for (size_t i = 0; i < count; i++)
            in_use += used[i];
        bool dropped = false;
        for (size_t i = 0; i < count; i++) {
            shares[i] =
                used[i] && high > fixed[i] ? (high - fixed[i]) / per_row[i] : 0;
            bool too_few = shares[i] > 0 && shares[i] < min_rows[i];
            if (too_few && in_use > 1 && !dropped &&
                fixed[i] + min_rows[i] * per_row[i] > high) {
                used[i] = false;
                dropped = true;
            }
        }
        if (!dropped)
            break;
    }
    return LOCUS_SUCCESS;
}

/* rows[i] for devices[i]: the boundaries between blocks are the weights'
 * cumulative shares of m, rounded, so the rows add up to m whatever the
 * rounding, and a weight of 0 always gets 0 rows. */
static locus_status plan_rows(locus_context *context,
                              locus_device *const *devices, size_t count,
                              const double *weights,
                              const locus_gemm_desc *desc, locus_buffer *b,
                              bool c_read, size_t *rows)
{
    size_t m = desc->m;
    double modelled[LOCUS__MAX_DEVICES];
    if (!weights) {
        locus_status status =
            model_shares(context, devices, count, desc, b, c_read, modelled);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    double scaled[LOCUS__MAX_DEVICES];
    double largest = 0;
    for (size_t i = 0; i < count; i++) {
        double w = weights ? weights[i] : modelled[i];
        if (!isfinite(w) || w < 0)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "weights[%zu] = %g: a weight is a finite "
                               "number, 0 or more",
                               i, w);
        scaled[i] = w;
        if (w > largest)
            largest = w;
    }
    if (largest == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "all %zu weights are 0: at least one device needs "
                           "a positive weight",
                           count);
    /* Scaled to at most 1 each, so that the total cannot overflow. */
    double total = 0;
    for (size_t i = 0; i < count; i++) {
        scaled[i] /= largest;
        total += scaled[i];
    }
    double cumulative = 0;
    size_t previous = 0;
    for (size_t i = 0; i < count; i++) {
        cumulative += scaled[i];
        size_t boundary = m;
        if (i + 1 < count) {
            double at = floor((double)m * (cumulative / total) + 0.5);
            boundary = at >= (double)m ? m : (size_t)at;
            if (boundary < previous)
                boundary = previous;
        }
        rows[i] = boundary - previous;
        previous = boundary;
    }
    return LOCUS_SUCCESS;
}

/* The plan of a gemm that reads neither A nor B (alpha or k 0: C = beta C,
 * a pass over C) or does nothing (m or n 0): no split, whose transfers
 * would cost more than the pass, but all rows to one device, which then
 * runs locus_gemm's own case: the first host-memory device among those of
 * a positive weight (C is on the host: the split reads it there), else
 * the first of a positive weight. The weights are still checked. */
static locus_status plan_whole(locus_device *const *devices, size_t count,
                               const double *weights, size_t m, size_t *rows)
{
    size_t chosen = count;
    for (size_t i = 0; i < count; i++) {
        double w = weights ? weights[i] : 1.0;
        if (!isfinite(w) || w < 0)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "weights[%zu] = %g: a weight is a finite "
                               "number, 0 or more",
                               i, w);
        if (w == 0)
            continue;
        if (chosen == count || (devices[i]->backend->table->host_memory &&
                                !devices[chosen]->backend->table->host_memory))
            chosen = i;
    }
    if (chosen == count)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "all %zu weights are 0: at least one device needs "
                           "a positive weight",
                           count);
    for (size_t i = 0; i < count; i++)
        rows[i] = i == chosen ? m : 0;
    return LOCUS_SUCCESS;
}

/* The buffers are pinned for each device that copies from them (as a
 * first copy through locus__buffer_acquire would), before the plan, whose
 * model assumes the pinned rates. */
static void pin_for_devices(locus_device *const *devices, size_t count,
                            locus_buffer *const *buffers)
{
    for (size_t i = 0; i < count; i++)
        if (!devices[i]->backend->table->host_memory)
            for (size_t j = 0; j < 3; j++)
                locus__buffer_pin_for(buffers[j], devices[i]);
}

locus_status locus__split_prepare(locus_context *context,
                                  locus_device *const *devices,
                                  size_t device_count, const double *weights,
                                  const locus_gemm_desc *desc, locus_buffer *a,
                                  locus_buffer *b, locus_buffer *c,
                                  const locus_record *record,
                                  locus__split_plan *plan)
{
    /* A, B or C may be NULL when it holds no elements, as in locus_gemm
     * (locus__gemm_check). */
    if (!context || !devices || !desc)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context   ? "context"
                           : !devices ? "devices"
                                      : "desc");
    locus_buffer *buffers[3] = {a, b, c};
    locus_status status = check_devices(context, devices, device_count);
    if (status == LOCUS_SUCCESS)
        status = locus__gemm_check(context, NULL, desc, a, b, c, record,
                                   &plan->desc, &plan->mn, &plan->mnk);
    if (status == LOCUS_SUCCESS)
        status = locus__check_buffer_contexts(context, buffers,
                                              locus__gemm_op.operand_names, 3);
    if (status == LOCUS_SUCCESS)
        status = locus__gemm_check_alias(a, b, c);
    if (status == LOCUS_SUCCESS && plan->desc.dtype != LOCUS_DTYPE_F32)
        status = locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                             "locus_gemm_split takes f32 only; locus_gemm "
                             "takes %s",
                             locus_dtype_str(plan->desc.dtype));
    if (status != LOCUS_SUCCESS)
        return status;
    const locus_gemm_desc *d = &plan->desc;
    if (locus__gemm_only_scales(d) || locus__gemm_does_nothing(d))
        return plan_whole(devices, device_count, weights, d->m, plan->rows);
    /* As locus_gemm: C is only written when beta is 0 and the op covers
     * every byte of its buffer; otherwise its other bytes are kept. */
    plan->c_write_only = d->beta == 0.0 && d->ldc == d->n &&
                         plan->mn * LOCUS__SPLIT_ELEMENT_BYTES == c->bytes;
    plan->bytes = (double)LOCUS__SPLIT_ELEMENT_BYTES *
                  ((double)d->m * (double)d->k + (double)d->k * (double)d->n +
                   (plan->c_write_only ? 1.0 : 2.0) * (double)plan->mn);
    pin_for_devices(devices, device_count, buffers);
    return plan_rows(context, devices, device_count, weights, d, b,
                     !plan->c_write_only, plan->rows);
}

LOCUS_API locus_status locus_gemm_split_rows(
    locus_context *context, locus_device *const *devices, size_t device_count,
    const double *weights, const locus_gemm_desc *desc, locus_buffer *a,
    locus_buffer *b, locus_buffer *c, size_t *rows)
{
    locus__clear_error();
    if (!rows)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "rows is NULL");
    locus__split_plan plan;
    locus_status status = locus__split_prepare(
        context, devices, device_count, weights, desc, a, b, c, NULL, &plan);
    if (status == LOCUS_SUCCESS)
        memcpy(rows, plan.rows, device_count * sizeof *rows);
    return status;
}
