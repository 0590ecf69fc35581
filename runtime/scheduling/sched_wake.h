/* The cost model's wake term (docs/SCHEDULER.md): what an op on a worker
 * pool pays to wake it, by the pool's state (spinning, shallowly or
 * deeply asleep), and the prewake that keeps a loop of ops from locking
 * the CPU out. Split from sched.c, which asks these once per decision. */
#ifndef LOCUS_RUNTIME_SCHED_WAKE_H
#define LOCUS_RUNTIME_SCHED_WAKE_H

#include <stddef.h>
#include <stdint.h>

#include "calibration.h"
#include "scheduler.h"

/* Bits per device ordinal: whose pool workers an op would have to wake,
 * and of those whose sleep deeply. */
typedef struct locus__sleepers {
    uint64_t asleep, deep;
} locus__sleepers;

/* Adds the device's bits for an op of this cost now: none when its pool
 * spins, or the op runs on the calling thread, or it has no pool. */
void locus__sleepers_add(locus__sleepers *s, locus_context *context,
                         const locus_device *device,
                         const locus__op_cost *cost);
/* Every device's, read once per decision, so that the estimates, the
 * record, the explanation and the memo's key agree even when a worker
 * falls asleep meanwhile. */
locus__sleepers locus__sleepers_now(locus_context *context,
                                    const locus__op_cost *cost);
locus__sleepers locus__choice_sleepers(const locus__choice *choice);
/* What waking the device's pool adds to its estimate. */
double locus__wake_term(const locus__rates *rates, const locus_device *device,
                        locus__sleepers s);
/* " (0.1 ms of it waking the workers from a deep sleep)" when the
 * candidate's estimate includes the wake-up of its pool, else "". */
void locus__wake_note(locus_context *context, const locus_device *device,
                      locus__sleepers s, char *note, size_t size);
/* After a decision: wakes, without a job, the pool of a device that lost
 * only by its deep sleep (see sched_wake.c). */
void locus__prewake_if_locked_out(locus_context *context,
                                  const locus__choice *choice);

#endif
