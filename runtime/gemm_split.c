/* One gemm computed by several devices at once: C's rows in blocks
 * proportional to weights, one thread per block. Blocks are computed
 * first and written into C only once every device has succeeded, so a
 * failure leaves C as it was (the transaction), except when a write-back
 * itself fails. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "account.h"
#include "buffer.h"
#include "device.h"
#include "context.h"
#include "fault.h"
#include "ops.h"
#include "record.h"
#include "scheduler.h"
#include "status.h"

#define FLOAT_BYTES sizeof(float)

typedef struct split_job split_job;

/* One device's block of rows. */
typedef struct split_part {
    split_job *job;
    locus_device *device;
    size_t index; /* in the caller's devices */
    size_t row_begin, rows;
    bool on_host; /* the device computes on host memory */
    pthread_t thread;
    bool started;
    /* What the backend reports of this block (algorithm, workspace,
     * transfers); merged into the op's record at the end. */
    locus_record record;
    locus_op_context op;
    /* The block of C until it is written back: in device memory, or (a
     * host device while the call is a transaction) in host memory. */
    void *device_c;
    /* Host rows of C: the block itself for a host device, staging for a
     * device's download when C is strided. */
    float *host_c;
    locus_status status;
    char error[2048];
} split_part;

struct split_job {
    locus_context *context;
    locus_gemm_desc desc; /* leading dimensions resolved */
    const float *a, *b;
    float *c;
    locus_buffer *b_buffer;
    locus__account account;
    /* More than one block: each writes C only after all have computed. */
    bool transaction;
    /* Guarded by lock: the blocks that have computed, out of expected. */
    pthread_mutex_t lock;
    pthread_cond_t reported_cond;
    size_t reported, expected;
    bool any_failed;
};

/* Our own lock, unlock or wait failing is a broken invariant, not an
 * error the caller could act on. */
static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "locus: %s failed: %s\n", what, strerror(rc));
        abort();
    }
}

/* ---- checks and the plan ------------------------------------------------- */

static locus_status check_devices(locus_context *context,
                                  locus_device *const *devices, size_t count)
{
    if (count == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device_count is 0: a split needs at least one "
                           "device");
    if (count > LOCUS__MAX_DEVICES)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device_count %zu is more than a context has (%d)",
                           count, LOCUS__MAX_DEVICES);
    for (size_t i = 0; i < count; i++) {
        const locus_device *device = devices[i];
        if (!device)
            return locus__fail(LOCUS_ERROR_NULL_ARGUMENT,
                               "devices[%zu] is NULL", i);
        if (device->context != context)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "devices[%zu] (%s) belongs to another context",
                               i, device->info.selector);
        for (size_t j = 0; j < i; j++)
            if (devices[j] == device)
                return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                   "devices[%zu] and devices[%zu] are both "
                                   "%s: list each device once",
                                   j, i, device->info.selector);
        if (!locus__device_offers(device, LOCUS__OP_GEMM))
            return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                               "gemm is not supported on devices[%zu], %s "
                               "(%s)",
                               i, device->info.selector, device->info.name);
    }
    return LOCUS_SUCCESS;
}

/* What locus_gemm_split and locus_gemm_split_rows both work out. */
typedef struct split_plan {
    locus_gemm_desc desc; /* leading dimensions resolved */
    size_t mn, mnk;
    bool c_write_only;
    double bytes; /* the fewest the op moves, as locus_gemm counts them */
    size_t rows[LOCUS__MAX_DEVICES];
} split_plan;

/* Two devices that are views of one piece of hardware (the same PCI
 * address: cuda:0 and NVIDIA's OpenCL opencl:1 on the H200 machine) are
 * one device to the plan: of each such group, only the view the model
 * expects to do the whole problem soonest (fixed + m * per_row; the
 * earlier in the caller's order on a tie) stays in, the others get no
 * rows. The two views are two driver contexts on one GPU: their blocks do
 * not add compute, they take turns on the same SMs and copy engines, and
 * the model, which sees two independent rates, would give the slower view
 * rows that only delay the faster one. On the H200 at 8192^3 the plan
 * gave opencl:1 31 rows and cuda:0 8161, and the split ran at 0.81x of
 * cuda:0 alone. Given weights are the caller's own plan and are kept. */
