/* The public ops: validation of descriptors against buffers, device choice,
 * buffer ordering and coherence, the backend call, and the record. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "account.h"
#include "buffer.h"
#include "calibration.h"
#include "ops.h"
#include "record.h"
#include "scheduler.h"
#include "status.h"

#define FLOAT_BYTES 4

void locus_reduce_desc_init(locus_reduce_desc *desc)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->struct_size = sizeof *desc;
    desc->dtype = LOCUS_DTYPE_F32;
    desc->op = LOCUS_REDUCE_SUM;
    desc->allow_atomic = 0; /* deterministic unless asked */
}

void locus_gemm_desc_init(locus_gemm_desc *desc)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->struct_size = sizeof *desc;
    desc->dtype = LOCUS_DTYPE_F32;
    desc->alpha = 1.0;
    desc->beta = 0.0;
}

void locus_conv2d_desc_init(locus_conv2d_desc *desc)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->struct_size = sizeof *desc;
    desc->dtype = LOCUS_DTYPE_F32;
    desc->stride_h = 1;
    desc->stride_w = 1;
    desc->algorithm = LOCUS_CONV_AUTO;
}

/* The backends' names (backend.h), plus auto's and unknown values'. */
const char *locus_conv_algorithm_str(locus_conv_algorithm algorithm)
{
    if (algorithm == LOCUS_CONV_AUTO)
        return "auto";
    if ((int)algorithm < (int)LOCUS_CONV_IM2COL ||
        (int)algorithm > (int)LOCUS_CONV_WINOGRAD)
        return "unknown";
    return locus_conv_algorithm_ran(algorithm);
}

/* a * b, failing on overflow of size_t; `what` names the product. */
static locus_status checked_mul(size_t a, size_t b, size_t *out,
                                const char *what)
{
    if (__builtin_mul_overflow(a, b, out))
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%s: %zu * %zu overflows size_t", what, a, b);
    return LOCUS_SUCCESS;
}

static locus_status check_dtype(locus_dtype dtype)
{
    if (dtype == LOCUS_DTYPE_F32)
        return LOCUS_SUCCESS;
    if (dtype == LOCUS_DTYPE_F64)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "dtype f64 is not implemented yet; use f32");
    return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "dtype %d is unknown",
                       (int)dtype);
}

static locus_status check_struct(size_t given, size_t needed, const char *what)
{
    if (given < needed)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "%s struct_size %zu: call %s_init first", what,
                           given, what);
    return LOCUS_SUCCESS;
}

/* Elements of a rows x cols matrix stored with leading dimension ld must fit
 * in the buffer. A matrix of no elements needs no bytes (and may be NULL:
 * locus__gemm_check_nulls). */
static locus_status check_matrix(const char *name, size_t rows, size_t cols,
                                 size_t ld, const locus_buffer *buffer)
{
    if (ld < cols)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "ld%s = %zu is less than the %zu columns of %s "
                           "as stored",
                           name, ld, cols, name);
    if (rows == 0 || cols == 0)
        return LOCUS_SUCCESS;
    size_t span, elements, bytes;
    locus_status status = checked_mul(rows - 1, ld, &span, name);
    if (status != LOCUS_SUCCESS)
        return status;
    if (__builtin_add_overflow(span, cols, &elements))
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%s spans more than size_t elements", name);
    status = checked_mul(elements, FLOAT_BYTES, &bytes, name);
    if (status != LOCUS_SUCCESS)
        return status;
    if (bytes > buffer->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "%s needs %zu bytes (%zu x %zu, ld %zu) but its "
                           "buffer has %zu",
                           name, bytes, rows, cols, ld, buffer->bytes);
    return LOCUS_SUCCESS;
}

/* One buffer an op uses, and how. */
typedef struct operand {
    locus_buffer *buffer;
    locus__access access;
    void *memory;
} operand;

typedef struct op_run {
    locus_context *context;
    locus_device *device;
    operand operands[3];
    size_t operand_count;
    locus_buffer *buffers[3]; /* the operands' buffers, for accounting */
    locus_record record;
    locus__account account;
    locus_op_context op;
    double started;
    locus__choice choice;
    /* The device computed the op and its outputs were marked written
     * there: a failure after that (copying a wrapped output back) must not
     * run the op again elsewhere, where it would read its own result. */
    bool committed;
} op_run;

