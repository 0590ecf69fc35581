/* The ops' private interface. Every op goes through one life cycle
 * (ops.c): its buffers locked in one global order, their current copies
 * acquired where it runs, the backend called, the outputs marked written
 * (and wrapped ones copied back), the accounting resolved and the record
 * made. An op kind describes itself once, in an entry of the op table
 * (ops_reduce.c, ops_gemm.c, ops_conv.c): what the life cycle, the queues
 * and the records need to know of it. The gemm split (gemm_split.c) runs
 * the same life cycle on the host copies. */
#ifndef LOCUS_RUNTIME_OPS_H
#define LOCUS_RUNTIME_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <locus/locus.h>

#include "account.h"
#include "buffer.h"
#include "scheduler.h"

/* The dtype of an op's output: its inputs' own, f32 for the half types
 * (locus.h, locus_dtype). */
static inline locus_dtype locus__output_dtype(locus_dtype dtype)
{
    return dtype == LOCUS_DTYPE_BF16 || dtype == LOCUS_DTYPE_F16
               ? LOCUS_DTYPE_F32
               : dtype;
}

/* The most buffers one op takes (conv2d: input, filter, bias, output). */
#define LOCUS__OP_MAX_OPERANDS 4

typedef struct locus__op_run locus__op_run;

/* An op as a queue entry replays it: the entry's copy of the descriptor,
 * its buffers (the kind's operand_count of them, in the public call's
 * order), and where a reduce leaves its value (NULL for the others). */
typedef locus_status (*locus__op_call)(locus_context *context,
                                       locus_device *device, const void *desc,
                                       locus_buffer *const *buffers,
                                       double *result, locus_record *record);

/* One kind of op (or a variant of one, as gemm's C = beta C), described
 * once, in its file (ops_reduce.c, ops_gemm.c, ops_conv.c) beside its
 * checks: what the scheduler's cost model knows of it, its operands, its
 * backend call and its queue entry. */
typedef struct locus__op_type {
    locus__op_model model; /* its kind and name, and its costs */
    size_t operand_count;
    /* As the messages name them, in the public call's order. */
    const char *operand_names[LOCUS__OP_MAX_OPERANDS];
    /* The backend's part, given the operands' memory (run->operands), on
     * run->device: it fills the record's flops and bytes from args, the
     * kind's own struct that the entry point made. */
    locus_status (*launch)(locus__op_run *run, void *args);
    /* The public entry point, for queue entries. */
    locus__op_call call;
} locus__op_type;

extern const locus__op_type locus__reduce_op;
extern const locus__op_type locus__gemm_op;
extern const locus__op_type locus__conv2d_op;

/* The table's entry of a kind. */
const locus__op_type *locus__op_type_of(locus__op_kind kind);

/* One buffer an op uses, and how; memory is its copy where the op runs,
 * once acquired. buffer NULL: an optional operand left out (conv2d's
 * bias), which the life cycle skips; its memory stays NULL. */
typedef struct locus__operand {
    locus_buffer *buffer;
    locus__access access;
    void *memory;
} locus__operand;

/* One op on its way through the life cycle. An entry point fills in
 * context, type and operands (type->operand_count of them); the rest is
 * the life cycle's. */
struct locus__op_run {
    locus_context *context;
    const locus__op_type *type;
    locus__operand operands[LOCUS__OP_MAX_OPERANDS];
    /* Where the operands are acquired and marked written: the chosen
     * device, or NULL for the host copies themselves (the gemm split,
     * whose blocks move their own rows). */
    locus_device *device;
    locus_buffer *buffers[LOCUS__OP_MAX_OPERANDS]; /* for the accounting */
    locus_record record;
    locus__account account;
    locus_op_context op;
    double started;
    locus__choice choice;
    /* The device computed the op and its outputs were marked written
     * there: a failure after that (copying a wrapped output back) must not
     * run the op again elsewhere, where it would read its own result. */
    bool committed;
    /* A failure left the outputs as they were (the split, a transaction
     * until its write-back): their copies stay current. */
    bool outputs_untouched;
};

/* Readies a run for an entry point: its context, type and no operands
 * yet. Only what is read before the life cycle sets it is written: the
 * record, the accounting and the choice (a kilobyte and more) are filled
 * by choose and begin, and zeroing them first as well cost a small op
 * more than its checks. */
static inline void locus__op_run_start(locus__op_run *run,
                                       locus_context *context,
                                       const locus__op_type *type)
{
    run->context = context;
    run->type = type;
    for (size_t i = 0; i < LOCUS__OP_MAX_OPERANDS; i++)
        run->operands[i] = (locus__operand){NULL, 0, NULL};
    run->device = NULL;
    run->committed = false;
    run->outputs_untouched = false;
}

/* An output may not also be an input (memory compared): refused with the
 * operands' names. */
locus_status locus__op_check_aliasing(const locus__op_run *run);

/* Starts the op on run->choice.device (NULL: the host copies): the record
 * (op and device), the accounting, the locks, and each operand's current
 * copy there. On failure nothing is held. */