static void keep_one_view_per_hardware(locus_context *context,
                                       locus_device *const *devices,
                                       size_t count, double m,
                                       const double *fixed,
                                       const double *per_row, bool *used)
{
    for (size_t i = 0; i < count; i++) {
        for (size_t j = i + 1; used[i] && j < count; j++) {
            if (!used[j] ||
                !locus__device_same_hardware(devices[i], devices[j]))
                continue;
            double alone_i = fixed[i] + m * per_row[i];
            double alone_j = fixed[j] + m * per_row[j];
            size_t out = alone_j < alone_i ? i : j;
            size_t kept = out == i ? j : i;
            used[out] = false;
            locus__log(context, LOCUS_LOG_INFO,
                       "gemm split: %s and %s are one device (PCI %s); %s "
                       "(alone %.3g s) planned out, %s (alone %.3g s) keeps "
                       "the rows: two contexts on one GPU contend",
                       devices[i]->info.selector, devices[j]->info.selector,
                       devices[i]->info.pci_bus_id, devices[out]->info.selector,
                       out == i ? alone_i : alone_j,
                       devices[kept]->info.selector,
                       kept == i ? alone_i : alone_j);
        }
    }
}

/* The default shares: the scheduler models a block of r rows on device i
 * as fixed_i + r * per_row_i (B moved whole is fixed; A's and C's rows and
 * the flops are per row), and the plan finds the finishing time T at which
 * the blocks that fit, max(0, (T - fixed_i) / per_row_i), add up to m: all
 * devices finish together, and a device whose fixed cost alone is past T
 * gets nothing. A plain proportional split by throughput would give a slow
 * device that must first move all of B far too many rows. */
static locus_status model_shares(locus_context *context,
                                 locus_device *const *devices, size_t count,
                                 const locus_gemm_desc *desc, locus_buffer *b,
                                 bool c_read, double *shares)
{
    double fixed[LOCUS__MAX_DEVICES], per_row[LOCUS__MAX_DEVICES];
    double min_rows[LOCUS__MAX_DEVICES];
    bool used[LOCUS__MAX_DEVICES];
    double m = (double)desc->m;
    for (size_t i = 0; i < count; i++) {
        locus__sched_gemm_rows(context, devices[i], desc, b, c_read, &fixed[i],
                               &per_row[i], &min_rows[i]);
        if (!(per_row[i] > 0) || !isfinite(fixed[i]))
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "the scheduler's model of %s gives no rate; "
                               "give weights",
                               devices[i]->info.selector);
        used[i] = true;
    }
    keep_one_view_per_hardware(context, devices, count, m, fixed, per_row,
                               used);
    /* A device whose block would be too small to keep its workers busy,
     * and which would then finish after the others, is left out and the
     * rest planned again: at most once per device. */
    for (size_t round = 0; round <= count; round++) {
        double low = INFINITY, high = 0;
        for (size_t i = 0; i < count; i++) {
            if (!used[i])
                continue;
            low = fixed[i] < low ? fixed[i] : low;
            double alone = fixed[i] + m * per_row[i];
            high = alone > high ? alone : high;
        }
        for (int step = 0; step < 100; step++) {
            double t = 0.5 * (low + high), rows = 0;
            for (size_t i = 0; i < count; i++)
                if (used[i] && t > fixed[i])
                    rows += (t - fixed[i]) / per_row[i];
            if (rows < m)
                low = t;
            else
                high = t;
        }
        size_t in_use = 0;
        for (size_t i = 0; i < count; i++)
            in_use += used[i];
        bool dropped = false;
        for (size_t i = 0; i < count; i++) {
            shares[i] =
                used[i] && high > fixed[i] ? (high - fixed[i]) / per_row[i] : 0;
            bool too_few = shares[i] > 0 && shares[i] < min_rows[i];
            if (too_few && in_use > 1 && !dropped &&
                fixed[i] + min_rows[i] * per_row[i] > high) {
                used[i] = false;
                dropped = true;
            }
        }
        if (!dropped)
            break;
    }
    return LOCUS_SUCCESS;
}