static locus_status check_device(locus_context *context, locus_device *device)
{
    if (device && device->context != context)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device %s belongs to another context",
                           device->info.selector);
    return LOCUS_SUCCESS;
}

static locus_status choose_device(op_run *run, locus_device *device,
                                  const locus__op_cost *cost)
{
    if (!device)
        return locus__sched_choose(run->context, cost, &run->choice);
    if (!locus__device_offers(device, cost->op))
        return locus__fail(
            LOCUS_ERROR_NOT_SUPPORTED, "%s is not supported on %s (%s)",
            locus__op_name(cost->op), device->info.selector, device->info.name);
    run->choice =
        (locus__choice){.device = device, .chosen_by = LOCUS__CHOSEN_BY_CALLER};
    return LOCUS_SUCCESS;
}

/* Two ops that take the same pair of buffers in opposite roles must lock them
 * in one global order, or they could deadlock: by address. */
static void lock_operands(op_run *run)
{
    operand *sorted[3];
    size_t n = run->operand_count;
    for (size_t i = 0; i < n; i++)
        sorted[i] = &run->operands[i];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && sorted[j - 1]->buffer > sorted[j]->buffer;
             j--) {
            operand *t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && sorted[i]->buffer == sorted[i - 1]->buffer)
            continue; /* a buffer read twice (a == b) is locked once */
        if (sorted[i]->access & LOCUS__WRITE)
            pthread_rwlock_wrlock(&sorted[i]->buffer->use_lock);
        else
            pthread_rwlock_rdlock(&sorted[i]->buffer->use_lock);
    }
}

static void unlock_operands(op_run *run)
{
    for (size_t i = 0; i < run->operand_count; i++) {
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen |= run->operands[j].buffer == run->operands[i].buffer;
        if (!seen)
            pthread_rwlock_unlock(&run->operands[i].buffer->use_lock);
    }
}

/* An output may not also be an input: kernels read and write in blocks, and
 * the result would depend on their order. Memory is compared, not handles:
 * two wraps of one array are as much the same data as one buffer twice. */
static locus_status check_aliasing(const op_run *run, const char *const *names)
{
    for (size_t i = 0; i < run->operand_count; i++) {
        const locus_buffer *output = run->operands[i].buffer;
        if (!(run->operands[i].access & LOCUS__WRITE))
            continue;
        for (size_t j = 0; j < run->operand_count; j++) {
            const locus_buffer *input = run->operands[j].buffer;
            if (j != i && locus__buffers_overlap(output, input))
                return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                   "%s and %s %s; the output must not alias "
                                   "an input",
                                   names[i], names[j],
                                   output == input ? "are the same buffer"
                                                   : "overlap in memory");
        }
    }
    return LOCUS_SUCCESS;
}

/* A buffer of another context has its device copies on that context's
 * devices, which this context's ops cannot keep coherent: refused, as the
 * queue calls and the gemm split refuse it. NULL entries (matrices of no
 * elements) are skipped. */
static locus_status check_buffer_contexts(const locus_context *context,
                                          locus_buffer *const *buffers,
                                          const char *const *names,
                                          size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (buffers[i] && buffers[i]->context != context)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "buffer %s belongs to another context",
                               names[i]);
    return LOCUS_SUCCESS;
}

static locus_status begin_run(op_run *run, const char *op_name)
{
    run->device = run->choice.device;
    locus_record_init(&run->record);
    locus_copy_name(run->record.op, sizeof run->record.op, op_name);
    locus_copy_name(run->record.device, sizeof run->record.device,
                    run->device->info.selector);
    locus_status status = locus__account_begin(
        &run->account, &run->context->topology, run->context->pool);
    if (status != LOCUS_SUCCESS)
        return status;
    for (size_t i = 0; i < run->operand_count; i++)
        run->buffers[i] = run->operands[i].buffer;
    locus__account_use_buffers(&run->account, run->buffers, run->operand_count);
    run->op.record = &run->record;
    run->op.runtime_private = &run->account;
    run->started = locus__now_seconds();
    lock_operands(run);
    for (size_t i = 0; i < run->operand_count; i++) {
        operand *o = &run->operands[i];
        status = locus__buffer_acquire(o->buffer, run->device, o->access,
                                       &run->op, &o->memory);
        if (status != LOCUS_SUCCESS) {
            unlock_operands(run);
            locus__account_release(&run->account);
            return status;
        }
    }
    return LOCUS_SUCCESS;
}

