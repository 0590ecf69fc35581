/* The context and its devices as every part of the runtime sees them: what
 * the context owns and how the parts reach each other. Their life cycle is
 * context.c, which stands above the parts it assembles; this header stands
 * below them all, so that including it imports none of context.c. */
#ifndef LOCUS_RUNTIME_CONTEXT_TYPES_H
#define LOCUS_RUNTIME_CONTEXT_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include <locus/backend.h>

#include "env.h"
#include "local_rank.h"
#include "log.h"
#include "plugin.h"
#include "pool.h"
#include "topology.h"

/* Device copies are tracked in a 64-bit valid mask: bit 0 is the host copy,
 * bit 1 + ordinal a device's own memory. */
#define LOCUS__MAX_DEVICES 63

struct locus_device {
    locus_context *context;
    locus__backend_slot *backend;
    size_t index_in_backend;
    int ordinal; /* position in the context's device list */
    locus_device_info info;
    /* The cost model's figures, written under the context's
     * calibration_lock and read without it through a sequence lock
     * (rates_sequence odd while they change; calibration.c). */
    locus_backend_rates rates;
    int rates_source; /* locus__rates_source */
    unsigned rates_sequence;
    bool probe_tried; /* a probe was attempted: never retried */
};

/* The scheduler's last automatic choice for one kind of op, and what it
 * depended on (sched.c): the model is a function of these alone (the
 * pool's sleep among them) once the devices are calibrated, so the same
 * question gets the answer again without weighing every device, which after GPU
 * work has cooled the caches costs microseconds, as much as a tiny op. */
#define LOCUS__MEMO_INPUTS 3
typedef struct locus__choice_memo {
    bool valid;
    double flops, bytes, output_bytes;
    int algorithm; /* what the devices offer depends on these too */
    locus_dtype dtype;
    unsigned features;
    size_t input_count;
    uint64_t masks[LOCUS__MEMO_INPUTS];
    size_t sizes[LOCUS__MEMO_INPUTS];
    uint64_t asleep; /* devices whose pool workers were asleep */
    uint64_t deep;   /* of those, whose were deeply asleep */
    size_t count;
    locus_device *device;
    double estimated_seconds;
    const locus_device *candidates[LOCUS_RECORD_MAX_ESTIMATES];
    double seconds[LOCUS_RECORD_MAX_ESTIMATES];
} locus__choice_memo;

struct locus_context {
    locus__config config;
    locus__topology topology;
    locus__pool *pool;
    locus__local_rank_map local_rank; /* MPI local rank and its cpu share */
    locus_services services;

    size_t backend_count;
    locus__backend_slot backends[LOCUS__MAX_BACKENDS];

    size_t device_count;
    locus_device devices[LOCUS__MAX_DEVICES];

    pthread_mutex_t record_lock;
    pthread_mutex_t calibration_lock;
    pthread_mutex_t memo_lock;
    locus__choice_memo memo[3]; /* by locus__op_kind (sched.c checks) */
    /* LOCUS_RECORD, opened O_APPEND: each record is one write() of a
     * whole line (record.c); -1 when none. */
    int record_fd;
    /* Buffers and queues not yet destroyed: while any is, the context
     * refuses to be destroyed (their destroy calls use its devices). */
    atomic_size_t live_buffers;
    atomic_size_t live_queues;
};

/* The context's LOCUS_LOG level; with no context every level is logged. */
static inline locus_log_level locus__log_threshold(const locus_context *context)
{
    return context ? context->config.log_level : LOCUS_LOG_DEBUG;
}

/* Logs through log.c at the context's LOCUS_LOG level. */
#define locus__log(context, level, ...)                                        \
    locus__log_at(locus__log_threshold(context), (level), __VA_ARGS__)

#endif