/* rows[i] for devices[i]: the boundaries between blocks are the weights'
 * cumulative shares of m, rounded, so the rows add up to m whatever the
 * rounding, and a weight of 0 always gets 0 rows. */
static locus_status plan_rows(locus_context *context,
                              locus_device *const *devices, size_t count,
                              const double *weights,
                              const locus_gemm_desc *desc, locus_buffer *b,
                              bool c_read, size_t *rows)
{
    size_t m = desc->m;
    double modelled[LOCUS__MAX_DEVICES];
    if (!weights) {
        locus_status status =
            model_shares(context, devices, count, desc, b, c_read, modelled);
        if (status != LOCUS_SUCCESS)
            return status;
    }
    double scaled[LOCUS__MAX_DEVICES];
    double largest = 0;
    for (size_t i = 0; i < count; i++) {
        double w = weights ? weights[i] : modelled[i];
        if (!isfinite(w) || w < 0)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "weights[%zu] = %g: a weight is a finite "
                               "number, 0 or more",
                               i, w);
        scaled[i] = w;
        if (w > largest)
            largest = w;
    }
    if (largest == 0)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "all %zu weights are 0: at least one device needs "
                           "a positive weight",
                           count);
    /* Scaled to at most 1 each, so that the total cannot overflow. */
    double total = 0;
    for (size_t i = 0; i < count; i++) {
        scaled[i] /= largest;
        total += scaled[i];
    }
    double cumulative = 0;
    size_t previous = 0;
    for (size_t i = 0; i < count; i++) {
        cumulative += scaled[i];
        size_t boundary = m;
        if (i + 1 < count) {
            double at = floor((double)m * (cumulative / total) + 0.5);
            boundary = at >= (double)m ? m : (size_t)at;
            if (boundary < previous)
                boundary = previous;
        }
        rows[i] = boundary - previous;
        previous = boundary;
    }
    return LOCUS_SUCCESS;
}

/* The plan of a gemm that reads neither A nor B (alpha or k 0: C = beta C,
 * a pass over C) or does nothing (m or n 0): no split, whose transfers
 * would cost more than the pass, but all rows to one device, which then
 * runs locus_gemm's own case: the first host-memory device among those of
 * a positive weight (C is on the host: the split reads it there), else
 * the first of a positive weight. The weights are still checked. */
static locus_status plan_whole(locus_device *const *devices, size_t count,
                               const double *weights, size_t m, size_t *rows)
{
    size_t chosen = count;
    for (size_t i = 0; i < count; i++) {
        double w = weights ? weights[i] : 1.0;
        if (!isfinite(w) || w < 0)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "weights[%zu] = %g: a weight is a finite "
                               "number, 0 or more",
                               i, w);
        if (w == 0)
            continue;
        if (chosen == count || (devices[i]->backend->table->host_memory &&
                                !devices[chosen]->backend->table->host_memory))
            chosen = i;
    }
    if (chosen == count)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "all %zu weights are 0: at least one device needs "
                           "a positive weight",
                           count);
    for (size_t i = 0; i < count; i++)
        rows[i] = i == chosen ? m : 0;
    return LOCUS_SUCCESS;
}