/* Marks the outputs, copies wrapped ones back to the caller's memory
 * (locus__buffer_write_back), unlocks and records. Returns the op's
 * status, or the write-back's failure. */
static locus_status end_run(op_run *run, locus_status status, locus_record *out)
{
    run->committed = status == LOCUS_SUCCESS;
    for (size_t i = 0; i < run->operand_count; i++) {
        locus_buffer *buffer = run->operands[i].buffer;
        if (!(run->operands[i].access & LOCUS__WRITE))
            continue;
        if (status != LOCUS_SUCCESS) {
            locus__buffer_failed_on(buffer, run->device);
            continue;
        }
        locus__buffer_written_on(buffer, run->device);
        status = locus__buffer_write_back(buffer, &run->op);
        if (status != LOCUS_SUCCESS) {
            /* Copied out first: the detail is rewritten in place. */
            char why[2048];
            snprintf(why, sizeof why, "%s",
                     locus__error_detail(status, locus_last_error()));
            status = locus__fail(
                status,
                "%s on %s computed its result, but copying it back to the "
                "wrapped memory of its output (%zu bytes) failed; the result "
                "stays on the device, and a read or destroy tries again: %s",
                run->record.op, run->device->info.selector, buffer->bytes, why);
        }
    }
    unlock_operands(run);
    run->record.seconds = locus__now_seconds() - run->started;
    /* Placement is only resolved where it is real: under a synthetic or
     * XML topology nothing was bound, and the figures stay at none. */
    if (run->context->topology.is_this_system) {
        locus__account_result account;
        locus__account_finish(&run->account, &account);
        run->record.local_bytes = account.local_bytes;
        run->record.remote_bytes = account.remote_bytes;
        run->record.provenance = account.provenance;
    }
    locus__account_release(&run->account);
    if (status != LOCUS_SUCCESS)
        return status;
    if (!out && run->context->record_fd < 0)
        return status;
    locus__choice_to_record(&run->choice, &run->record);
    locus__record_append(run->context, &run->record);
    if (out)
        locus__record_copy_out(out, &run->record);
    return status;
}

/* The backend's part of an op, given the operands' memory. */
typedef locus_status (*backend_call)(op_run *run, void *args);

/* A device that fails this way may succeed elsewhere; bad arguments fail
 * everywhere, so they are not retried. */
static bool worth_another_device(locus_status status)
{
    return status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY ||
           status == LOCUS_ERROR_BACKEND;
}

/* A device the caller did not name refused the op as not supported: an
 * algorithm asked for by name (conv2d's winograd) that its backend lacks.
 * The scheduler knows which ops a device offers, not which algorithms, so
 * the op moves on to the next device. With LOCUS_STRICT=1 a device named
 * in LOCUS_DEVICE does not: the environment asked for that device. */
static bool unsupported_where_chosen(const op_run *run, locus_status status)
{
    locus__chosen_by by = run->choice.chosen_by;
    if (status != LOCUS_ERROR_NOT_SUPPORTED || by == LOCUS__CHOSEN_BY_CALLER)
        return false;
    return !(run->context->config.strict && by == LOCUS__CHOSEN_BY_ENVIRONMENT);
}

/* Chooses the device, runs the op there and, when the device fails it,
 * on the next cheapest one with a warning; with LOCUS_STRICT=1 the failure
 * is the result. The failed device's copy of an output is never left
 * marked current (locus__buffer_failed_on), so no stale data is read. */
static locus_status dispatch(op_run *run, locus_device *device,
                             const locus__op_cost *cost, backend_call call,
                             void *args, locus_record *out)
{
    locus_status status = choose_device(run, device, cost);
    uint64_t failed = 0;
    while (status == LOCUS_SUCCESS) {
        status = begin_run(run, locus__op_name(cost->op));
        if (status == LOCUS_SUCCESS)
            status = end_run(run, call(run, args), out);
        if (status == LOCUS_SUCCESS || run->committed)
            return status;
        const bool unsupported = unsupported_where_chosen(run, status);
        if (!unsupported && !worth_another_device(status))
            return status;
        const locus_device *broken = run->choice.device;
        /* The whole detail (a build log can be long), kept last. */
        char why[2048];
        snprintf(why, sizeof why, "%s", locus_last_error());
        if (locus__calibrating())
            return status; /* a failed measurement, not a failed op */
        if (run->context->config.strict && !unsupported)
            return locus__fail(status,
                               "%s failed on %s, and LOCUS_STRICT=1 forbids "
                               "running it elsewhere: %s",
                               locus__op_name(cost->op), broken->info.selector,
                               why);
        failed |= UINT64_C(1) << broken->ordinal;
        if (!locus__sched_fallback(run->context, cost, failed, &run->choice))
            return locus__fail(status,
                               "%s failed on %s (%s), and no other device "
                               "offers it",
                               locus__op_name(cost->op), broken->info.selector,
                               why);
        /* A refusal is the scheduler not knowing, a failure is news. */
        locus__log(
            run->context, unsupported ? LOCUS_LOG_INFO : LOCUS_LOG_WARN,
            "%s %s %s (%s); running it on %s instead", locus__op_name(cost->op),
            unsupported ? "is not supported on" : "failed on",
            broken->info.selector, why, run->choice.device->info.selector);
        locus__clear_error();
        status = LOCUS_SUCCESS;
    }
    return status;
}

