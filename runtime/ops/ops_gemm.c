/* The gemm op, C = alpha op(A) op(B) + beta C, with the BLAS rules'
 * special cases: its checks, its cost and its backend calls; the life
 * cycle is ops.c's. */
#include <stddef.h>
#include <string.h>

#include "ops.h"
#include "record.h"
#include "status.h"

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

/* ---- checks -------------------------------------------------------------- */

/* Elements of a rows x cols matrix stored with leading dimension ld must fit
 * in the buffer. A matrix of no elements needs no bytes (and may be NULL:
 * locus__gemm_check_nulls). */
static locus_status check_matrix(const char *name, size_t rows, size_t cols,
                                 size_t ld, locus_dtype dtype,
                                 const locus_buffer *buffer)
{
    if (ld < cols)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "ld%s = %zu is less than the %zu columns of %s "
                           "as stored",
                           name, ld, cols, name);
    if (rows == 0 || cols == 0)
        return LOCUS_SUCCESS;
    size_t span, elements, bytes;
    locus_status status = locus__checked_mul(rows - 1, ld, &span, name);
    if (status != LOCUS_SUCCESS)
        return status;
    if (__builtin_add_overflow(span, cols, &elements))
        return locus__fail(LOCUS_ERROR_SIZE_OVERFLOW,
                           "%s spans more than size_t elements", name);
    status =
        locus__checked_mul(elements, locus_dtype_size(dtype), &bytes, name);
    if (status != LOCUS_SUCCESS)
        return status;
    if (bytes > buffer->bytes)
        return locus__fail(LOCUS_ERROR_BUFFER_TOO_SMALL,
                           "%s needs %zu bytes (%zu x %zu, ld %zu) but its "
                           "buffer has %zu",
                           name, bytes, rows, cols, ld, buffer->bytes);
    return LOCUS_SUCCESS;
}

locus_status locus__gemm_check_nulls(const locus_gemm_desc *desc,
                                     const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c)
{
    const locus_buffer *buffers[] = {a, b, c};
    const char *const *names = locus__gemm_op.operand_names;
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

/* The transpose flags and the math mode are ones this version knows. */
static locus_status check_flags(const locus_gemm_desc *desc)
{
    if ((desc->trans_a != LOCUS_NO_TRANS && desc->trans_a != LOCUS_TRANS) ||
        (desc->trans_b != LOCUS_NO_TRANS && desc->trans_b != LOCUS_TRANS))
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "gemm transpose flags %d, %d are not "
                           "LOCUS_NO_TRANS or LOCUS_TRANS",
                           (int)desc->trans_a, (int)desc->trans_b);
    return locus__check_math(desc->math, desc->dtype, "gemm");
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
        locus__check_struct(desc->struct_size, sizeof *desc, "locus_gemm_desc");
    if (status == LOCUS_SUCCESS)
        status = locus__check_common(context, device, desc->dtype, record);
    if (status == LOCUS_SUCCESS)
        status = check_flags(desc);
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(desc->m, desc->n, mn, "gemm m * n");
    if (status == LOCUS_SUCCESS)
        status = locus__checked_mul(*mn, desc->k, mnk, "gemm m * n * k");
    if (status == LOCUS_SUCCESS)
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
    status = check_matrix("a", a_rows, a_cols, resolved->lda, desc->dtype, a);
    if (status == LOCUS_SUCCESS)
        status =
            check_matrix("b", b_rows, b_cols, resolved->ldb, desc->dtype, b);
    if (status == LOCUS_SUCCESS)
        status = check_matrix("c", desc->m, desc->n, resolved->ldc,
                              locus__output_dtype(desc->dtype), c);
    return status;
}

/* The special cases skip the operand list that locus__op_check_aliasing
 * reads, not its rule. */
