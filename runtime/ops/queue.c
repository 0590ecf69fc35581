/* Queues and events: a thread per queue runs a FIFO of closures (an op with
 * its copied descriptor, or a wait on an event) through the synchronous
 * ops, so validation, device choice, buffer ordering and records are the
 * same as for a direct call. Events are reference counted: the caller's
 * hold, the queue's until the op completes, and one per wait enqueued on
 * it, so any of them may go first. */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "buffer.h"
#include "context_types.h"
#include "fault.h"
#include "ops.h"
#include "queue_prefetch.h"
#include "scheduler.h"
#include "status.h"

/* As long as the per-thread detail (status.c), so nothing is cut. */
#define DETAIL_CAPACITY 2048

struct locus_event {
    locus_context *context;
    pthread_mutex_t lock;
    pthread_cond_t completed;
    /* Guarded by lock. error is written once, before done is set, and only
     * read after: from then on it needs no lock. */
    int holds;
    bool done;
    locus_status status;
    char error[DETAIL_CAPACITY];
};

typedef struct queue_item queue_item;
typedef locus_status (*item_fn)(locus_queue *queue, queue_item *item);

/* One closure of the FIFO. */
struct queue_item {
    queue_item *next;
    item_fn run;
    const locus__op_type *type; /* an op's kind; NULL for a wait */
    const char *what;           /* the op's name, or "wait" */
    uint64_t op_index;          /* 1 for the queue's first op; 0 for a wait */
    union {
        locus_reduce_desc reduce;
        locus_gemm_desc gemm;
        locus_conv2d_desc conv2d;
    } desc;
    locus_buffer *buffers[LOCUS__OP_MAX_OPERANDS];
    double *result;
    locus_record *record;
    /* An op's: completes with it (NULL: none wanted). A wait's: the event
     * waited on. Either way the item holds it. */
    locus_event *event;
    /* The queue's copying thread was given this op's inputs. */
    bool prefetched;
};

struct locus_queue {
    locus_context *context;
    locus_device *device;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work; /* an item was added, or the queue is stopping */
    pthread_cond_t idle; /* completed moved */
    /* Guarded by lock. */
    queue_item *head, *tail;
    uint64_t enqueued, completed, ops;
    bool stopping;
    locus_status failure; /* the first since the last finish */
    char failure_detail[DETAIL_CAPACITY + 64];
    /* Uploads beside compute (queue_prefetch.h): on for a queue device
     * that offers them, unless LOCUS_QUEUE_OVERLAP=0. */
    bool overlap;
    locus__prefetcher prefetcher;
    /* Results sent back beside the next op: on with overlap for a device
     * that offers prefetch_to_host. */
    bool write_back;
    locus__prefetcher writer;
};

/* A lock, unlock or wait on our own objects fails only when they are
 * corrupt or misused, an invariant broken inside the runtime: no status
 * could make the caller's state right again. */
static void must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "locus: %s failed: %s\n", what, strerror(rc));
        abort();
    }
}

static void lock(pthread_mutex_t *mutex)
{
    must(pthread_mutex_lock(mutex), "pthread_mutex_lock");
}

static void unlock(pthread_mutex_t *mutex)
{
    must(pthread_mutex_unlock(mutex), "pthread_mutex_unlock");
}

static void wait_on(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
    must(pthread_cond_wait(cond, mutex), "pthread_cond_wait");
}

static void broadcast(pthread_cond_t *cond)
{
    must(pthread_cond_broadcast(cond), "pthread_cond_broadcast");
}

/* Initializes a mutex and a condition variable, or neither. */
static locus_status init_pair(pthread_mutex_t *mutex, pthread_cond_t *cond,
                              const char *what)
{
    int rc = pthread_mutex_init(mutex, NULL);
    if (rc != 0)
        return locus__fail(LOCUS_ERROR_SYSTEM, "%s mutex: %s", what,
                           strerror(rc));
    rc = pthread_cond_init(cond, NULL);
    if (rc != 0) {
        must(pthread_mutex_destroy(mutex), "pthread_mutex_destroy");
        return locus__fail(LOCUS_ERROR_SYSTEM, "%s condition: %s", what,
                           strerror(rc));
    }
    return LOCUS_SUCCESS;
}

/* ---- events -------------------------------------------------------------- */