static locus_status check_record(const locus_record *record)
{
    if (record && record->struct_size == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "record struct_size is 0: call locus_record_init "
                           "first");
    return LOCUS_SUCCESS;
}

/* What every op checks besides its descriptor: the record, the dtype and
 * that the device (if any) is this context's. */
static locus_status check_common(locus_context *context, locus_device *device,
                                 locus_dtype dtype, const locus_record *record)
{
    locus_status status = check_record(record);
    if (status == LOCUS_SUCCESS)
        status = check_dtype(dtype);
    if (status == LOCUS_SUCCESS)
        status = check_device(context, device);
    return status;
}

/* A descriptor from a caller built against an older, smaller struct gets
 * the _init defaults for the fields it lacks (allow_atomic came after
 * count), so backends always see the whole struct. */
static locus_status upgrade_reduce_desc(const locus_reduce_desc *given,
                                        locus_reduce_desc *full)
{
    size_t first_version = offsetof(locus_reduce_desc, count) + sizeof(size_t);
    locus_status status =
        check_struct(given->struct_size, first_version, "locus_reduce_desc");
    if (status != LOCUS_SUCCESS)
        return status;
    locus_reduce_desc_init(full);
    size_t known =
        given->struct_size < sizeof *full ? given->struct_size : sizeof *full;
    memcpy(full, given, known);
    full->struct_size = sizeof *full;
    return LOCUS_SUCCESS;
}

typedef struct reduce_args {
    const locus_reduce_desc *desc;
    double value;
} reduce_args;

static locus_status call_reduce(op_run *run, void *opaque)
{
    reduce_args *args = opaque;
    run->record.flops = (double)args->desc->count;
    run->record.bytes = args->desc->count * FLOAT_BYTES;
    locus__backend_slot *slot = run->device->backend;
    return slot->table->reduce(slot->state, run->device->index_in_backend,
                               args->desc, run->operands[0].memory,
                               &args->value, &run->op);
}

LOCUS_API locus_status locus_reduce(locus_context *context,
                                    locus_device *device,
                                    const locus_reduce_desc *given,
                                    locus_buffer *x, double *result,
                                    locus_record *record)
{
    locus__clear_error();
    if (!context || !given || !x || !result)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context ? "context"
                           : !given ? "desc"
                           : !x     ? "x"
                                    : "result");
    locus_reduce_desc upgraded;
    const locus_reduce_desc *desc = &upgraded;
    static const char *const x_name[] = {"x"};
    locus_status status = check_buffer_contexts(context, &x, x_name, 1);
    if (status == LOCUS_SUCCESS)
        status = upgrade_reduce_desc(given, &upgraded);
    if (status == LOCUS_SUCCESS)
        status = check_common(context, device, desc->dtype, record);
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->op != LOCUS_REDUCE_SUM && desc->op != LOCUS_REDUCE_MIN &&
        desc->op != LOCUS_REDUCE_MAX)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "reduce op %d is not sum, min or max",
                           (int)desc->op);
    if (desc->count == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "reduce over 0 elements");
    size_t bytes;
    status = checked_mul(desc->count, FLOAT_BYTES, &bytes, "reduce count");
    if (status != LOCUS_SUCCESS)
        return status;
    if (bytes > x->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "reduce of %zu elements needs %zu bytes but x has "
                           "%zu",
                           desc->count, bytes, x->bytes);

    op_run run = {.context = context};
    run.operands[0] = (operand){x, LOCUS__READ, NULL};
    run.operand_count = 1;
    locus_buffer *inputs[] = {x};
    locus__op_cost cost = {
        LOCUS__OP_REDUCE, (double)desc->count, (double)bytes, inputs, 1, 0};
    reduce_args args = {desc, NAN};
    status = dispatch(&run, device, &cost, call_reduce, &args, record);
    if (status == LOCUS_SUCCESS)
        *result = args.value;
    return status;
}