locus_status locus__gemm_check_alias(const locus_buffer *a,
                                     const locus_buffer *b,
                                     const locus_buffer *c)
{
    const locus_buffer *inputs[] = {a, b};
    const char *const *names = locus__gemm_op.operand_names;
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

/* ---- the backend's part -------------------------------------------------- */

typedef struct gemm_args {
    const locus_gemm_desc *desc; /* leading dimensions resolved */
    double flops, bytes;
} gemm_args;

static locus_status launch_gemm(locus__op_run *run, void *opaque)
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

/* alpha or k is 0: C = beta C on the device, which is handed NULL for A and
 * B; they are neither read nor copied (BLAS: NaN in them does not reach C).
 * The record counts 0 flops, as BLAS counts 2 m n k products. */
static locus_status launch_gemm_scale(locus__op_run *run, void *opaque)
{
    const gemm_args *args = opaque;
    run->record.flops = 0.0;
    run->record.bytes = (uint64_t)args->bytes;
    locus__backend_slot *slot = run->device->backend;
    return slot->table->gemm(slot->state, run->device->index_in_backend,
                             args->desc, NULL, NULL, run->operands[0].memory,
                             &run->op);
}

/* ---- the cost model ------------------------------------------------------ */

static bool backend_has_gemm(const locus_backend *table)
{
    return table->gemm != NULL;
}

static double gemm_compute_seconds(const locus_backend_rates *rates,
                                   const locus__op_cost *cost)
{
    return rates->gemm_fixed_seconds +
           cost->flops / locus__rate_in_dtype(
                             rates->gemm_flops, rates->gemm_flops_f64,
                             rates->gemm_flops_half, locus__cost_dtype(cost));
}

/* Both of gemm's entries, the op and its C = beta C variant, are one kind
 * to the scheduler. */
#define GEMM_MODEL                                                             \
    {                                                                          \
        .kind = LOCUS__OP_GEMM, .name = "gemm",                                \
        .backend_has = backend_has_gemm,                                       \
        .compute_seconds = gemm_compute_seconds, .work_in_bytes = false,       \
    }

/* The C = beta C variant: one operand, C. */
static const locus__op_type gemm_scale_op = {
    .model = GEMM_MODEL,
    .operand_count = 1,
    .operand_names = {"c"},
    .launch = launch_gemm_scale,
    .call = NULL, /* reached only through locus_gemm */
};

/* ---- the op -------------------------------------------------------------- */

/* A gemm with nothing to do (locus__gemm_does_nothing) reads and writes
 * nothing and runs nowhere: its record names the caller's device, or
 * "none" when the scheduler was asked, with 0 flops and 0 bytes. */
static locus_status gemm_quick_return(locus_context *context,
                                      locus_device *device, locus_dtype dtype,
                                      locus_record *out)
{
    if (device &&
        !locus__device_offers_variant(device, &locus__gemm_op.model, 0, dtype))
        return locus__fail(
            LOCUS_ERROR_NOT_SUPPORTED, "gemm%s%s is not supported on %s (%s)",
            dtype == LOCUS_DTYPE_F32 ? "" : " in ",
            dtype == LOCUS_DTYPE_F32 ? "" : locus_dtype_str(dtype),
            device->info.selector, device->info.name);
    if (!out && context->record_fd < 0)
        return LOCUS_SUCCESS;
    locus_record record;
    locus_record_init(&record);
    locus_copy_name(record.op, sizeof record.op, locus__gemm_op.model.name);
    locus_copy_name(record.device, sizeof record.device,
                    device ? device->info.selector : "none");
    locus_copy_name(record.algorithm, sizeof record.algorithm, "quick return");
    locus_copy_name(record.dtype, sizeof record.dtype, locus_dtype_str(dtype));
    locus_copy_name(record.chosen_by, sizeof record.chosen_by,
                    locus__chosen_by_name(device ? LOCUS__CHOSEN_BY_CALLER
                                                 : LOCUS__CHOSEN_BY_NONE));
    locus__record_append(context, &record);
    if (out)
        locus__record_copy_out(out, &record);
    return LOCUS_SUCCESS;
}

static size_t c_element_bytes(const locus_gemm_desc *desc)
{
    return locus_dtype_size(locus__output_dtype(desc->dtype));
}

/* With beta == 0, C is only written; but a strided C (ldc > n) or a larger
 * buffer keeps bytes the op leaves alone, so it is read in. */
static bool c_write_only(const locus_gemm_desc *resolved, size_t mn,
                         const locus_buffer *c)
{
    return resolved->beta == 0.0 && resolved->ldc == resolved->n &&
           mn * c_element_bytes(resolved) == c->bytes;
}

static locus_status gemm_scale_c(locus_context *context, locus_device *device,
                                 const locus_gemm_desc *resolved,
                                 locus_buffer *c, size_t mn,
                                 locus_record *record)
{
    locus__op_run run;
    locus__op_run_start(&run, context, &gemm_scale_op);
    bool write_only = c_write_only(resolved, mn, c);
    run.operands[0] = (locus__operand){
        c, write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    double c_bytes = (double)c_element_bytes(resolved) * (double)mn;
    double bytes = (write_only ? 1.0 : 2.0) * c_bytes;
    locus_buffer *inputs[] = {c};
    locus__op_cost cost = {.op = &locus__gemm_op.model,
                           .flops = (double)mn,
                           .bytes = bytes,
                           .inputs = inputs,
                           .input_count = write_only ? 0u : 1u,
                           .output_bytes = c_bytes,
                           .dtype = resolved->dtype};
    gemm_args args = {resolved, 0.0, bytes};
    return locus__op_dispatch(&run, device, &cost, &args, record);
}

static locus_status gemm_full(locus_context *context, locus_device *device,
                              const locus_gemm_desc *resolved, locus_buffer *a,
                              locus_buffer *b, locus_buffer *c, size_t mn,
                              size_t mnk, locus_record *record)
{
    locus__op_run run;
    locus__op_run_start(&run, context, &locus__gemm_op);
    bool write_only = c_write_only(resolved, mn, c);
    run.operands[0] = (locus__operand){a, LOCUS__READ, NULL};
    run.operands[1] = (locus__operand){b, LOCUS__READ, NULL};
    run.operands[2] = (locus__operand){
        c, write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    locus_status status = locus__op_check_aliasing(&run);
    if (status != LOCUS_SUCCESS)
        return status;
    const locus_gemm_desc *d = resolved;
    double c_bytes = (double)c_element_bytes(d) * (double)mn;
    double bytes =
        (double)locus_dtype_size(d->dtype) *
            ((double)d->m * (double)d->k + (double)d->k * (double)d->n) +
        (write_only ? 1.0 : 2.0) * c_bytes;
    locus_buffer *inputs[] = {a, b, c};
    locus__op_cost cost = {.op = &locus__gemm_op.model,
                           .flops = 2.0 * (double)mnk,
                           .bytes = bytes,
                           .inputs = inputs,
                           .input_count = write_only ? 2u : 3u,
                           .output_bytes = c_bytes,
                           .dtype = resolved->dtype};
    gemm_args args = {resolved, cost.flops, bytes};
    return locus__op_dispatch(&run, device, &cost, &args, record);
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
    if (locus__check_buffer_contexts(context, matrices,
                                     locus__gemm_op.operand_names,
                                     3) != LOCUS_SUCCESS)
        return LOCUS_ERROR_INVALID_ARGUMENT;
    locus_gemm_desc resolved;
    size_t mn, mnk;
    locus_status status = locus__gemm_check(context, device, desc, a, b, c,
                                            record, &resolved, &mn, &mnk);
    if (status != LOCUS_SUCCESS)
        return status;
    if (locus__gemm_does_nothing(&resolved) ||
        locus__gemm_only_scales(&resolved)) {
        status = locus__gemm_check_alias(a, b, c);
        if (status != LOCUS_SUCCESS)
            return status;
        if (locus__gemm_does_nothing(&resolved))
            return gemm_quick_return(context, device, desc->dtype, record);
        return gemm_scale_c(context, device, &resolved, c, mn, record);
    }
    return gemm_full(context, device, &resolved, a, b, c, mn, mnk, record);
}

static locus_status call_gemm(locus_context *context, locus_device *device,
                              const void *desc, locus_buffer *const *buffers,
                              double *result, locus_record *record)
{
    (void)result;
    return locus_gemm(context, device, desc, buffers[0], buffers[1], buffers[2],
                      record);
}

const locus__op_type locus__gemm_op = {
    .model = GEMM_MODEL,
    .operand_count = 3,
    .operand_names = {"a", "b", "c"},
    .launch = launch_gemm,
    .call = call_gemm,
};
