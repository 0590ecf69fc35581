/* The reduce op: sum, min or max of a vector. Its checks, its cost and its
 * backend call; the life cycle is ops.c's. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ops.h"
#include "status.h"

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

/* A descriptor from a caller built against an older, smaller struct gets
 * the _init defaults for the fields it lacks (allow_atomic came after
 * count), so backends always see the whole struct. */
static locus_status upgrade_desc(const locus_reduce_desc *given,
                                 locus_reduce_desc *full)
{
    size_t first_version = offsetof(locus_reduce_desc, count) + sizeof(size_t);
    locus_status status = locus__check_struct(given->struct_size, first_version,
                                              "locus_reduce_desc");
    if (status != LOCUS_SUCCESS)
        return status;
    locus_reduce_desc_init(full);
    size_t known =
        given->struct_size < sizeof *full ? given->struct_size : sizeof *full;
    memcpy(full, given, known);
    full->struct_size = sizeof *full;
    return LOCUS_SUCCESS;
}

/* The descriptor against x: the operation, the count and x's size. */
static locus_status check_reduce(const locus_reduce_desc *desc,
                                 const locus_buffer *x, size_t *bytes)
{
    if (desc->op != LOCUS_REDUCE_SUM && desc->op != LOCUS_REDUCE_MIN &&
        desc->op != LOCUS_REDUCE_MAX)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "reduce op %d is not sum, min or max",
                           (int)desc->op);
    if (desc->count == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "reduce over 0 elements");
    if (desc->dtype != LOCUS_DTYPE_F32 && desc->dtype != LOCUS_DTYPE_F64)
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "reduce takes f32 or f64, not %s (bf16 and f16 "
                           "are gemm and conv2d inputs)",
                           locus_dtype_str(desc->dtype));
    locus_status status = locus__checked_mul(
        desc->count, locus_dtype_size(desc->dtype), bytes, "reduce count");
    if (status != LOCUS_SUCCESS)
        return status;
    if (*bytes > x->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "reduce of %zu elements needs %zu bytes but x has "
                           "%zu",
                           desc->count, *bytes, x->bytes);
    return LOCUS_SUCCESS;
}

typedef struct reduce_args {
    const locus_reduce_desc *desc;
    double value;
} reduce_args;

static locus_status launch_reduce(locus__op_run *run, void *opaque)
{
    reduce_args *args = opaque;
    run->record.flops = (double)args->desc->count;
    run->record.bytes = args->desc->count * locus_dtype_size(args->desc->dtype);
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
    locus_reduce_desc desc;
    size_t bytes = 0;
    locus_status status = locus__check_buffer_contexts(
        context, &x, locus__reduce_op.operand_names, 1);
    if (status == LOCUS_SUCCESS)
        status = upgrade_desc(given, &desc);
    if (status == LOCUS_SUCCESS)
        status = locus__check_common(context, device, desc.dtype, record);
    if (status == LOCUS_SUCCESS)
        status = check_reduce(&desc, x, &bytes);
    if (status != LOCUS_SUCCESS)
        return status;

    locus__op_run run;
    locus__op_run_start(&run, context, &locus__reduce_op);
    run.operands[0] = (locus__operand){x, LOCUS__READ, NULL};
    locus_buffer *inputs[] = {x};
    locus__op_cost cost = {.op = &locus__reduce_op.model,
                           .flops = (double)desc.count,
                           .bytes = (double)bytes,
                           .inputs = inputs,
                           .input_count = 1,
                           .dtype = desc.dtype};
    reduce_args args = {&desc, NAN};
    status = locus__op_dispatch(&run, device, &cost, &args, record);
    if (status == LOCUS_SUCCESS)
        *result = args.value;
    return status;
}

static locus_status call_reduce(locus_context *context, locus_device *device,
                                const void *desc, locus_buffer *const *buffers,
                                double *result, locus_record *record)
{
    return locus_reduce(context, device, desc, buffers[0], result, record);
}

/* A reduce is a launch and its bytes read (the life cycle's memory
 * floor): no compute of its own past that. */
static double reduce_compute_seconds(const locus_backend_rates *rates,
                                     const locus__op_cost *cost)
{
    return rates->launch_seconds + cost->bytes / rates->reduce_bytes;
}

static bool backend_has_reduce(const locus_backend *table)
{
    return table->reduce != NULL;
}

const locus__op_type locus__reduce_op = {
    .model = {.kind = LOCUS__OP_REDUCE,
              .name = "reduce",
              .backend_has = backend_has_reduce,
              .compute_seconds = reduce_compute_seconds,
              .work_in_bytes = true},
    .operand_count = 1,
    .operand_names = {"x"},
    .launch = launch_reduce,
    .call = call_reduce,
};