typedef struct gemm_args {
    const locus_gemm_desc *desc; /* leading dimensions resolved */
    double flops, bytes;
} gemm_args;

static locus_status call_gemm(op_run *run, void *opaque)
{
    const gemm_args *args = opaque;
    run->record.flops = args->flops;
    run->record.bytes = (uint64_t)args->bytes;
    locus__backend_slot *slot = run->device->backend;
    return slot->table->gemm(slot->state, run->device->index_in_backend,
                             args->desc, run->operands[0].memory,
                             run->operands[1].memory, run->operands[2].memory,
                             &run->op);
}

locus_status locus__gemm_check_nulls(const locus_gemm_desc *desc,
                                     const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c)
{
    const locus_buffer *buffers[] = {a, b, c};
    static const char *const names[] = {"a", "b", "c"};
    const size_t rows[] = {desc->trans_a ? desc->k : desc->m,
                           desc->trans_b ? desc->n : desc->k, desc->m};
    const size_t cols[] = {desc->trans_a ? desc->m : desc->k,
                           desc->trans_b ? desc->k : desc->n, desc->n};
    for (size_t i = 0; i < 3; i++)
        if (!buffers[i] && rows[i] != 0 && cols[i] != 0)
            return locus__fail(LOCUS_ERROR_NULL_ARGUMENT,
                               "%s is NULL but holds %zu x %zu elements",
                               names[i], rows[i], cols[i]);
    return LOCUS_SUCCESS;
}

locus_status locus__gemm_check(locus_context *context, locus_device *device,
                               const locus_gemm_desc *desc,
                               const locus_buffer *a, const locus_buffer *b,
                               const locus_buffer *c,
                               const locus_record *record,
                               locus_gemm_desc *resolved, size_t *mn,
                               size_t *mnk)
{
    locus_status status =
        check_struct(desc->struct_size, sizeof *desc, "locus_gemm_desc");
    if (status == LOCUS_SUCCESS)
        status = check_common(context, device, desc->dtype, record);
    if (status != LOCUS_SUCCESS)
        return status;
    if ((desc->trans_a != LOCUS_NO_TRANS && desc->trans_a != LOCUS_TRANS) ||
        (desc->trans_b != LOCUS_NO_TRANS && desc->trans_b != LOCUS_TRANS))
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "gemm transpose flags %d, %d are not "
                           "LOCUS_NO_TRANS or LOCUS_TRANS",
                           (int)desc->trans_a, (int)desc->trans_b);
    if (desc->math != LOCUS_MATH_FP32 && desc->math != LOCUS_MATH_TF32 &&
        desc->math != LOCUS_MATH_3XTF32)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "gemm math mode %d is unknown", (int)desc->math);
    status = checked_mul(desc->m, desc->n, mn, "gemm m * n");
    if (status == LOCUS_SUCCESS)
        status = checked_mul(*mn, desc->k, mnk, "gemm m * n * k");
    if (status != LOCUS_SUCCESS)
        return status;

    status = locus__gemm_check_nulls(desc, a, b, c);
    if (status != LOCUS_SUCCESS)
        return status;

    *resolved = *desc;
    size_t a_rows = desc->trans_a ? desc->k : desc->m;
    size_t a_cols = desc->trans_a ? desc->m : desc->k;
    size_t b_rows = desc->trans_b ? desc->n : desc->k;
    size_t b_cols = desc->trans_b ? desc->k : desc->n;
    resolved->lda = desc->lda ? desc->lda : a_cols;
    resolved->ldb = desc->ldb ? desc->ldb : b_cols;
    resolved->ldc = desc->ldc ? desc->ldc : desc->n;
    status = check_matrix("a", a_rows, a_cols, resolved->lda, a);
    if (status == LOCUS_SUCCESS)
        status = check_matrix("b", b_rows, b_cols, resolved->ldb, b);
    if (status == LOCUS_SUCCESS)
        status = check_matrix("c", desc->m, desc->n, resolved->ldc, c);
    return status;
}