/* Every check of a split call, then its plan. */
static locus_status prepare(locus_context *context,
                            locus_device *const *devices, size_t device_count,
                            const double *weights, const locus_gemm_desc *desc,
                            locus_buffer *a, locus_buffer *b, locus_buffer *c,
                            const locus_record *record, split_plan *plan)
{
    /* A, B or C may be NULL when it holds no elements, as in locus_gemm
     * (locus__gemm_check). */
    if (!context || !devices || !desc)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           !context   ? "context"
                           : !devices ? "devices"
                                      : "desc");
    locus_status status = check_devices(context, devices, device_count);
    if (status != LOCUS_SUCCESS)
        return status;
    status = locus__gemm_check(context, NULL, desc, a, b, c, record,
                               &plan->desc, &plan->mn, &plan->mnk);
    if (status != LOCUS_SUCCESS)
        return status;
    locus_buffer *buffers[3] = {a, b, c};
    static const char *const names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++)
        if (buffers[i] && buffers[i]->context != context)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "buffer %s belongs to another context",
                               names[i]);
    for (size_t i = 0; i < 2; i++)
        if (c && buffers[i] && locus__buffers_overlap(c, buffers[i]))
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "c and %s %s; the output must not alias an "
                               "input",
                               names[i],
                               c == buffers[i] ? "are the same buffer"
                                               : "overlap in memory");
    const locus_gemm_desc *d = &plan->desc;
    if (locus__gemm_only_scales(d) || locus__gemm_does_nothing(d))
        return plan_whole(devices, device_count, weights, d->m, plan->rows);
    /* As locus_gemm: C is only written when beta is 0 and the op covers
     * every byte of its buffer; otherwise its other bytes are kept. */
    plan->c_write_only =
        d->beta == 0.0 && d->ldc == d->n && plan->mn * FLOAT_BYTES == c->bytes;
    plan->bytes = (double)FLOAT_BYTES *
                  ((double)d->m * (double)d->k + (double)d->k * (double)d->n +
                   (plan->c_write_only ? 1.0 : 2.0) * (double)plan->mn);
    /* The host copies are pinned for each device that copies from them
     * (as a first copy through locus__buffer_acquire would), before the
     * plan, whose model assumes the pinned rates. */
    for (size_t i = 0; i < device_count; i++)
        if (!devices[i]->backend->table->host_memory)
            for (size_t j = 0; j < 3; j++)
                locus__buffer_pin_for(buffers[j], devices[i]);
    return plan_rows(context, devices, device_count, weights, d, b,
                     !plan->c_write_only, plan->rows);
}

LOCUS_API locus_status locus_gemm_split_rows(
    locus_context *context, locus_device *const *devices, size_t device_count,
    const double *weights, const locus_gemm_desc *desc, locus_buffer *a,
    locus_buffer *b, locus_buffer *c, size_t *rows)
{
    locus__clear_error();
    if (!rows)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "rows is NULL");
    split_plan plan;
    locus_status status = prepare(context, devices, device_count, weights, desc,
                                  a, b, c, NULL, &plan);
    if (status == LOCUS_SUCCESS)
        memcpy(rows, plan.rows, device_count * sizeof *rows);
    return status;
}

/* Host rows a transfer read or wrote, for the local/remote split: one
 * range when the rows are contiguous, else one per row, so the gaps
 * between strided rows are not counted. */
static void account_rows(split_part *part, const float *first, size_t rows,
                         size_t cols, size_t ld)
{
    uint64_t near = part->device->info.nearest_numa_mask;
    if (ld == cols) {
        locus__account_transfer(&part->op, first, rows * cols * FLOAT_BYTES,
                                near);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        locus__account_transfer(&part->op, first + r * ld, cols * FLOAT_BYTES,
                                near);
}

/* Copies rows x cols floats stored with leading dimension from_ld into
 * storage with to_ld. */
static void copy_rows(float *to, size_t to_ld, const float *from,
                      size_t from_ld, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(to + r * to_ld, from + r * from_ld, cols * FLOAT_BYTES);
}

/* New device memory holding the rows x cols floats stored at host with
 * leading dimension ld, tightly (its leading dimension is cols). Strided
 * rows are packed on the host first: a transfer copies one contiguous
 * range. */
static locus_status upload_block(split_part *part, const float *host,
                                 size_t rows, size_t cols, size_t ld,
                                 const char *what, void **memory)
{
    size_t bytes = rows * cols * FLOAT_BYTES;
    const float *tight = host;
    float *packed = NULL;
    if (ld != cols) {
        packed = locus__malloc(bytes);
        if (!packed)
            return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                               "%zu bytes to pack %s for %s", bytes, what,
                               part->device->info.selector);
        copy_rows(packed, cols, host, ld, rows, cols);
        tight = packed;
    }
    locus_status status = locus__device_alloc(part->device, bytes, memory);
    if (status == LOCUS_SUCCESS) {
        status = locus__device_upload(part->device, *memory, tight, bytes,
                                      &part->op);
        if (status != LOCUS_SUCCESS) {
            locus__device_free(part->device, *memory);
            *memory = NULL;
        }
    }
    if (status == LOCUS_SUCCESS)
        account_rows(part, host, rows, cols, ld);
    free(packed);
    return status;
}

/* ---- one block ----------------------------------------------------------- */

