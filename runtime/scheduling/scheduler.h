/* Device choice for ops given no device, and the fallback after a failure. */
#ifndef LOCUS_RUNTIME_SCHED_H
#define LOCUS_RUNTIME_SCHED_H

#include "buffer.h"
#include "context_types.h"

/* The public locus_op_kind's values, which backends are asked about. */
typedef enum locus__op_kind {
    LOCUS__OP_REDUCE = LOCUS_OP_REDUCE,
    LOCUS__OP_GEMM = LOCUS_OP_GEMM,
    LOCUS__OP_CONV2D = LOCUS_OP_CONV2D,
} locus__op_kind;
#define LOCUS__OP_KINDS 3

typedef struct locus__op_cost locus__op_cost;

/* What the cost model knows of one kind of op. Each kind's model is part
 * of its entry of the op table (ops/ops_<kind>.c, the op's whole
 * description); the scheduler is handed it with each op's cost and never
 * looks a kind up. */
typedef struct locus__op_model {
    locus__op_kind kind;
    const char *name; /* the record's op, and the messages' */
    /* Whether a backend has the op at all (its table's function). */
    bool (*backend_has)(const locus_backend *table);
    /* The features (a kind's own bits: conv2d's LOCUS_CONV_FEATURE_*)
     * a backend offers beyond the op's plain form; NULL: none. */
    unsigned (*backend_features)(const locus_backend *table);
    /* The time the op's work takes on a device's figures, past the
     * launch and before any copies. */
    double (*compute_seconds)(const locus_backend_rates *rates,
                              const locus__op_cost *cost);
    /* Its work is its bytes (a reduce: the backends' inline_bytes apply)
     * rather than its flops (inline_flops). */
    bool work_in_bytes;
} locus__op_model;

/* Whether the device offers the op with this algorithm (conv2d's; 0 for
 * the others) and dtype: its backend has the op's function and, where it
 * answers, says so (backend.h, offers). */
bool locus__device_offers_variant(const locus_device *device,
                                  const locus__op_model *op, int algorithm,
                                  locus_dtype dtype);
/* The op in its default form: algorithm 0 (conv2d's auto), f32. */
bool locus__device_offers(const locus_device *device,
                          const locus__op_model *op);

/* A compute rate for a dtype: the dtype's own figure where one is known,
 * else derived from the f32 one (backend.h, locus_backend_rates). */
static inline double locus__rate_in_dtype(double f32, double f64, double half,
                                          locus_dtype dtype)
{
    switch (dtype) {
    case LOCUS_DTYPE_F64:
        return f64 > 0 ? f64 : f32 / 2;
    case LOCUS_DTYPE_BF16:
    case LOCUS_DTYPE_F16:
        return half > 0 ? half : f32;
    case LOCUS_DTYPE_F32:
        break;
    }
    return f32;
}

/* What one op asks of a device, for the cost model. */
struct locus__op_cost {
    const locus__op_model *op;
    double flops;
    double bytes;                /* the fewest bytes the op moves */
    locus_buffer *const *inputs; /* buffers the op reads */
    size_t input_count;
    double output_bytes; /* what returns to the host when the data came
                            from there */
    /* What the devices must offer: conv2d's algorithm (0, auto, for the
     * others) and the dtype (0 reads as f32). */
    int algorithm;
    locus_dtype dtype;
    /* What the request uses beyond the op's plain form (conv2d's
     * LOCUS_CONV_FEATURE_*, 0 for the others): a device must offer all. */
    unsigned features;
};

static inline locus_dtype locus__cost_dtype(const locus__op_cost *cost)
{
    return cost->dtype ? cost->dtype : LOCUS_DTYPE_F32;
}

/* The features of the cost that the device's backend does not offer. */
unsigned locus__device_lacks_features(const locus_device *device,
                                      const locus__op_cost *cost);

/* Whether the device offers what the cost describes. */
static inline bool locus__device_offers_cost(const locus_device *device,
                                             const locus__op_cost *cost)
{
    return locus__device_offers_variant(device, cost->op, cost->algorithm,
                                        locus__cost_dtype(cost)) &&
           locus__device_lacks_features(device, cost) == 0;
}