static locus_status event_new(locus_context *context, int holds,
                              locus_event **out)
{
    locus_event *event = locus__calloc(1, sizeof *event);
    if (!event)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "event");
    locus_status status = init_pair(&event->lock, &event->completed, "event");
    if (status != LOCUS_SUCCESS) {
        free(event);
        return status;
    }
    event->context = context;
    event->holds = holds;
    *out = event;
    return LOCUS_SUCCESS;
}

static void event_hold(locus_event *event)
{
    lock(&event->lock);
    event->holds++;
    unlock(&event->lock);
}

static void event_release(locus_event *event)
{
    lock(&event->lock);
    bool last = --event->holds == 0;
    unlock(&event->lock);
    if (!last)
        return;
    must(pthread_cond_destroy(&event->completed), "pthread_cond_destroy");
    must(pthread_mutex_destroy(&event->lock), "pthread_mutex_destroy");
    free(event);
}

static void event_complete(locus_event *event, locus_status status,
                           const char *error)
{
    lock(&event->lock);
    event->status = status;
    snprintf(event->error, sizeof event->error, "%s", error);
    event->done = true;
    broadcast(&event->completed);
    unlock(&event->lock);
}

/* Waits for the event; returns its status. */
static locus_status event_await(locus_event *event)
{
    lock(&event->lock);
    while (!event->done)
        wait_on(&event->completed, &event->lock);
    locus_status status = event->status;
    unlock(&event->lock);
    return status;
}

LOCUS_API locus_status locus_event_wait(locus_event *event)
{
    locus__clear_error();
    if (!event)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "event is NULL");
    locus_status status = event_await(event);
    if (status != LOCUS_SUCCESS)
        return locus__fail(status, "%s",
                           locus__error_detail(status, event->error));
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_event_query(locus_event *event, int *done)
{
    locus__clear_error();
    if (!event || !done)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           event ? "done" : "event");
    lock(&event->lock);
    *done = event->done ? 1 : 0;
    unlock(&event->lock);
    return LOCUS_SUCCESS;
}

LOCUS_API const char *locus_event_error(locus_event *event)
{
    if (!event)
        return "";
    lock(&event->lock);
    bool done = event->done;
    unlock(&event->lock);
    return done ? event->error : "";
}

LOCUS_API void locus_event_destroy(locus_event *event)
{
    if (event)
        event_release(event);
}

/* ---- the queue's thread -------------------------------------------------- */

/* An op runs through its public entry point, from the op table. */
static locus_status run_op(locus_queue *queue, queue_item *item)
{
    return item->type->call(queue->context, queue->device, &item->desc,
                            item->buffers, item->result, item->record);
}

static locus_status run_wait(locus_queue *queue, queue_item *item)
{
    (void)queue;
    locus_status status = event_await(item->event);
    if (status != LOCUS_SUCCESS)
        return locus__fail(status, "the event waited on failed: %s",
                           locus__error_detail(status, item->event->error));
    return LOCUS_SUCCESS;
}

/* Whether an op writes a buffer: its last operand. Reduce writes only
 * its host result. */
static bool has_output(const locus__op_type *type)
{
    return type != &locus__reduce_op;
}

/* The inputs of an op: every operand but the output. */
static size_t input_count(const locus__op_type *type)
{
    return has_output(type) ? type->operand_count - 1 : type->operand_count;
}

/* Whether buffer overlaps an operand of the op item. */
static bool used_by(const queue_item *item, const locus_buffer *buffer)
{
    for (size_t i = 0; i < item->type->operand_count; i++)
        if (item->buffers[i] &&
            locus__buffers_overlap(item->buffers[i], buffer))
            return true;
    return false;
}

/* Before op item runs: gives the copying thread the inputs of the op after
 * it, next, that item does not touch (a buffer item writes, or reads and
 * so may upload itself, is left to next's own acquire). Only from op to
 * op: a wait may stand for another queue's write of next's inputs. */
