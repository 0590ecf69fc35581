/* The op life cycle every op shares (ops.h): the checks common to all
 * kinds, device choice, buffer ordering and coherence, the backend call
 * through the op table, the fallback after a device's failure, the
 * accounting and the record. */
#include <stdio.h>
#include <string.h>

#include "account.h"
#include "buffer.h"
#include "calibration.h"
#include "clock.h"
#include "ops.h"
#include "record.h"
#include "scheduler.h"
#include "status.h"

const locus__op_type *locus__op_type_of(locus__op_kind kind)
{
    static const locus__op_type *const types[LOCUS__OP_KINDS] = {
        [LOCUS__OP_REDUCE] = &locus__reduce_op,
        [LOCUS__OP_GEMM] = &locus__gemm_op,
        [LOCUS__OP_CONV2D] = &locus__conv2d_op,
    };
    return (unsigned)kind < LOCUS__OP_KINDS ? types[kind] : NULL;
}

/* ---- checks every op shares ---------------------------------------------- */

locus_status locus__checked_mul(size_t a, size_t b, size_t *out,
                                const char *what)
{
    if (__builtin_mul_overflow(a, b, out))
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%s: %zu * %zu overflows size_t", what, a, b);
    return LOCUS_SUCCESS;
}

locus_status locus__check_struct(size_t given, size_t needed, const char *what)
{
    if (given < needed)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "%s struct_size %zu: call %s_init first", what,
                           given, what);
    return LOCUS_SUCCESS;
}

static locus_status check_dtype(locus_dtype dtype)
{
    if (locus_dtype_size(dtype) != 0)
        return LOCUS_SUCCESS;
    return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT, "dtype %d is unknown",
                       (int)dtype);
}

locus_status locus__check_math(locus_math_mode math, locus_dtype dtype,
                               const char *op)
{
    if (math != LOCUS_MATH_FP32 && math != LOCUS_MATH_TF32 &&
        math != LOCUS_MATH_3XTF32)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "%s math mode %d is unknown", op, (int)math);
    if (math != LOCUS_MATH_FP32 && dtype != LOCUS_DTYPE_F32)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "%s math mode %s is for f32 operands, not %s", op,
                           math == LOCUS_MATH_TF32 ? "tf32" : "3xtf32",
                           locus_dtype_str(dtype));
    return LOCUS_SUCCESS;
}

static locus_status check_record(const locus_record *record)
{
    if (record && record->struct_size == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "record struct_size is 0: call locus_record_init "
                           "first");
    return LOCUS_SUCCESS;
}

static locus_status check_device(locus_context *context, locus_device *device)
{
    if (device && device->context != context)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device %s belongs to another context",
                           device->info.selector);
    return LOCUS_SUCCESS;
}

locus_status locus__check_common(locus_context *context, locus_device *device,
                                 locus_dtype dtype, const locus_record *record)
{
    locus_status status = check_record(record);
    if (status == LOCUS_SUCCESS)
        status = check_dtype(dtype);
    if (status == LOCUS_SUCCESS)
        status = check_device(context, device);
    return status;
}

/* A buffer of another context has its device copies on that context's
 * devices, which this context's ops cannot keep coherent: refused, as the
 * queue calls and the gemm split refuse it. */
