/* One gemm computed by several devices at once: C's rows in blocks
 * proportional to weights (the plan, gemm_split_plan.c), one thread per
 * block. The op goes through the life cycle every op does (ops.h), on the
 * host copies of its buffers; each block moves its own rows. Blocks are
 * computed first and written into C only once every device has succeeded,
 * so a failure leaves C as it was (the transaction), except when a
 * write-back itself fails. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "account.h"
#include "buffer.h"
#include "context_types.h"
#include "device.h"
#include "fault.h"
#include "gemm_split.h"
#include "ops.h"
#include "status.h"

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
    /* The op as a whole, on the host copies: its locks, accounting and
     * record. The blocks account their transfers into it. */
    locus__op_run run;
    locus_gemm_desc desc; /* leading dimensions resolved */
    /* The host copies, once the run has acquired them. */
    const float *a, *b;
    float *c;
    locus_buffer *b_buffer;
    split_part *parts; /* parts[0] runs on the calling thread */
    size_t part_count;
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

/* ---- moving rows --------------------------------------------------------- */

/* Host rows a transfer read or wrote, for the local/remote split: one
 * range when the rows are contiguous, else one per row, so the gaps
 * between strided rows are not counted. */
static void account_rows(split_part *part, const float *first, size_t rows,
                         size_t cols, size_t ld)
{
    uint64_t near = part->device->info.nearest_numa_mask;
    if (ld == cols) {
        locus__account_transfer(&part->op, first,
                                rows * cols * LOCUS__SPLIT_ELEMENT_BYTES, near);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        locus__account_transfer(&part->op, first + r * ld,
                                cols * LOCUS__SPLIT_ELEMENT_BYTES, near);
}

/* Copies rows x cols floats stored with leading dimension from_ld into
 * storage with to_ld. */
static void copy_rows(float *to, size_t to_ld, const float *from,
                      size_t from_ld, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(to + r * to_ld, from + r * from_ld,
               cols * LOCUS__SPLIT_ELEMENT_BYTES);
}

/* New device memory holding the rows x cols floats stored at host with
 * leading dimension ld, tightly (its leading dimension is cols). Strided
 * rows are packed on the host first: a transfer copies one contiguous
 * range. */
static locus_status upload_block(split_part *part, const float *host,
                                 size_t rows, size_t cols, size_t ld,
                                 const char *what, void **memory)
{
    size_t bytes = rows * cols * LOCUS__SPLIT_ELEMENT_BYTES;
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
        part->host_c =
            locus__malloc(part->rows * desc->n * LOCUS__SPLIT_ELEMENT_BYTES);
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
        status = locus__device_alloc(part->device,
                                     rows * n * LOCUS__SPLIT_ELEMENT_BYTES,
                                     &part->device_c);
    sub.ldc = n;
    if (status != LOCUS_SUCCESS)
        goto free_b;
    if (desc->ldc != n) {
        /* Staging for the download, made now: once the blocks are being
         * written back, nothing that can be avoided should fail. */
        part->host_c = locus__malloc(rows * n * LOCUS__SPLIT_ELEMENT_BYTES);
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
    locus_status status = locus__device_download(
        part->device, part->device_c, target,
        rows * n * LOCUS__SPLIT_ELEMENT_BYTES, &part->op);
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

/* The blocks of the devices given rows, in the caller's order. */
static locus_status make_parts(split_job *job, locus_device *const *devices,
                               const size_t *rows, size_t count)
{
    size_t part_count = 0, row = 0;
    for (size_t i = 0; i < count; i++)
        part_count += rows[i] > 0;
    /* On the heap: a block's error detail alone is 2 KiB, and the caller's
     * thread may have a small stack. */
    job->parts = locus__calloc(part_count, sizeof *job->parts);
    if (!job->parts)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY,
                           "state of a split over %zu devices", part_count);
    job->part_count = part_count;
    part_count = 0;
    for (size_t i = 0; i < count; i++) {
        if (rows[i] > 0) {
            split_part *part = &job->parts[part_count++];
            part->job = job;
            part->device = devices[i];
            part->index = i;
            part->row_begin = row;
            part->rows = rows[i];
            part->on_host = devices[i]->backend->table->host_memory != 0;
            locus_record_init(&part->record);
            part->op.record = &part->record;
            part->op.runtime_private = &job->run.account;
        }
        row += rows[i];
    }
    job->transaction = job->part_count > 1;
    return LOCUS_SUCCESS;
}

static void log_shares(const split_job *job, const double *weights)
{
    char shares[512] = "";
    for (size_t p = 0, used = 0; p < job->part_count && used < sizeof shares;
         p++) {
        int n = snprintf(shares + used, sizeof shares - used, "%s%s %zu",
                         p ? ", " : "", job->parts[p].device->info.selector,
                         job->parts[p].rows);
        used += n > 0 ? (size_t)n : 0;
    }
    locus__log(job->run.context, LOCUS_LOG_INFO,
               "gemm split of %zu rows (%s): %s", job->desc.m,
               weights ? "weights given" : "the cost model's", shares);
}

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

/* The first host device's block runs on the calling thread, as does the
 * first block when no device computes on the host. */
static void put_host_part_first(split_job *job)
{
    split_part *parts = job->parts;
    for (size_t p = 1; p < job->part_count; p++)
        if (parts[p].on_host && !parts[0].on_host) {
            split_part first = parts[p];
            memmove(&parts[1], &parts[0], p * sizeof parts[0]);
            parts[0] = first;
            break;
        }
}

static locus_status init_sync(split_job *job)
{
    int rc = pthread_mutex_init(&job->lock, NULL);
    if (rc != 0)
        return locus__fail(LOCUS_ERROR_SYSTEM, "split mutex: %s", strerror(rc));
    rc = pthread_cond_init(&job->reported_cond, NULL);
    if (rc != 0) {
        must(pthread_mutex_destroy(&job->lock), "pthread_mutex_destroy");
        return locus__fail(LOCUS_ERROR_SYSTEM, "split condition: %s",
                           strerror(rc));
    }
    return LOCUS_SUCCESS;
}

static void destroy_sync(split_job *job)
{
    must(pthread_cond_destroy(&job->reported_cond), "pthread_cond_destroy");
    must(pthread_mutex_destroy(&job->lock), "pthread_mutex_destroy");
}

/* A thread for every block but the first; a block whose thread cannot
 * start has failed, and the others stop waiting for it. */
static void start_threads(split_job *job)
{
    job->expected = job->part_count;
    for (size_t p = 1; p < job->part_count; p++) {
        split_part *part = &job->parts[p];
        int rc = pthread_create(&part->thread, NULL, part_thread, part);
        if (rc == 0) {
            part->started = true;
            continue;
        }
        part->status = LOCUS_ERROR_SYSTEM;
        snprintf(part->error, sizeof part->error, "cannot start its thread: %s",
                 strerror(rc));
        must(pthread_mutex_lock(&job->lock), "pthread_mutex_lock");
        job->expected--;
        job->any_failed = true;
        must(pthread_cond_broadcast(&job->reported_cond),
             "pthread_cond_broadcast");
        must(pthread_mutex_unlock(&job->lock), "pthread_mutex_unlock");
    }
}

static void join_threads(split_job *job)
{
    for (size_t p = 1; p < job->part_count; p++)
        if (job->parts[p].started)
            must(pthread_join(job->parts[p].thread, NULL), "pthread_join");
}

/* The blocks' transfers and workspace summed into the op's record, and the
 * op's status: the first failure in the caller's order of devices. */
static locus_status gather_blocks(split_job *job)
{
    locus_record *full = &job->run.record;
    const split_part *failed = NULL;
    bool computed = !job->any_failed;
    for (size_t p = 0; p < job->part_count; p++) {
        const split_part *part = &job->parts[p];
        full->bytes_to_device += part->record.bytes_to_device;
        full->bytes_from_device += part->record.bytes_from_device;
        full->workspace_bytes += part->record.workspace_bytes;
        if (part->status != LOCUS_SUCCESS &&
            (!failed || part->index < failed->index))
            failed = part;
    }
    if (!failed)
        return LOCUS_SUCCESS;
    /* Some rows may have been written (in the write-back, or by a lone
     * host block computing in place): the host copy is then no longer to
     * be trusted where another copy is current. Otherwise C is as it was. */
    job->run.outputs_untouched =
        !computed && (job->transaction || !job->parts[0].on_host);
    return locus__fail(
        failed->status, "gemm split: %s (rows %zu to %zu of %zu) %s: %s",
        failed->device->info.selector, failed->row_begin,
        failed->row_begin + failed->rows - 1, job->desc.m,
        computed ? "failed writing its rows back" : "failed", failed->error);
}

/* The op's life cycle around the blocks: the host copies made current and
 * locked, the blocks run, C marked written there, the record. */
static locus_status run_blocks(split_job *job, const locus__split_plan *plan,
                               locus_record *out)
{
    locus__op_run *run = &job->run;
    locus_status status = locus__op_begin(run);
    if (status != LOCUS_SUCCESS)
        return status;
    join_selectors(job->parts, job->part_count, run->record.device,
                   sizeof run->record.device);
    locus_copy_name(run->record.algorithm, sizeof run->record.algorithm,
                    "split");
    locus_copy_name(run->record.dtype, sizeof run->record.dtype,
                    locus_dtype_str(LOCUS_DTYPE_F32));
    run->record.flops = 2.0 * (double)plan->mnk;
    run->record.bytes = (uint64_t)plan->bytes;
    job->a = run->operands[0].memory;
    job->b = run->operands[1].memory;
    job->c = run->operands[2].memory;
    put_host_part_first(job);
    start_threads(job);
    run_part(&job->parts[0]);
    join_threads(job);
    return locus__op_end(run, gather_blocks(job), out);
}

/* A plan that gives every row to one device is that device's own gemm: no
 * thread, no block temporaries, and the operands stay where its ordinary
 * op keeps them (a split's own cost made it slower than the device
 * alone). The device's index, or count when the plan splits. */
static size_t sole_device(const locus__split_plan *plan, size_t count)
{
    size_t given = 0;
    for (size_t i = 0; i < count; i++)
        given += plan->rows[i] > 0;
    for (size_t i = 0; given <= 1 && i < count; i++)
        if (plan->rows[i] == plan->desc.m)
            return i;
    return count;
}

LOCUS_API locus_status locus_gemm_split(
    locus_context *context, locus_device *const *devices, size_t device_count,
    const double *weights, const locus_gemm_desc *desc, locus_buffer *a,
    locus_buffer *b, locus_buffer *c, locus_record *record)
{
    locus__clear_error();
    locus__split_plan plan;
    locus_status status = locus__split_prepare(
        context, devices, device_count, weights, desc, a, b, c, record, &plan);
    if (status != LOCUS_SUCCESS)
        return status;
    size_t sole = sole_device(&plan, device_count);
    if (sole < device_count) {
        locus__log(context, LOCUS_LOG_INFO,
                   "gemm split of %zu rows: all to %s, its own gemm",
                   plan.desc.m, devices[sole]->info.selector);
        return locus_gemm(context, devices[sole], desc, a, b, c, record);
    }
    split_job job = {
        .run = {.context = context,
                .type = &locus__gemm_op,
                .choice = {.chosen_by = LOCUS__CHOSEN_BY_CALLER}},
        .desc = plan.desc,
        .b_buffer = b,
    };
    job.run.operands[0] = (locus__operand){a, LOCUS__READ, NULL};
    job.run.operands[1] = (locus__operand){b, LOCUS__READ, NULL};
    job.run.operands[2] = (locus__operand){
        c, plan.c_write_only ? LOCUS__WRITE : LOCUS__READ_WRITE, NULL};
    status = make_parts(&job, devices, plan.rows, device_count);
    if (status != LOCUS_SUCCESS)
        return status;
    log_shares(&job, weights);
    status = init_sync(&job);
    if (status == LOCUS_SUCCESS) {
        status = run_blocks(&job, &plan, record);
        destroy_sync(&job);
    }
    free(job.parts);
    return status;
}