static void prefetch_next(locus_queue *queue, const queue_item *item,
                          queue_item *next)
{
    if (!queue->overlap || !item->type || !next || !next->type)
        return;
    /* alpha or k 0: gemm reads neither A nor B. */
    if (next->type == &locus__gemm_op &&
        (next->desc.gemm.alpha == 0 || next->desc.gemm.k == 0))
        return;
    locus_buffer *inputs[LOCUS__OP_MAX_OPERANDS];
    size_t count = 0;
    for (size_t i = 0; i < input_count(next->type); i++) {
        locus_buffer *buffer = next->buffers[i];
        bool seen = false;
        for (size_t j = 0; j < count; j++)
            seen = seen || inputs[j] == buffer;
        if (buffer && !seen && !used_by(item, buffer))
            inputs[count++] = buffer;
    }
    if (count == 0)
        return;
    locus__prefetcher_give(&queue->prefetcher, inputs, count);
    next->prefetched = true;
}

/* After op item succeeded, before it is reported complete: its output
 * goes back to its host copy beside the next op, unless the next op
 * already queued uses it (it would wait for the copy, or overwrite it). */
static void write_back_output(locus_queue *queue, const queue_item *item)
{
    if (!queue->write_back || !item->type || !has_output(item->type))
        return;
    locus_buffer *output = item->buffers[item->type->operand_count - 1];
    if (!output)
        return;
    lock(&queue->lock);
    const queue_item *next = queue->head;
    bool used = next && next->type && used_by(next, output);
    unlock(&queue->lock);
    if (!used)
        locus__writer_give(&queue->writer, output);
}

/* Runs one item and makes its outcome known: to its event, and to the
 * queue's first failure. An op whose inputs were being copied waits for
 * them first and fails with the copy's failure. */
static void run_item(locus_queue *queue, queue_item *item, queue_item *next)
{
    locus__clear_error();
    locus_status status = LOCUS_SUCCESS;
    size_t prefetched = 0;
    if (item->prefetched)
        status = locus__prefetcher_collect(&queue->prefetcher, &prefetched);
    prefetch_next(queue, item, next);
    if (status == LOCUS_SUCCESS)
        status = item->run(queue, item);
    /* The copies the op did not make itself are its transfers all the
     * same. */
    if (status == LOCUS_SUCCESS && item->record)
        item->record->bytes_to_device += prefetched;
    if (status == LOCUS_SUCCESS)
        write_back_output(queue, item);
    const char *detail = status == LOCUS_SUCCESS ? "" : locus_last_error();
    bool is_op = item->type != NULL;
    if (item->event && is_op)
        event_complete(item->event, status, detail);
    lock(&queue->lock);
    if (status != LOCUS_SUCCESS && queue->failure == LOCUS_SUCCESS) {
        queue->failure = status;
        if (is_op)
            snprintf(queue->failure_detail, sizeof queue->failure_detail,
                     "queued %s (op %llu of the queue): %s", item->what,
                     (unsigned long long)item->op_index,
                     locus__error_detail(status, detail));
        else
            snprintf(queue->failure_detail, sizeof queue->failure_detail, "%s",
                     locus__error_detail(status, detail));
    }
    queue->completed++;
    broadcast(&queue->idle);
    unlock(&queue->lock);
    if (item->event)
        event_release(item->event);
    free(item);
}

static void *queue_thread(void *arg)
{
    locus_queue *queue = arg;
    lock(&queue->lock);
    for (;;) {
        while (!queue->head && !queue->stopping)
            wait_on(&queue->work, &queue->lock);
        queue_item *item = queue->head;
        if (!item)
            break; /* stopping, and everything has run */
        queue->head = item->next;
        if (!queue->head)
            queue->tail = NULL;
        /* Only this thread frees entries: next stays valid unlocked. */
        queue_item *next = queue->head;
        unlock(&queue->lock);
        run_item(queue, item, next);
        lock(&queue->lock);
    }
    unlock(&queue->lock);
    return NULL;
}

/* ---- queues -------------------------------------------------------------- */

/* The thread starts with every signal blocked, so that the application's
 * handlers keep running on the application's own threads. */
static locus_status start_thread(locus_queue *queue)
{
    sigset_t all, previous;
    if (sigfillset(&all) != 0)
        return locus__fail(LOCUS_ERROR_SYSTEM, "sigfillset failed");
    int rc = pthread_sigmask(SIG_BLOCK, &all, &previous);
    if (rc != 0)
        return locus__fail(LOCUS_ERROR_SYSTEM, "pthread_sigmask: %s",
                           strerror(rc));
    int created = pthread_create(&queue->thread, NULL, queue_thread, queue);
    must(pthread_sigmask(SIG_SETMASK, &previous, NULL), "pthread_sigmask");
    if (created != 0)
        return locus__fail(LOCUS_ERROR_SYSTEM,
                           "cannot start the queue's thread: %s",
                           strerror(created));
    return LOCUS_SUCCESS;
}