static locus_status compute_on_host(split_part *part)
{
    const split_job *job = part->job;
    const locus_gemm_desc *desc = &job->desc;
    locus_gemm_desc sub = *desc;
    sub.m = part->rows;
    const float *a = desc->trans_a ? job->a + part->row_begin
                                   : job->a + part->row_begin * desc->lda;
    float *c = job->c + part->row_begin * desc->ldc;
    if (job->transaction) {
        part->host_c = locus__malloc(part->rows * desc->n * FLOAT_BYTES);
        if (!part->host_c)
            return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                               "%zu x %zu block of c for %s", part->rows,
                               desc->n, part->device->info.selector);
        if (desc->beta != 0.0)
            copy_rows(part->host_c, desc->n, c, desc->ldc, part->rows, desc->n);
        c = part->host_c;
        sub.ldc = desc->n;
    }
    locus__backend_slot *slot = part->device->backend;
    return slot->table->gemm(slot->state, part->device->index_in_backend, &sub,
                             a, job->b, c, &part->op);
}

/* Whether the device already holds a current copy of B, which is then
 * used in place of an upload. Readers only ever add copies, and B is held
 * for reading by this op, so the answer stays true until the op ends. */
static bool holds_current_b(const split_part *part)
{
    locus_buffer *b = part->job->b_buffer;
    uint64_t bit = UINT64_C(1) << (part->device->ordinal + 1);
    must(pthread_mutex_lock(&b->state_lock), "pthread_mutex_lock");
    bool current = (b->valid & bit) != 0;
    must(pthread_mutex_unlock(&b->state_lock), "pthread_mutex_unlock");
    return current;
}

static locus_status compute_on_device(split_part *part)
{
    const split_job *job = part->job;
    const locus_gemm_desc *desc = &job->desc;
    locus_gemm_desc sub = *desc;
    sub.m = part->rows;
    size_t rows = part->rows, n = desc->n, k = desc->k;
    void *a = NULL, *b = NULL, *b_ours = NULL;

    /* A's rows, or with trans_a its columns: k rows of `rows` floats. */
    size_t a_rows = desc->trans_a ? k : rows;
    size_t a_cols = desc->trans_a ? rows : k;
    const float *a_host = desc->trans_a ? job->a + part->row_begin
                                        : job->a + part->row_begin * desc->lda;
    locus_status status =
        upload_block(part, a_host, a_rows, a_cols, desc->lda, "a", &a);
    sub.lda = a_cols;
    if (status != LOCUS_SUCCESS)
        return status;

    if (holds_current_b(part)) {
        status = locus__buffer_acquire(job->b_buffer, part->device, LOCUS__READ,
                                       &part->op, &b);
    } else {
        size_t b_rows = desc->trans_b ? n : k;
        size_t b_cols = desc->trans_b ? k : n;
        status =
            upload_block(part, job->b, b_rows, b_cols, desc->ldb, "b", &b_ours);
        b = b_ours;
        sub.ldb = b_cols;
    }
    if (status != LOCUS_SUCCESS)
        goto free_a;

    float *c_host = job->c + part->row_begin * desc->ldc;
    if (desc->beta != 0.0)
        status = upload_block(part, c_host, rows, n, desc->ldc, "c",
                              &part->device_c);
    else
        status = locus__device_alloc(part->device, rows * n * FLOAT_BYTES,
                                     &part->device_c);
    sub.ldc = n;
    if (status != LOCUS_SUCCESS)
        goto free_b;
    if (desc->ldc != n) {
        /* Staging for the download, made now: once the blocks are being
         * written back, nothing that can be avoided should fail. */
        part->host_c = locus__malloc(rows * n * FLOAT_BYTES);
        if (!part->host_c) {
            status = locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                                 "%zu x %zu staging of c for %s", rows, n,
                                 part->device->info.selector);
            goto free_b;
        }
    }
    locus__backend_slot *slot = part->device->backend;
    status = slot->table->gemm(slot->state, part->device->index_in_backend,
                               &sub, a, b, part->device_c, &part->op);
free_b:
    locus__device_free(part->device, b_ours);
free_a:
    locus__device_free(part->device, a);
    return status;
}