locus_status locus__check_buffer_contexts(const locus_context *context,
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

/* Kernels read and write in blocks, and the result would depend on their
 * order. A NULL operand (an optional one left out: conv2d's bias) holds
 * nothing and aliases nothing. Memory is compared, not handles: two wraps of
 * one array are as much the same data as one buffer twice. */
locus_status locus__op_check_aliasing(const locus__op_run *run)
{
    const size_t count = run->type->operand_count;
    const char *const *names = run->type->operand_names;
    for (size_t i = 0; i < count; i++) {
        const locus_buffer *output = run->operands[i].buffer;
        if (!output || !(run->operands[i].access & LOCUS__WRITE))
            continue;
        for (size_t j = 0; j < count; j++) {
            const locus_buffer *input = run->operands[j].buffer;
            if (j != i && input && locus__buffers_overlap(output, input))
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

/* ---- begin and end ------------------------------------------------------- */

/* Two ops that take the same pair of buffers in opposite roles must lock them
 * in one global order, or they could deadlock: by address. A NULL operand
 * (an optional one left out) is no buffer: never locked, acquired,
 * accounted or marked written. */
static void lock_operands(locus__op_run *run)
{
    locus__operand *sorted[LOCUS__OP_MAX_OPERANDS];
    size_t n = 0;
    for (size_t i = 0; i < run->type->operand_count; i++)
        if (run->operands[i].buffer)
            sorted[n++] = &run->operands[i];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && sorted[j - 1]->buffer > sorted[j]->buffer;
             j--) {
            locus__operand *t = sorted[j];
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

static void unlock_operands(locus__op_run *run)
{
    for (size_t i = 0; i < run->type->operand_count; i++) {
        bool seen = run->operands[i].buffer == NULL;
        for (size_t j = 0; j < i; j++)
            seen |= run->operands[j].buffer == run->operands[i].buffer;
        if (!seen)
            pthread_rwlock_unlock(&run->operands[i].buffer->use_lock);
    }
}

locus_status locus__op_begin(locus__op_run *run)
{
    const size_t count = run->type->operand_count;
    run->device = run->choice.device;
    locus_record_init(&run->record);
    locus_copy_name(run->record.op, sizeof run->record.op,
                    run->type->model.name);
    if (run->device)
        locus_copy_name(run->record.device, sizeof run->record.device,
                        run->device->info.selector);
    locus_status status = locus__account_begin(
        &run->account, &run->context->topology, run->context->pool);
    if (status != LOCUS_SUCCESS)
        return status;
    size_t buffer_count = 0;
    for (size_t i = 0; i < count; i++)
        if (run->operands[i].buffer)
            run->buffers[buffer_count++] = run->operands[i].buffer;
    locus__account_use_buffers(&run->account, run->buffers, buffer_count);
    run->op.record = &run->record;
    run->op.runtime_private = &run->account;
    run->started = locus__now_seconds();
    lock_operands(run);
    for (size_t i = 0; i < count; i++) {
        locus__operand *o = &run->operands[i];
        o->memory = NULL;
        if (!o->buffer)
            continue;
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

/* Marks an output written where the op ran and copies a wrapped one back
 * to the caller's memory (locus__buffer_write_back). */
static locus_status commit_output(locus__op_run *run, locus_buffer *buffer)
{
    locus__buffer_written_on(buffer, run->device);
    locus_status status = locus__buffer_write_back(buffer, &run->op);
    if (status == LOCUS_SUCCESS)
        return status;
    /* Copied out first: the detail is rewritten in place. */
    char why[2048];
    snprintf(why, sizeof why, "%s",
             locus__error_detail(status, locus_last_error()));
    return locus__fail(status,
                       "%s on %s computed its result, but copying it back to "
                       "the wrapped memory of its output (%zu bytes) failed; "
                       "the result stays on the device, and a read or destroy "
                       "tries again: %s",
                       run->record.op, run->record.device, buffer->bytes, why);
}

locus_status locus__op_end(locus__op_run *run, locus_status status,
                           locus_record *out)
{
    run->committed = status == LOCUS_SUCCESS;
    for (size_t i = 0; i < run->type->operand_count; i++) {
        locus_buffer *buffer = run->operands[i].buffer;
        if (!buffer || !(run->operands[i].access & LOCUS__WRITE))
            continue;
        if (status == LOCUS_SUCCESS)
            status = commit_output(run, buffer);
        else if (!run->outputs_untouched)
            locus__buffer_failed_on(buffer, run->device);
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

/* ---- dispatch ------------------------------------------------------------ */

static locus_status choose_device(locus__op_run *run, locus_device *device,
                                  const locus__op_cost *cost)
{
    if (!device)
        return locus__sched_choose(run->context, cost, &run->choice);
    /* One question on the way of every op; a refusal asks another, to
     * say whether the device lacks the op or only this form of it. */
    if (!locus__device_offers_cost(device, cost)) {
        if (!locus__device_offers(device, cost->op))
            return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                               "%s is not supported on %s (%s)",
                               run->type->model.name, device->info.selector,
                               device->info.name);
        char variant[96];
        locus__op_variant_name(cost, variant, sizeof variant);
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "%s is not offered on %s (%s)", variant,
                           device->info.selector, device->info.name);
    }
    run->choice =
        (locus__choice){.device = device, .chosen_by = LOCUS__CHOSEN_BY_CALLER};
    return LOCUS_SUCCESS;
}

/* A device that fails this way may succeed elsewhere; bad arguments fail
 * everywhere, so they are not retried. */
static bool worth_another_device(locus_status status)
{
    return status == LOCUS_ERROR_DEVICE_OUT_OF_MEMORY ||
           status == LOCUS_ERROR_BACKEND;
}

/* A device the caller did not name refused the op as not supported: a
 * shape past its kernels' limits (what a backend offers, by op, algorithm
 * and dtype, the scheduler knows and keeps to), so the op moves on to the
 * next device. With LOCUS_STRICT=1 a device named in LOCUS_DEVICE does
 * not: the environment asked for that device. */
static bool unsupported_where_chosen(const locus__op_run *run,
                                     locus_status status)
{
    locus__chosen_by by = run->choice.chosen_by;
    if (status != LOCUS_ERROR_NOT_SUPPORTED || by == LOCUS__CHOSEN_BY_CALLER)
        return false;
    return !(run->context->config.strict && by == LOCUS__CHOSEN_BY_ENVIRONMENT);
}

/* The failed device's copy of an output is never left marked current
 * (locus__buffer_failed_on), so no stale data is read. */
locus_status locus__op_dispatch(locus__op_run *run, locus_device *device,
                                const locus__op_cost *cost, void *args,
                                locus_record *out)
{
    const char *name = run->type->model.name;
    locus_status status = choose_device(run, device, cost);
    uint64_t failed = 0;
    while (status == LOCUS_SUCCESS) {
        status = locus__op_begin(run);
        if (status == LOCUS_SUCCESS) {
            locus_copy_name(run->record.dtype, sizeof run->record.dtype,
                            locus_dtype_str(locus__cost_dtype(cost)));
            status = locus__op_end(run, run->type->launch(run, args), out);
        }
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
                               name, broken->info.selector, why);
        failed |= UINT64_C(1) << broken->ordinal;
        if (!locus__sched_fallback(run->context, cost, failed, &run->choice))
            return locus__fail(status,
                               "%s failed on %s (%s), and no other device "
                               "offers it",
                               name, broken->info.selector, why);
        /* A refusal is the scheduler not knowing, a failure is news. */
        locus__log(run->context, unsupported ? LOCUS_LOG_INFO : LOCUS_LOG_WARN,
                   "%s %s %s (%s); running it on %s instead", name,
                   unsupported ? "is not supported on" : "failed on",
                   broken->info.selector, why,
                   run->choice.device->info.selector);
        locus__clear_error();
        status = LOCUS_SUCCESS;
    }
    return status;
}