LOCUS_API locus_status locus_queue_create(locus_context *context,
                                          locus_device *device,
                                          locus_queue **out)
{
    locus__clear_error();
    if (!out)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!context)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "context is NULL");
    if (device && device->context != context)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "device %s belongs to another context",
                           device->info.selector);
    locus_queue *queue = locus__calloc(1, sizeof *queue);
    if (!queue)
        return locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "queue");
    queue->context = context;
    queue->device = device;
    queue->failure = LOCUS_SUCCESS;
    bool overlap = false;
    locus_status status = locus__prefetch_enabled(&overlap);
    if (status != LOCUS_SUCCESS)
        goto free_queue;
    queue->overlap = overlap && locus__prefetch_offered(device);
    queue->write_back = queue->overlap && locus__write_back_offered(device);
    status = init_pair(&queue->lock, &queue->work, "queue");
    if (status != LOCUS_SUCCESS)
        goto free_queue;
    int rc = pthread_cond_init(&queue->idle, NULL);
    if (rc != 0) {
        status = locus__fail(LOCUS_ERROR_SYSTEM, "queue condition: %s",
                             strerror(rc));
        goto destroy_pair;
    }
    if (queue->overlap) {
        status = locus__prefetcher_start(&queue->prefetcher, device);
        if (status != LOCUS_SUCCESS)
            goto destroy_idle;
    }
    if (queue->write_back) {
        status = locus__writer_start(&queue->writer, device);
        if (status != LOCUS_SUCCESS)
            goto stop_prefetcher;
    }
    status = start_thread(queue);
    if (status != LOCUS_SUCCESS)
        goto stop_writer;
    atomic_fetch_add(&context->live_queues, 1);
    *out = queue;
    return LOCUS_SUCCESS;

stop_writer:
    if (queue->write_back)
        locus__prefetcher_stop(&queue->writer);
stop_prefetcher:
    if (queue->overlap)
        locus__prefetcher_stop(&queue->prefetcher);
destroy_idle:
    must(pthread_cond_destroy(&queue->idle), "pthread_cond_destroy");
destroy_pair:
    must(pthread_cond_destroy(&queue->work), "pthread_cond_destroy");
    must(pthread_mutex_destroy(&queue->lock), "pthread_mutex_destroy");
free_queue:
    free(queue);
    return status;
}

LOCUS_API void locus_queue_destroy(locus_queue *queue)
{
    if (!queue)
        return;
    lock(&queue->lock);
    queue->stopping = true;
    broadcast(&queue->work);
    unlock(&queue->lock);
    /* The thread leaves only once the FIFO is empty. */
    must(pthread_join(queue->thread, NULL), "pthread_join");
    /* Its last write-back, if still in flight, ends first. */
    if (queue->write_back)
        locus__prefetcher_stop(&queue->writer);
    if (queue->overlap)
        locus__prefetcher_stop(&queue->prefetcher);
    must(pthread_cond_destroy(&queue->idle), "pthread_cond_destroy");
    must(pthread_cond_destroy(&queue->work), "pthread_cond_destroy");
    must(pthread_mutex_destroy(&queue->lock), "pthread_mutex_destroy");
    atomic_fetch_sub(&queue->context->live_queues, 1);
    free(queue);
}

LOCUS_API locus_status locus_queue_finish(locus_queue *queue)
{
    locus__clear_error();
    if (!queue)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "queue is NULL");
    char detail[sizeof queue->failure_detail];
    lock(&queue->lock);
    uint64_t target = queue->enqueued;
    while (queue->completed < target)
        wait_on(&queue->idle, &queue->lock);
    locus_status status = queue->failure;
    memcpy(detail, queue->failure_detail, sizeof detail);
    queue->failure = LOCUS_SUCCESS;
    queue->failure_detail[0] = '\0';
    unlock(&queue->lock);
    if (status != LOCUS_SUCCESS)
        return locus__fail(status, "%s", detail);
    return LOCUS_SUCCESS;
}

/* Appends a filled-in item; with event non-NULL, the item's op completes a
 * new event handed to the caller. Frees the item on failure. */