/* "conv2d algorithm winograd", "gemm in f64", "conv2d with groups": the
 * op as the messages name what a device does not offer (the features it
 * lacks, where it lacks any). */
void locus__op_variant_name(const locus__op_cost *cost, char *text,
                            size_t capacity);

/* Who chose an op's device. */
typedef enum locus__chosen_by {
    LOCUS__CHOSEN_BY_NONE,        /* no device ran it (a quick return) */
    LOCUS__CHOSEN_BY_CALLER,      /* the op's device argument */
    LOCUS__CHOSEN_BY_ENVIRONMENT, /* an item of LOCUS_DEVICE */
    LOCUS__CHOSEN_BY_MODEL,       /* the cost model (auto) */
    LOCUS__CHOSEN_BY_FALLBACK,    /* the next device after a failure */
} locus__chosen_by;

/* The record's chosen_by: "none", "caller", "LOCUS_DEVICE", "auto",
 * "fallback". */
static inline const char *locus__chosen_by_name(locus__chosen_by by)
{
    switch (by) {
    case LOCUS__CHOSEN_BY_NONE:
        return "none";
    case LOCUS__CHOSEN_BY_CALLER:
        return "caller";
    case LOCUS__CHOSEN_BY_ENVIRONMENT:
        return "LOCUS_DEVICE";
    case LOCUS__CHOSEN_BY_MODEL:
        return "auto";
    case LOCUS__CHOSEN_BY_FALLBACK:
        return "fallback";
    }
    return "";
}

/* A device and why: what the record carries. */
typedef struct locus__choice {
    locus_device *device;
    locus__chosen_by chosen_by;
    double estimated_seconds;
    size_t estimate_count; /* cheapest first */
    const locus_device *candidates[LOCUS_RECORD_MAX_ESTIMATES];
    double seconds[LOCUS_RECORD_MAX_ESTIMATES];
    /* Bit per device ordinal: whose pool workers the estimates found asleep
     * (their wake-up included), and of those whose slept deeply (the full
     * wake-up, else the shallow one), read once for the whole decision. */
    uint64_t asleep;
    uint64_t deep;
} locus__choice;

/* Fills the record's chosen_by and estimates from the choice: only when a
 * record is wanted (formatting selectors costs more than choosing). */
void locus__choice_to_record(const locus__choice *choice, locus_record *record);

/* The device an op without one runs on: the first LOCUS_DEVICE item that
 * matches a device offering the op, else (or for `auto`) the cheapest by the
 * cost model. With LOCUS_STRICT=1 an unmatched item is an error. */
locus_status locus__sched_choose(locus_context *context,
                                 const locus__op_cost *cost,
                                 locus__choice *out);
/* Forgets the remembered choices (their rates changed: a probe or a
 * recalibration). */
void locus__sched_forget(locus_context *context);
/* After the devices in failed_mask (bits by ordinal) failed the op: the
 * cheapest other device offering it, or false when there is none. */
bool locus__sched_fallback(locus_context *context, const locus__op_cost *cost,
                           uint64_t failed_mask, locus__choice *out);
/* The model's estimate of the op on one device, as things stand now (the
 * wake-up of its pool's workers included when they are asleep). */
double locus__sched_estimate(locus_context *context, locus_device *device,
                             const locus__op_cost *cost);
/* The model of one block of a row-split gemm on a device: fixed + rows *
 * per_row seconds. B moves whole (unless current there) and belongs to the
 * fixed part with the launch; A's and C's rows move per row (C both ways
 * when c_read), as do the row's flops. On the CPU, B is packed whole (the
 * fixed part), and a block of fewer than min_rows rows leaves workers idle
 * yet takes as long as min_rows would (min_rows is 0 elsewhere). For
 * locus_gemm_split's plan. */
void locus__sched_gemm_rows(locus_context *context, locus_device *device,
                            const locus_gemm_desc *desc, locus_buffer *b,
                            bool c_read, double *fixed, double *per_row,
                            double *min_rows);
/* What "auto" names without an op: the device a large op of this cost
 * (from the host) would go to, by nominal figures. */
locus_device *locus__sched_default_device(locus_context *context,
                                          const locus__op_cost *cost);

#endif