/* Puts the computed block into C's host rows. */
static locus_status write_back(split_part *part)
{
    const locus_gemm_desc *desc = &part->job->desc;
    size_t rows = part->rows, n = desc->n;
    float *c = part->job->c + part->row_begin * desc->ldc;
    if (part->on_host) {
        if (part->host_c)
            copy_rows(c, desc->ldc, part->host_c, n, rows, n);
        return LOCUS_SUCCESS;
    }
    float *target = part->host_c ? part->host_c : c;
    locus_status status =
        locus__device_download(part->device, part->device_c, target,
                               rows * n * FLOAT_BYTES, &part->op);
    if (status != LOCUS_SUCCESS)
        return status;
    if (part->host_c)
        copy_rows(c, desc->ldc, part->host_c, n, rows, n);
    account_rows(part, c, rows, n, desc->ldc);
    return LOCUS_SUCCESS;
}

/* Tells the others this block has computed (or failed) and waits for all
 * of them; true when every block succeeded and may be written back. */
static bool report_and_wait(split_part *part)
{
    split_job *job = part->job;
    must(pthread_mutex_lock(&job->lock), "pthread_mutex_lock");
    job->reported++;
    if (part->status != LOCUS_SUCCESS)
        job->any_failed = true;
    must(pthread_cond_broadcast(&job->reported_cond), "pthread_cond_broadcast");
    while (job->reported < job->expected)
        must(pthread_cond_wait(&job->reported_cond, &job->lock),
             "pthread_cond_wait");
    bool go = !job->any_failed;
    must(pthread_mutex_unlock(&job->lock), "pthread_mutex_unlock");
    return go;
}

static void keep_error(split_part *part, locus_status status)
{
    part->status = status;
    if (status != LOCUS_SUCCESS)
        snprintf(part->error, sizeof part->error, "%s",
                 locus__error_detail(status, locus_last_error()));
}

static void run_part(split_part *part)
{
    locus__clear_error();
    keep_error(part,
               part->on_host ? compute_on_host(part) : compute_on_device(part));
    if (report_and_wait(part)) {
        locus__clear_error();
        keep_error(part, write_back(part));
    }
    if (!part->on_host)
        locus__device_free(part->device, part->device_c);
    part->device_c = NULL;
    free(part->host_c);
    part->host_c = NULL;
}

static void *part_thread(void *arg)
{
    run_part(arg);
    return NULL;
}

/* ---- the call ------------------------------------------------------------ */

/* Buffers locked in address order, as ops.c does, so that ops taking the
 * same buffers in other roles cannot deadlock with this one. */
static void lock_buffers(locus_buffer **buffers, const bool *write,
                         size_t count, bool locking)
{
    size_t order[3] = {0, 1, 2};
    for (size_t i = 1; i < count; i++)
        for (size_t j = i; j > 0 && (uintptr_t)buffers[order[j - 1]] >
                                        (uintptr_t)buffers[order[j]];
             j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t i = 0; i < count; i++) {
        locus_buffer *buffer = buffers[order[i]];
        if (i > 0 && buffer == buffers[order[i - 1]])
            continue; /* a == b: held once */
        int rc = !locking          ? pthread_rwlock_unlock(&buffer->use_lock)
                 : write[order[i]] ? pthread_rwlock_wrlock(&buffer->use_lock)
                                   : pthread_rwlock_rdlock(&buffer->use_lock);
        must(rc, "pthread_rwlock");
    }
}

/* The host copy as a device: what locus__buffer_acquire and
 * locus__buffer_written_on need to make host copies current and mark them
 * so, whether or not the context has loaded the CPU backend. */
static const locus_backend host_table = {
    .struct_size = sizeof(locus_backend),
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "host",
    .host_memory = 1,
};

/* "cuda:0+cpu": the devices given rows, in the caller's order; "..." ends
 * a name cut short. */
static void join_selectors(const split_part *parts, size_t count, char *text,
                           size_t capacity)
{
    size_t used = 0;
    text[0] = '\0';
    for (size_t p = 0; p < count; p++) {
        int n = snprintf(text + used, capacity - used, "%s%s", p ? "+" : "",
                         parts[p].device->info.selector);
        if (n < 0 || (size_t)n >= capacity - used) {
            snprintf(text + capacity - 4, 4, "...");
            return;
        }
        used += (size_t)n;
    }
}