static locus_status enqueue(locus_queue *queue, queue_item *item,
                            locus_event **event)
{
    locus_event *made = NULL;
    if (event) {
        /* One hold for the caller, one for the item until it completes. */
        locus_status status = event_new(queue->context, 2, &made);
        if (status != LOCUS_SUCCESS) {
            free(item);
            return status;
        }
        item->event = made;
    }
    /* Once the item is in the FIFO the queue's thread may run and free it
     * at any moment: nothing reads it after the unlock. */
    lock(&queue->lock);
    if (item->type)
        item->op_index = ++queue->ops;
    if (queue->tail)
        queue->tail->next = item;
    else
        queue->head = item;
    queue->tail = item;
    queue->enqueued++;
    broadcast(&queue->work);
    unlock(&queue->lock);
    if (event)
        *event = made;
    return LOCUS_SUCCESS;
}

/* What every enqueue checks: the queue, and that its device (if any)
 * offers the op; event is cleared first so that a failure leaves NULL. */
static locus_status check_queue(locus_queue *queue, const locus__op_type *type,
                                locus_event **event)
{
    if (event)
        *event = NULL;
    if (!queue)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "queue is NULL");
    if (queue->device && !locus__device_offers(queue->device, &type->model))
        return locus__fail(LOCUS_ERROR_NOT_SUPPORTED,
                           "%s is not supported on %s (%s), the queue's "
                           "device",
                           type->model.name, queue->device->info.selector,
                           queue->device->info.name);
    return LOCUS_SUCCESS;
}

/* Buffers named by names[i]; NULL and foreign ones are refused. */
static locus_status check_buffers(const locus_queue *queue,
                                  locus_buffer *const *buffers,
                                  const char *const *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (!buffers[i])
            return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                               names[i]);
        if (buffers[i]->context != queue->context)
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "buffer %s belongs to another context than "
                               "the queue",
                               names[i]);
    }
    return LOCUS_SUCCESS;
}

/* The op's output, buffers[output], may not overlap an input in memory,
 * as the synchronous op checks again when it runs: refused here, nothing
 * is enqueued. */
static locus_status check_output_alias(locus_buffer *const *buffers,
                                       const char *const *names, size_t count,
                                       size_t output)
{
    for (size_t i = 0; i < count; i++)
        if (i != output && buffers[i] && buffers[output] &&
            locus__buffers_overlap(buffers[output], buffers[i]))
            return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                               "%s and %s %s; the output must not alias an "
                               "input",
                               names[output], names[i],
                               buffers[output] == buffers[i]
                                   ? "are the same buffer"
                                   : "overlap in memory");
    return LOCUS_SUCCESS;
}

/* A new item for an op of this type (NULL: a wait), or NULL (failure
 * set). */
static queue_item *new_item(const locus__op_type *type)
{
    const char *what = type ? type->model.name : "wait";
    queue_item *item = locus__calloc(1, sizeof *item);
    if (!item) {
        locus__fail(LOCUS_ERROR_OUT_OF_MEMORY, "queue entry for a %s", what);
        return NULL;
    }
    item->run = type ? run_op : run_wait;
    item->type = type;
    item->what = what;
    return item;
}

/* The caller's descriptor as it is now. A caller built against an older
 * header passes a smaller struct: only its bytes are read, and the copy
 * keeps its struct_size so that the op judges it as it would the
 * original. */
#define COPY_DESC(copy, given)                                                 \
    do {                                                                       \
        size_t given_size_ = (given)->struct_size;                             \
        memcpy(&(copy), (given),                                               \
               given_size_ < sizeof(copy) ? given_size_ : sizeof(copy));       \
        (copy).struct_size = given_size_;                                      \
    } while (0)

LOCUS_API locus_status locus_enqueue_reduce(locus_queue *queue,
                                            const locus_reduce_desc *desc,
                                            locus_buffer *x, double *result,
                                            locus_record *record,
                                            locus_event **event)
{
    locus__clear_error();
    locus_status status = check_queue(queue, &locus__reduce_op, event);
    if (status != LOCUS_SUCCESS)
        return status;
    if (!desc || !result)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           desc ? "result" : "desc");
    status = check_buffers(queue, &x, locus__reduce_op.operand_names, 1);
    if (status != LOCUS_SUCCESS)
        return status;
    queue_item *item = new_item(&locus__reduce_op);
    if (!item)
        return LOCUS_ERROR_OUT_OF_MEMORY;
    COPY_DESC(item->desc.reduce, desc);
    item->buffers[0] = x;
    item->result = result;
    item->record = record;
    return enqueue(queue, item, event);
}