/* The special cases below skip the operand list that check_aliasing reads,
 * not its rule: an output aliasing an input is refused whatever alpha and
 * the sizes are. NULL matrices hold nothing and alias nothing. */
static locus_status check_gemm_alias(const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c)
{
    const locus_buffer *inputs[] = {a, b};
    static const char *const names[] = {"a", "b"};
    for (size_t i = 0; i < 2; i++)
        if (c && inputs[i] && locus__buffers_overlap(c, inputs[i]))
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "c and %s %s; the output must not alias an "
                               "input",
                               names[i],
                               c == inputs[i] ? "are the same buffer"
                                              : "overlap in memory");
    return LOCUS_SUCCESS;
}

/* A gemm with nothing to do (locus__gemm_does_nothing) reads and writes
 * nothing and runs nowhere: its record names the caller's device, or
 * "none" when the scheduler was asked, with 0 flops and 0 bytes. */
static locus_status gemm_quick_return(locus_context *context,
                                      locus_device *device, locus_record *out)
{
    if (device && !locus__device_offers(device, LOCUS__OP_GEMM))
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "gemm is not supported on %s (%s)",
                           device->info.selector, device->info.name);
    if (!out && context->record_fd < 0)
        return LOCUS_SUCCESS;
    locus_record record;
    locus_record_init(&record);
    locus_copy_name(record.op, sizeof record.op, "gemm");
    locus_copy_name(record.device, sizeof record.device,
                    device ? device->info.selector : "none");
    locus_copy_name(record.algorithm, sizeof record.algorithm, "quick return");
    locus_copy_name(record.chosen_by, sizeof record.chosen_by,
                    locus__chosen_by_name(device ? LOCUS__CHOSEN_BY_CALLER
                                                 : LOCUS__CHOSEN_BY_NONE));
    locus__record_append(context, &record);
    if (out)
        locus__record_copy_out(out, &record);
    return LOCUS_SUCCESS;
}

/* alpha or k is 0: C = beta C on the device, which is handed NULL for A and
 * B; they are neither read nor copied (BLAS: NaN in them does not reach C).
 * The record counts 0 flops, as BLAS counts 2 m n k products. */
static locus_status call_gemm_scale(op_run *run, void *opaque)
{
    const gemm_args *args = opaque;
    run->record.flops = 0.0;
    run->record.bytes = (uint64_t)args->bytes;
    locus__backend_slot *slot = run->device->backend;
    return slot->table->gemm(slot->state, run->device->index_in_backend,
                             args->desc, NULL, NULL, run->operands[0].memory,
                             &run->op);
}