LOCUS_API locus_status locus_gemm_split(
    locus_context *context, locus_device *const *devices, size_t device_count,
    const double *weights, const locus_gemm_desc *desc, locus_buffer *a,
    locus_buffer *b, locus_buffer *c, locus_record *record)
{
    locus__clear_error();
    split_plan plan;
    locus_status status = prepare(context, devices, device_count, weights, desc,
                                  a, b, c, record, &plan);
    if (status != LOCUS_SUCCESS)
        return status;
    split_job job = {.context = context, .desc = plan.desc};
    const size_t *rows = plan.rows;
    locus_buffer *buffers[3] = {a, b, c};

    /* The blocks, the first host device's first: it runs on this thread,
     * as does the first block when no device computes on the host. */
    size_t part_count = 0, row = 0;
    for (size_t i = 0; i < device_count; i++)
        part_count += rows[i] > 0;
    /* A plan that gives every row to one device is that device's own
     * gemm: no thread, no block temporaries, and the operands stay where
     * its ordinary op keeps them (on the H200 the split's own cost made
     * cuda:0 + cpu, the CPU planned out, 0.77-0.98x cuda:0 alone). */
    for (size_t i = 0; part_count <= 1 && i < device_count; i++)
        if (rows[i] == plan.desc.m) {
            locus__log(context, LOCUS_LOG_INFO,
                       "gemm split of %zu rows: all to %s, its own gemm",
                       plan.desc.m, devices[i]->info.selector);
            return locus_gemm(context, devices[i], desc, a, b, c, record);
        }
    /* On the heap: a block's error detail alone is 2 KiB, and the caller's
     * thread may have a small stack. */
    split_part *parts = locus__calloc(part_count, sizeof *parts);
    if (!parts)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                           "state of a split over %zu devices", part_count);
    part_count = 0;
    for (size_t i = 0; i < device_count; i++) {
        if (rows[i] > 0) {
            split_part *part = &parts[part_count++];
            part->job = &job;
            part->device = devices[i];
            part->index = i;
            part->row_begin = row;
            part->rows = rows[i];
            part->on_host = devices[i]->backend->table->host_memory != 0;
            locus_record_init(&part->record);
            part->op.record = &part->record;
            part->op.runtime_private = &job.account;
        }
        row += rows[i];
    }
    char shares[512] = "";
    for (size_t p = 0, used = 0; p < part_count && used < sizeof shares; p++) {
        int n = snprintf(shares + used, sizeof shares - used, "%s%s %zu",
                         p ? ", " : "", parts[p].device->info.selector,
                         parts[p].rows);
        used += n > 0 ? (size_t)n : 0;
    }
    locus__log(context, LOCUS_LOG_INFO, "gemm split of %zu rows (%s): %s",
               job.desc.m, weights ? "weights given" : "the cost model's",
               shares);
    char selectors[sizeof record->device];
    join_selectors(parts, part_count, selectors, sizeof selectors);
    for (size_t p = 1; p < part_count; p++)
        if (parts[p].on_host && !parts[0].on_host) {
            split_part first = parts[p];
            memmove(&parts[1], &parts[0], p * sizeof parts[0]);
            parts[0] = first;
            break;
        }
    job.transaction = part_count > 1;

    bool c_write_only = plan.c_write_only;
    bool write[3] = {false, false, true};
    locus__backend_slot host_slot = {.name = "host", .table = &host_table};
    locus_device host_view = {.context = context, .backend = &host_slot};
    snprintf(host_view.info.selector, sizeof host_view.info.selector, "host");

    locus_record full;
    locus_record_init(&full);
    snprintf(full.op, sizeof full.op, "gemm");
    snprintf(full.device, sizeof full.device, "%s", selectors);
    snprintf(full.algorithm, sizeof full.algorithm, "split");
    snprintf(full.chosen_by, sizeof full.chosen_by, "caller");
    full.flops = 2.0 * (double)plan.mnk;
    full.bytes = (uint64_t)plan.bytes;
    locus_op_context main_op = {.record = &full,
                                .runtime_private = &job.account};

    status =
        locus__account_begin(&job.account, &context->topology, context->pool);
    if (status != LOCUS_SUCCESS)
        goto free_parts;
    locus__account_use_buffers(&job.account, buffers, 3);
    int rc = pthread_mutex_init(&job.lock, NULL);
    if (rc != 0) {
        status =
            locus__fail(LOCUS_ERROR_SYSTEM, "split mutex: %s", strerror(rc));
        goto release_account;
    }
    rc = pthread_cond_init(&job.reported_cond, NULL);
    if (rc != 0) {
        status = locus__fail(LOCUS_ERROR_SYSTEM, "split condition: %s",
                             strerror(rc));
        goto destroy_mutex;
    }
    job.b_buffer = b;
    double started = locus__now_seconds();
    lock_buffers(buffers, write, 3, true);
    void *host[3];
    locus__access access[3] = {LOCUS__READ, LOCUS__READ,
                               c_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE};
    for (size_t i = 0; i < 3 && status == LOCUS_SUCCESS; i++)
        status = locus__buffer_acquire(buffers[i], &host_view, access[i],
                                       &main_op, &host[i]);
    if (status != LOCUS_SUCCESS)
        goto unlock;
    job.a = host[0];
    job.b = host[1];
    job.c = host[2];

    job.expected = part_count;
    for (size_t p = 1; p < part_count; p++) {
        rc = pthread_create(&parts[p].thread, NULL, part_thread, &parts[p]);
        if (rc == 0) {
            parts[p].started = true;
            continue;
        }
        parts[p].status = LOCUS_ERROR_SYSTEM;
        snprintf(parts[p].error, sizeof parts[p].error,
                 "cannot start its thread: %s", strerror(rc));
        must(pthread_mutex_lock(&job.lock), "pthread_mutex_lock");
        job.expected--;
        job.any_failed = true;
        must(pthread_cond_broadcast(&job.reported_cond),
             "pthread_cond_broadcast");
        must(pthread_mutex_unlock(&job.lock), "pthread_mutex_unlock");
    }
    run_part(&parts[0]);
    for (size_t p = 1; p < part_count; p++)
        if (parts[p].started)
            must(pthread_join(parts[p].thread, NULL), "pthread_join");

    /* The first failure in the caller's order of devices. */
    const split_part *failed = NULL;
    bool computed = !job.any_failed;
    for (size_t p = 0; p < part_count; p++) {
        const split_part *part = &parts[p];
        full.bytes_to_device += part->record.bytes_to_device;
        full.bytes_from_device += part->record.bytes_from_device;
        full.workspace_bytes += part->record.workspace_bytes;
        if (part->status != LOCUS_SUCCESS &&
            (!failed || part->index < failed->index))
            failed = part;
    }
    if (failed) {
        status = locus__fail(
            failed->status, "gemm split: %s (rows %zu to %zu of %zu) %s: %s",
            failed->device->info.selector, failed->row_begin,
            failed->row_begin + failed->rows - 1, job.desc.m,
            computed ? "failed writing its rows back" : "failed",
            failed->error);
        /* Some rows may have been written (in the write-back, or by a lone
         * host block computing in place): the host copy is no longer to be
         * trusted where another copy is current. */
        if (computed || (!job.transaction && parts[0].on_host))
            locus__buffer_failed_on(c, &host_view);
    } else {
        locus__buffer_written_on(c, &host_view);
    }
unlock:
    lock_buffers(buffers, write, 3, false);
    full.seconds = locus__now_seconds() - started;
    must(pthread_cond_destroy(&job.reported_cond), "pthread_cond_destroy");
destroy_mutex:
    must(pthread_mutex_destroy(&job.lock), "pthread_mutex_destroy");
release_account:
    if (status == LOCUS_SUCCESS && context->topology.is_this_system) {
        locus__account_result account;
        locus__account_finish(&job.account, &account);
        full.local_bytes = account.local_bytes;
        full.remote_bytes = account.remote_bytes;
        full.provenance = account.provenance;
    }
    locus__account_release(&job.account);
    if (status == LOCUS_SUCCESS) {
        locus__record_append(context, &full);
        if (record)
            locus__record_copy_out(record, &full);
    }
free_parts:
    free(parts);
    return status;
}