locus_status locus__op_begin(locus__op_run *run);

/* Ends what locus__op_begin started, after the op's status: marks the
 * outputs written (or failed, unless outputs_untouched), copies wrapped
 * ones back to the caller's memory, unlocks, resolves the accounting and,
 * on success, records (to out when non-NULL). Returns the op's status, or
 * the write-back's failure. */
locus_status locus__op_end(locus__op_run *run, locus_status status,
                           locus_record *out);

/* The whole life cycle of a checked op: the device (the caller's, else
 * the scheduler's), begin, run->type->launch(run, args), end, and on a
 * device's failure the next cheapest one with a warning (with
 * LOCUS_STRICT=1 the failure is the result). */
locus_status locus__op_dispatch(locus__op_run *run, locus_device *device,
                                const locus__op_cost *cost, void *args,
                                locus_record *out);

/* ---- checks every op shares ---------------------------------------------- */

/* a * b, failing on overflow of size_t; `what` names the product. */
locus_status locus__checked_mul(size_t a, size_t b, size_t *out,
                                const char *what);

/* A descriptor's struct_size against the size the op needs. */
locus_status locus__check_struct(size_t given, size_t needed, const char *what);

/* A math mode this version knows (else LOCUS_ERROR_INVALID_ARGUMENT), and
 * one the dtype takes: TF32 and 3xTF32 say how f32 operands meet the
 * tensor cores, so any other dtype is LOCUS_ERROR_NOT_SUPPORTED with
 * them. `op` names the op in the messages. */
locus_status locus__check_math(locus_math_mode math, locus_dtype dtype,
                               const char *op);

/* What every op checks besides its descriptor: the record, the dtype and
 * that the device (if any) is this context's. */
locus_status locus__check_common(locus_context *context, locus_device *device,
                                 locus_dtype dtype, const locus_record *record);

/* A buffer of another context is refused; NULL entries (matrices of no
 * elements) are skipped. */
locus_status locus__check_buffer_contexts(const locus_context *context,
                                          locus_buffer *const *buffers,
                                          const char *const *names,
                                          size_t count);

/* ---- gemm, which the split and the queue check too ----------------------- */

/* Validates a gemm as locus_gemm does before it chooses a device: the
 * descriptor's struct_size, the record, the dtype, the device (NULL: none
 * to check), the shape, flags and math mode, m * n * k against overflow,
 * and that each matrix fits its buffer. On success *resolved is the
 * descriptor with its leading dimensions made explicit, *mn = m * n and
 * *mnk = m * n * k. */
locus_status locus__gemm_check(locus_context *context, locus_device *device,
                               const locus_gemm_desc *desc,
                               const locus_buffer *a, const locus_buffer *b,
                               const locus_buffer *c,
                               const locus_record *record,
                               locus_gemm_desc *resolved, size_t *mn,
                               size_t *mnk);

/* A NULL a, b or c is allowed only for a matrix of no elements (m, n or k
 * 0 in its shape); otherwise LOCUS_ERROR_NULL_ARGUMENT ("a is NULL but
 * holds 3 x 2 elements"). The enqueue call judges it at once. */
locus_status locus__gemm_check_nulls(const locus_gemm_desc *desc,
                                     const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c);

/* C may not overlap A or B in memory, whatever alpha and the sizes are;
 * NULL matrices hold nothing and alias nothing. */
locus_status locus__gemm_check_alias(const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c);

/* The BLAS rules' special cases of a checked gemm descriptor, on alpha and
 * beta as the op computes with them (locus__gemm_scalar: an alpha that
 * rounds to 0 in f32 is sgemm's alpha = 0, not dgemm's). Nothing to do: m or n
 * is 0, or C = 1 * C (alpha or k 0 and beta 1); nothing is read or written.
 * Only C = beta * C: alpha or k is 0; A and B are not read. The GPU backends
 * test the same. */
/* alpha or beta as the op computes with it: rounded to f32 for the f32
 * and half types, the double itself for f64. */
static inline double locus__gemm_scalar(const locus_gemm_desc *desc,
                                        double value)
{
    return desc->dtype == LOCUS_DTYPE_F64 ? value : (double)(float)value;
}

static inline bool locus__gemm_only_scales(const locus_gemm_desc *desc)
{
    return locus__gemm_scalar(desc, desc->alpha) == 0.0 || desc->k == 0;
}

static inline bool locus__gemm_does_nothing(const locus_gemm_desc *desc)
{
    return desc->m == 0 || desc->n == 0 ||
           (locus__gemm_only_scales(desc) &&
            locus__gemm_scalar(desc, desc->beta) == 1.0);
}

/* The detail of a locus_last_error() text without its "<status message>: "
 * prefix, so that re-raising it with locus__fail does not repeat it. */
static inline const char *locus__error_detail(locus_status status,
                                              const char *text)
{
    const char *message = locus_status_str(status);
    size_t length = strlen(message);
    if (strncmp(text, message, length) == 0 && text[length] == ':' &&
        text[length + 1] == ' ')
        return text + length + 2;
    return text;
}

#endif