LOCUS_API locus_status locus_enqueue_gemm(locus_queue *queue,
                                          const locus_gemm_desc *desc,
                                          locus_buffer *a, locus_buffer *b,
                                          locus_buffer *c, locus_record *record,
                                          locus_event **event)
{
    locus__clear_error();
    locus_status status = check_queue(queue, &locus__gemm_op, event);
    if (status != LOCUS_SUCCESS)
        return status;
    if (!desc)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "desc is NULL");
    /* A NULL matrix is allowed when it holds no elements (locus_gemm's
     * rule), judged on a copy so that a caller's older, smaller struct
     * reads as zeros past its end; the rest is checked when the op runs. */
    locus_gemm_desc shape = {0};
    COPY_DESC(shape, desc);
    locus_buffer *buffers[] = {a, b, c};
    const char *const *names = locus__gemm_op.operand_names;
    locus_buffer *given[3];
    const char *given_names[3];
    size_t given_count = 0;
    for (size_t i = 0; i < 3; i++)
        if (buffers[i]) {
            given[given_count] = buffers[i];
            given_names[given_count++] = names[i];
        }
    status = locus__gemm_check_nulls(&shape, a, b, c);
    if (status == LOCUS_SUCCESS)
        status = check_buffers(queue, given, given_names, given_count);
    if (status == LOCUS_SUCCESS)
        status = check_output_alias(buffers, names, 3, 2);
    if (status != LOCUS_SUCCESS)
        return status;
    queue_item *item = new_item(&locus__gemm_op);
    if (!item)
        return LOCUS_ERROR_OUT_OF_MEMORY;
    COPY_DESC(item->desc.gemm, desc);
    memcpy(item->buffers, buffers, sizeof buffers);
    item->record = record;
    return enqueue(queue, item, event);
}

LOCUS_API locus_status locus_enqueue_conv2d_layer(
    locus_queue *queue, const locus_conv2d_desc *desc, locus_buffer *input,
    locus_buffer *filter, locus_buffer *bias, locus_buffer *output,
    locus_record *record, locus_event **event)
{
    locus__clear_error();
    locus_status status = check_queue(queue, &locus__conv2d_op, event);
    if (status != LOCUS_SUCCESS)
        return status;
    if (!desc)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "desc is NULL");
    /* The bias is optional: checked only when given. */
    locus_buffer *buffers[] = {input, filter, bias, output};
    const char *const *names = locus__conv2d_op.operand_names;
    locus_buffer *given[] = {input, filter, output, bias};
    const char *given_names[] = {names[0], names[1], names[3], names[2]};
    status = check_buffers(queue, given, given_names, bias ? 4 : 3);
    if (status == LOCUS_SUCCESS)
        status = check_output_alias(buffers, names, 4, 3);
    if (status != LOCUS_SUCCESS)
        return status;
    queue_item *item = new_item(&locus__conv2d_op);
    if (!item)
        return LOCUS_ERROR_OUT_OF_MEMORY;
    COPY_DESC(item->desc.conv2d, desc);
    memcpy(item->buffers, buffers, sizeof buffers);
    item->record = record;
    return enqueue(queue, item, event);
}

LOCUS_API locus_status locus_enqueue_conv2d(
    locus_queue *queue, const locus_conv2d_desc *desc, locus_buffer *input,
    locus_buffer *filter, locus_buffer *output, locus_record *record,
    locus_event **event)
{
    return locus_enqueue_conv2d_layer(queue, desc, input, filter, NULL, output,
                                      record, event);
}

LOCUS_API locus_status locus_queue_wait_event(locus_queue *queue,
                                              locus_event *event)
{
    locus__clear_error();
    if (!queue || !event)
        return locus__fail(LOCUS_ERROR_NULL_ARGUMENT, "%s is NULL",
                           queue ? "event" : "queue");
    if (event->context != queue->context)
        return locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                           "the event belongs to another context than the "
                           "queue");
    queue_item *item = new_item(NULL);
    if (!item)
        return LOCUS_ERROR_OUT_OF_MEMORY;
    event_hold(event);
    item->event = event;
    return enqueue(queue, item, NULL);
}
