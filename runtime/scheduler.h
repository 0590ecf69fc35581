/* Device choice for ops given no device. */
#ifndef LOCUS_RUNTIME_SCHED_H
#define LOCUS_RUNTIME_SCHED_H

#include "buffer.h"
#include "context.h"

typedef enum locus__op_kind {
    LOCUS__OP_REDUCE,
    LOCUS__OP_GEMM,
    LOCUS__OP_CONV2D,
} locus__op_kind;

bool locus__device_offers(const locus_device *device, locus__op_kind op);

/* What one op asks of a device, for the cost model. */
typedef struct locus__op_cost {
    locus__op_kind op;
    double flops;
    double bytes;
    locus_buffer *const *inputs; /* buffers the op reads */
    size_t input_count;
} locus__op_cost;

/* The device an op without one runs on: the first LOCUS_DEVICE item that
 * matches a device offering the op, else (or for `auto`) the cheapest by the
 * cost model. With LOCUS_STRICT=1 an unmatched item is an error. */
locus_status locus__sched_choose(locus_context *context,
                                 const locus__op_cost *cost,
                                 locus_device **out);
/* The rate, in flop/s, at which a device runs an op of this kind at large
 * sizes: the calibrated figure once calibration has run, else a nominal
 * one. The multi-device split weighs its row blocks by it. */
double locus__sched_rate(locus_context *context, locus_device *device,
                         locus__op_kind op);
/* What "auto" names without an op: the device a large gemm would go to. */
locus_device *locus__sched_default_device(locus_context *context);

#endif
