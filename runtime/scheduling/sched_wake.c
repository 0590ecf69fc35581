#include "sched_wake.h"

#include <stdio.h>

#include "context_types.h"
#include "device.h"

/* Whether an op of this cost, on a device of a backend that runs on the
 * pool, goes to the pool: the backend runs a job below its inline
 * thresholds on the calling thread (by the op's bytes or its flops, as
 * its kind counts its work), which wakes nobody. */
static bool uses_pool(const locus_device *device, const locus__op_cost *cost)
{
    const locus_backend *table = device->backend->table;
    if (cost->op->work_in_bytes)
        return cost->bytes >= table->inline_bytes;
    return cost->flops >= table->inline_flops;
}

/* How the device's pool workers an op of this cost would find now:
 * spinning (or not needed) costs nothing to wake. */
static locus__pool_sleep sleep_state(locus_context *context,
                                     const locus_device *device,
                                     const locus__op_cost *cost)
{
    if (!locus__runs_on_pool(device) || !uses_pool(device, cost))
        return LOCUS__POOL_SPINNING;
    return locus__pool_sleep_state(context->pool, locus__pool_node_of(device));
}

static uint64_t ordinal_bit(const locus_device *device)
{
    return UINT64_C(1) << device->ordinal;
}

void locus__sleepers_add(locus__sleepers *s, locus_context *context,
                         const locus_device *device, const locus__op_cost *cost)
{
    locus__pool_sleep state = sleep_state(context, device, cost);
    if (state != LOCUS__POOL_SPINNING)
        s->asleep |= ordinal_bit(device);
    if (state == LOCUS__POOL_DEEP_ASLEEP)
        s->deep |= ordinal_bit(device);
}

/* The devices whose pool workers an op of this cost would have to wake
 * now. Read once per decision, so that the estimates, the record, the
 * explanation and the memo's key agree even when a worker falls asleep
 * meanwhile. */
locus__sleepers locus__sleepers_now(locus_context *context,
                                    const locus__op_cost *cost)
{
    locus__sleepers s = {0, 0};
    for (size_t d = 0; d < context->device_count; d++) {
        const locus_device *device = &context->devices[d];
        locus__sleepers_add(&s, context, device, cost);
    }
    return s;
}

/* What waking the device's pool workers adds, given the decision's look
 * at them: a job waits for its slowest rank, and a sleeping worker's core
 * may be in a light idle state (calibrated: shallow_wake_seconds) or, past
 * a millisecond, a deep one (wake_seconds). */
double locus__wake_term(const locus__rates *rates, const locus_device *device,
                        locus__sleepers s)
{
    if (s.deep & ordinal_bit(device))
        return rates->wake_seconds;
    if (s.asleep & ordinal_bit(device))
        return rates->shallow_wake_seconds;
    return 0;
}

locus__sleepers locus__choice_sleepers(const locus__choice *choice)
{
    return (locus__sleepers){choice->asleep, choice->deep};
}

/* " (0.1 ms of it waking the workers from a deep sleep)" when the
 * candidate's estimate includes the wake-up of its pool, else nothing. */
void locus__wake_note(locus_context *context, const locus_device *device,
                      locus__sleepers asleep, char *note, size_t size)
{
    note[0] = '\0';
    if (!(asleep.asleep & ordinal_bit(device)))
        return;
    /* Rates are settled: the device was estimated. */
    locus__rates figures;
    double wake = locus__wake_term(
        locus__device_rates(context, (locus_device *)device, &figures), device,
        asleep);
    if (wake > 0)
        snprintf(note, size, " (%.3g ms of it waking the workers from a %s)",
                 wake * 1e3,
                 (asleep.deep & ordinal_bit(device)) ? "deep sleep"
                                                     : "shallow sleep");
}

/* An op that went elsewhere only because a device's workers slept deeply
 * (with a shallow sleep's wake-up, that device would have won) wakes
 * them, without a job: they spin and then sleep only shallowly, so that
 * the next such op finds them so and can return to them. Without this, a
 * loop of such ops never used the pool again, which stayed deep asleep
 * and lost every op by its full wake-up (docs/SCHEDULER.md). */
void locus__prewake_if_locked_out(locus_context *context,
                                  const locus__choice *choice)
{
    if (!(choice->deep & ~ordinal_bit(choice->device)))
        return;
    for (size_t i = 0; i < choice->estimate_count; i++) {
        const locus_device *device = choice->candidates[i];
        if (device == choice->device || !(choice->deep & ordinal_bit(device)))
            continue;
        locus__rates figures;
        const locus__rates *rates =
            locus__device_rates(context, (locus_device *)device, &figures);
        double shallow = choice->seconds[i] - rates->wake_seconds +
                         rates->shallow_wake_seconds;
        if (shallow < choice->estimated_seconds)
            locus__pool_prewake(context->pool, locus__pool_node_of(device));
    }
}