static locus_status gemm_scale_c(locus_context *context, locus_device *device,
                                 const locus_gemm_desc *resolved,
                                 locus_buffer *c, size_t mn,
                                 locus_record *record)
{
    op_run run = {.context = context};
    bool c_write_only = resolved->beta == 0.0 && resolved->ldc == resolved->n &&
                        mn * FLOAT_BYTES == c->bytes;
    run.operands[0] =
        (operand){c, c_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    run.operand_count = 1;
    double bytes = FLOAT_BYTES * (c_write_only ? 1.0 : 2.0) * (double)mn;
    locus_buffer *inputs[] = {c};
    locus__op_cost cost = {LOCUS__OP_GEMM,
                           (double)mn,
                           bytes,
                           inputs,
                           c_write_only ? 0u : 1u,
                           (double)mn * FLOAT_BYTES};
    gemm_args args = {resolved, 0.0, bytes};
    return dispatch(&run, device, &cost, call_gemm_scale, &args, record);
}

LOCUS_API locus_status locus_gemm(locus_context *context, locus_device *device,
                                  const locus_gemm_desc *desc, locus_buffer *a,
                                  locus_buffer *b, locus_buffer *c,
                                  locus_record *record)
{
    locus__clear_error();
    /* A, B or C may be NULL when it holds no elements (check_matrix). */
    if (!context || !desc)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context ? "context" : "desc");
    locus_buffer *matrices[] = {a, b, c};
    static const char *const matrix_names[] = {"a", "b", "c"};
    if (check_buffer_contexts(context, matrices, matrix_names, 3) !=
        LOCUS_SUCCESS)
        return LOCUS_ERROR_INVALID_ARGUMENT;
    locus_gemm_desc resolved;
    size_t flops_mn, flops;
    locus_status status = locus__gemm_check(
        context, device, desc, a, b, c, record, &resolved, &flops_mn, &flops);
    if (status != LOCUS_SUCCESS)
        return status;
    if (locus__gemm_does_nothing(&resolved) ||
        locus__gemm_only_scales(&resolved)) {
        status = check_gemm_alias(a, b, c);
        if (status != LOCUS_SUCCESS)
            return status;
        if (locus__gemm_does_nothing(&resolved))
            return gemm_quick_return(context, device, record);
        return gemm_scale_c(context, device, &resolved, c, flops_mn, record);
    }

    op_run run = {.context = context};
    /* With beta == 0, C is only written; but a strided C (ldc > n) or a
     * larger buffer keeps bytes the op leaves alone, so it is read in. */
    bool c_write_only = desc->beta == 0.0 && resolved.ldc == desc->n &&
                        flops_mn * FLOAT_BYTES == c->bytes;
    run.operands[0] = (operand){a, LOCUS__READ, NULL};
    run.operands[1] = (operand){b, LOCUS__READ, NULL};
    run.operands[2] =
        (operand){c, c_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    run.operand_count = 3;
    static const char *const names[] = {"a", "b", "c"};
    status = check_aliasing(&run, names);
    if (status != LOCUS_SUCCESS)
        return status;
    double bytes =
        FLOAT_BYTES *
        ((double)desc->m * (double)desc->k + (double)desc->k * (double)desc->n +
         (c_write_only ? 1.0 : 2.0) * (double)desc->m * (double)desc->n);
    locus_buffer *inputs[] = {a, b, c};
    locus__op_cost cost = {
        LOCUS__OP_GEMM, 2.0 * (double)flops,    bytes,
        inputs,         c_write_only ? 2u : 3u, (double)flops_mn * FLOAT_BYTES};
    gemm_args args = {&resolved, cost.flops, bytes};
    return dispatch(&run, device, &cost, call_gemm, &args, record);
}

LOCUS_API locus_status locus_conv2d_output_shape(const locus_conv2d_desc *desc,
                                                 size_t *out_height,
                                                 size_t *out_width)
{
    locus__clear_error();
    if (!desc || !out_height || !out_width)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !desc         ? "desc"
                           : !out_height ? "out_height"
                                         : "out_width");
    locus_status status =
        check_struct(desc->struct_size, sizeof *desc, "locus_conv2d_desc");
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->stride_h == 0 || desc->stride_w == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d stride %zu x %zu: strides must be at "
                           "least 1",
                           desc->stride_h, desc->stride_w);
    if (desc->kernel_height == 0 || desc->kernel_width == 0 ||
        desc->in_height == 0 || desc->in_width == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d image %zu x %zu, kernel %zu x %zu: every "
                           "size must be at least 1",
                           desc->in_height, desc->in_width, desc->kernel_height,
                           desc->kernel_width);
    if (desc->pad_h > SIZE_MAX / 4 || desc->pad_w > SIZE_MAX / 4 ||
        desc->in_height > SIZE_MAX / 2 || desc->in_width > SIZE_MAX / 2)
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "conv2d padded image size overflows");
    size_t padded_h = desc->in_height + 2 * desc->pad_h;
    size_t padded_w = desc->in_width + 2 * desc->pad_w;
    if (desc->kernel_height > padded_h || desc->kernel_width > padded_w)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d kernel %zu x %zu does not fit the padded "
                           "image %zu x %zu",
                           desc->kernel_height, desc->kernel_width, padded_h,
                           padded_w);
    *out_height = (padded_h - desc->kernel_height) / desc->stride_h + 1;
    *out_width = (padded_w - desc->kernel_width) / desc->stride_w + 1;
    return LOCUS_SUCCESS;
}

/* Bytes of a tensor of four dimensions, checked. */
static locus_status tensor_bytes(size_t d0, size_t d1, size_t d2, size_t d3,
                                 const char *name, size_t *bytes)
{
    size_t n = d0;
    locus_status status = checked_mul(n, d1, &n, name);
    if (status == LOCUS_SUCCESS)
        status = checked_mul(n, d2, &n, name);
    if (status == LOCUS_SUCCESS)
        status = checked_mul(n, d3, &n, name);
    if (status == LOCUS_SUCCESS)
        status = checked_mul(n, FLOAT_BYTES, bytes, name);
    return status;
}

static locus_status check_tensor(const char *name, size_t bytes,
                                 const locus_buffer *buffer)
{
    if (bytes > buffer->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "conv2d %s needs %zu bytes but its buffer has %zu",
                           name, bytes, buffer->bytes);
    return LOCUS_SUCCESS;
}

typedef struct conv_args {
    const locus_conv2d_desc *desc;
    double flops, bytes;
} conv_args;

static locus_status call_conv(op_run *run, void *opaque)
{
    const conv_args *args = opaque;
    run->record.flops = args->flops;
    run->record.bytes = (uint64_t)args->bytes;
    locus__backend_slot *slot = run->device->backend;
    return slot->table->conv2d(slot->state, run->device->index_in_backend,
                               args->desc, run->operands[0].memory,
                               run->operands[1].memory, run->operands[2].memory,
                               &run->op);
}

LOCUS_API locus_status locus_conv2d(locus_context *context,
                                    locus_device *device,
                                    const locus_conv2d_desc *desc,
                                    locus_buffer *input, locus_buffer *filter,
                                    locus_buffer *output, locus_record *record)
{
    locus__clear_error();
    if (!context || !desc || !input || !filter || !output)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context  ? "context"
                           : !desc   ? "desc"
                           : !input  ? "input"
                           : !filter ? "filter"
                                     : "output");
    size_t out_h, out_w;
    locus_buffer *tensors[] = {input, filter, output};
    static const char *const tensor_names[] = {"input", "filter", "output"};
    locus_status status =
        check_buffer_contexts(context, tensors, tensor_names, 3);
    if (status == LOCUS_SUCCESS)
        status = locus_conv2d_output_shape(desc, &out_h, &out_w);
    if (status == LOCUS_SUCCESS)
        status = check_common(context, device, desc->dtype, record);
    if (status != LOCUS_SUCCESS)
        return status;
    if (desc->batch == 0 || desc->in_channels == 0 || desc->out_channels == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d batch %zu, in_channels %zu, out_channels "
                           "%zu: each must be at least 1",
                           desc->batch, desc->in_channels, desc->out_channels);
    if (desc->algorithm != LOCUS_CONV_AUTO &&
        desc->algorithm != LOCUS_CONV_IM2COL &&
        desc->algorithm != LOCUS_CONV_MEC &&
        desc->algorithm != LOCUS_CONV_IMPLICIT_GEMM &&
        desc->algorithm != LOCUS_CONV_WINOGRAD)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "conv2d algorithm %d is unknown",
                           (int)desc->algorithm);
    size_t input_bytes, filter_bytes, output_bytes, macs;
    status = tensor_bytes(desc->batch, desc->in_channels, desc->in_height,
                          desc->in_width, "conv2d input", &input_bytes);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->out_channels, desc->in_channels,
                              desc->kernel_height, desc->kernel_width,
                              "conv2d filter", &filter_bytes);
    if (status == LOCUS_SUCCESS)
        status = tensor_bytes(desc->batch, desc->out_channels, out_h, out_w,
                              "conv2d output", &output_bytes);
    if (status == LOCUS_SUCCESS)
        status = checked_mul(output_bytes / FLOAT_BYTES,
                             filter_bytes / FLOAT_BYTES / desc->out_channels,
                             &macs, "conv2d multiply-adds");
    if (status == LOCUS_SUCCESS)
        status = check_tensor("input", input_bytes, input);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("filter", filter_bytes, filter);
    if (status == LOCUS_SUCCESS)
        status = check_tensor("output", output_bytes, output);
    if (status != LOCUS_SUCCESS)
        return status;

    op_run run = {.context = context};
    /* The output is written whole only when the buffer is exactly its size;
     * otherwise the bytes past it are kept, so it is read in. */
    bool output_write_only = output_bytes == output->bytes;
    run.operands[0] = (operand){input, LOCUS__READ, NULL};
    run.operands[1] = (operand){filter, LOCUS__READ, NULL};
    run.operands[2] = (operand){
        output, output_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    run.operand_count = 3;
    static const char *const names[] = {"input", "filter", "output"};
    status = check_aliasing(&run, names);
    if (status != LOCUS_SUCCESS)
        return status;
    double bytes =
        (double)input_bytes + (double)filter_bytes + (double)output_bytes;
    locus_buffer *inputs[] = {input, filter};
    locus__op_cost cost = {
        LOCUS__OP_CONV2D,    2.0 * (double)macs, bytes, inputs, 2,
        (double)output_bytes};
    conv_args args = {desc, cost.flops, bytes};
    return dispatch(&run, device, &cost, call_conv, &args, record);
}
