/* A device backend with prefetch, for the queue's overlapped uploads
 * (test_queue_overlap.c): its "device memory" is heap memory, and it
 * appends every call that matters to the file LOCUS_TEST_PREFETCH_LOG,
 * one line each, so the test can check their order:
 *   upload V | prefetch V T | wait T | gemm-begin V | gemm-end V
 * with V the first float of the host memory copied (of A for a gemm) and
 * T the ticket's number. With LOCUS_TEST_PREFETCH_AWAIT=1, a gemm whose
 * A starts with a value in [100, 200) waits (up to 5 s) for two
 * prefetches (the next gemm's A and B), one in [200, 300) for one,
 * issued since the gemm before it ended, so that
 * "op i+1's inputs are copied while op i runs" is an order, not a race;
 * one whose A starts below 0 is a gate: it waits (up to 5 s) until the
 * file LOCUS_TEST_PREFETCH_LOG.gate exists, so the test can enqueue a
 * whole pipeline behind it. LOCUS_TEST_PREFETCH_FAILS=start fails every
 * prefetch, =wait every prefetch_wait.
 *
 * Write-backs (prefetch_to_host): logged "writeback V T" with V the first
 * float of the device memory, printed %.9g so that the test can match a
 * result exactly; every download is logged "download V" likewise, so the
 * test counts the copies a read made. With LOCUS_TEST_WRITEBACK_AWAIT=1,
 * a gemm (of A at 0 or above) waits (up to 5 s) until the C of the gemm
 * that ended before it was written back, so "op i's result travels while
 * op i+1 runs" is an order too. LOCUS_TEST_PREFETCH_FAILS=writeback fails
 * every prefetch_to_host, =writeback-wait the wait of each of its tickets;
 * both scribble NaN over the host memory first, as a copy cut short may. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <locus/backend.h>

typedef struct fake_state {
    const locus_services *services;
    void *runtime;
    pthread_mutex_t lock;
    pthread_cond_t prefetched;
    unsigned long prefetches, tickets;
    unsigned long prefetches_at_end; /* when the last gemm ended */
    const void *last_c;              /* the C of the gemm that ended last */
    int last_c_written;              /* and whether it was written back since */
} fake_state;

typedef struct ticket {
    unsigned long number;
    locus_status status;
    int to_host; /* a write-back's */
} ticket;

static void log_line(fake_state *fake, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* With fake->lock held. */
static void log_line(fake_state *fake, const char *format, ...)
{
    (void)fake;
    const char *path = getenv("LOCUS_TEST_PREFETCH_LOG");
    if (!path)
        return;
    FILE *file = fopen(path, "a");
    if (!file)
        return;
    va_list args;
    va_start(args, format);
    vfprintf(file, format, args);
    va_end(args);
    fputc('\n', file);
    fclose(file);
}

static int fails(const char *what)
{
    const char *value = getenv("LOCUS_TEST_PREFETCH_FAILS");
    return value && strcmp(value, what) == 0;
}

static locus_status init(const locus_services *services, void *runtime,
                         void **state, size_t *device_count, char *reason,
                         size_t reason_size)
{
    (void)reason, (void)reason_size;
    fake_state *fake = calloc(1, sizeof *fake);
    if (!fake)
        return services->fail(LOCUS_ERROR_OUT_OF_MEMORY, "fake state");
    fake->services = services;
    fake->runtime = runtime;
    pthread_mutex_init(&fake->lock, NULL);
    pthread_cond_init(&fake->prefetched, NULL);
    *state = fake;
    *device_count = 1;
    return LOCUS_SUCCESS;
}

static void fini(void *state)
{
    fake_state *fake = state;
    pthread_cond_destroy(&fake->prefetched);
    pthread_mutex_destroy(&fake->lock);
    free(fake);
}

static locus_status describe(void *state, size_t device,
                             locus_device_info *info)
{
    (void)state, (void)device;
    snprintf(info->name, sizeof info->name, "fake prefetching device");
    snprintf(info->vendor, sizeof info->vendor, "locus tests");
    info->kind = LOCUS_DEVICE_GPU;
    info->memory_bytes = 1u << 30;
    info->compute_units = 1;
    return LOCUS_SUCCESS;
}

static locus_status alloc(void *state, size_t device, size_t bytes,
                          void **memory)
{
    fake_state *fake = state;
    (void)device;
    *memory = malloc(bytes);
    if (!*memory)
        return fake->services->fail(LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
                                    "fake device cannot hold %zu bytes", bytes);
    memset(*memory, 0xff, bytes); /* NaN: a copy never made shows */
    return LOCUS_SUCCESS;
}

static void release(void *state, size_t device, void *memory)
{
    (void)state, (void)device;
    free(memory);
}

static locus_status upload(void *state, size_t device, void *memory,
                           const void *host, size_t bytes, locus_op_context *op)
{
    fake_state *fake = state;
    (void)device;
    pthread_mutex_lock(&fake->lock);
    log_line(fake, "upload %g", (double)*(const float *)host);
    pthread_mutex_unlock(&fake->lock);
    memcpy(memory, host, bytes);
    if (op && op->record)
        op->record->bytes_to_device += bytes;
    return LOCUS_SUCCESS;
}

static locus_status download(void *state, size_t device, const void *memory,
                             void *host, size_t bytes, locus_op_context *op)
{
    fake_state *fake = state;
    (void)device;
    pthread_mutex_lock(&fake->lock);
    log_line(fake, "download %.9g", (double)*(const float *)memory);
    pthread_mutex_unlock(&fake->lock);
    memcpy(host, memory, bytes);
    if (op && op->record)
        op->record->bytes_from_device += bytes;
    return LOCUS_SUCCESS;
}

static locus_status prefetch(void *state, size_t device, void *memory,
                             const void *host, size_t bytes, void **out)
{
    fake_state *fake = state;
    (void)device;
    if (fails("start"))
        return fake->services->fail(
            LOCUS_ERROR_BACKEND, "fake prefetch of %zu bytes refused", bytes);
    ticket *made = malloc(sizeof *made);
    if (!made)
        return fake->services->fail(LOCUS_ERROR_OUT_OF_MEMORY, "ticket");
    memcpy(memory, host, bytes);
    made->status = LOCUS_SUCCESS;
    made->to_host = 0;
    pthread_mutex_lock(&fake->lock);
    made->number = ++fake->tickets;
    fake->prefetches++;
    log_line(fake, "prefetch %g %lu", (double)*(const float *)host,
             made->number);
    pthread_cond_broadcast(&fake->prefetched);
    pthread_mutex_unlock(&fake->lock);
    *out = made;
    return LOCUS_SUCCESS;
}

static locus_status prefetch_wait(void *state, size_t device, void *opaque)
{
    fake_state *fake = state;
    ticket *waited = opaque;
    (void)device;
    pthread_mutex_lock(&fake->lock);
    log_line(fake, "wait %lu", waited->number);
    pthread_mutex_unlock(&fake->lock);
    int to_host = waited->to_host;
    locus_status status = waited->status;
    free(waited);
    if (fails("wait") || (to_host && status != LOCUS_SUCCESS))
        return fake->services->fail(LOCUS_ERROR_BACKEND,
                                    "fake copy engine failed");
    return LOCUS_SUCCESS;
}

static locus_status prefetch_to_host(void *state, size_t device, void *host,
                                     const void *memory, size_t bytes,
                                     void **out)
{
    fake_state *fake = state;
    (void)device;
    /* Decided once, here: the wait fails the ticket this copy scribbled. */
    int refused = fails("writeback"), cut = fails("writeback-wait");
    if (refused || cut)
        memset(host, 0xff, bytes); /* NaN: must never be taken as current */
    else
        memcpy(host, memory, bytes);
    pthread_mutex_lock(&fake->lock);
    if (refused) {
        log_line(fake, "writeback-refused %.9g",
                 (double)*(const float *)memory);
        pthread_mutex_unlock(&fake->lock);
        return fake->services->fail(
            LOCUS_ERROR_BACKEND, "fake write-back of %zu bytes refused", bytes);
    }
    ticket *made = malloc(sizeof *made);
    if (!made) {
        pthread_mutex_unlock(&fake->lock);
        return fake->services->fail(LOCUS_ERROR_OUT_OF_MEMORY, "ticket");
    }
    made->status = cut ? LOCUS_ERROR_BACKEND : LOCUS_SUCCESS;
    made->to_host = 1;
    made->number = ++fake->tickets;
    if (memory == fake->last_c)
        fake->last_c_written = 1;
    log_line(fake, "writeback %.9g %lu", (double)*(const float *)memory,
             made->number);
    pthread_cond_broadcast(&fake->prefetched);
    pthread_mutex_unlock(&fake->lock);
    *out = made;
    return LOCUS_SUCCESS;
}

/* With fake->lock held: a gemm of a marked A waits for the next gemm's
 * two inputs to be prefetched, counted from the end of the gemm before
 * (the queue may give them to its copying thread before this one has
 * even begun). */
static void await_prefetch(fake_state *fake, double first)
{
    const char *await = getenv("LOCUS_TEST_PREFETCH_AWAIT");
    if (first < 100 || first >= 300 || !await || await[0] != '1')
        return;
    unsigned long wanted = first < 200 ? 2 : 1;
    unsigned long before = fake->prefetches_at_end;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (fake->prefetches < before + wanted)
        if (pthread_cond_timedwait(&fake->prefetched, &fake->lock, &until) ==
            ETIMEDOUT)
            break;
}

/* With fake->lock held: a gemm waits for the previous gemm's C to be
 * written back (counted by its device memory, whichever queue's copying
 * thread sends it). */
static void await_writeback(fake_state *fake, double first)
{
    const char *await = getenv("LOCUS_TEST_WRITEBACK_AWAIT");
    if (first < 0 || !fake->last_c || !await || await[0] != '1')
        return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (!fake->last_c_written)
        if (pthread_cond_timedwait(&fake->prefetched, &fake->lock, &until) ==
            ETIMEDOUT)
            break;
}

/* A gate gemm waits for the test's go (the gate file), polling. */
static void await_gate(void)
{
    const char *path = getenv("LOCUS_TEST_PREFETCH_LOG");
    char gate[4096];
    if (!path ||
        snprintf(gate, sizeof gate, "%s.gate", path) >= (int)sizeof gate)
        return;
    for (int i = 0; i < 5000 && access(gate, F_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

static locus_status gemm(void *state, size_t device, const locus_gemm_desc *d,
                         const void *a, const void *b, void *c,
                         locus_op_context *op)
{
    fake_state *fake = state;
    (void)device;
    const float *A = a, *B = b;
    float *C = c;
    double first = A ? (double)A[0] : 0;
    if (first < 0)
        await_gate();
    pthread_mutex_lock(&fake->lock);
    log_line(fake, "gemm-begin %g", first);
    await_prefetch(fake, first);
    await_writeback(fake, first);
    pthread_mutex_unlock(&fake->lock);
    for (size_t i = 0; i < d->m; i++)
        for (size_t j = 0; j < d->n; j++) {
            double sum = 0;
            /* A NULL: alpha (as f32) or k 0 (backend.h). */
            for (size_t p = 0; A && p < d->k; p++)
                sum += (double)A[i * d->lda + p] * B[p * d->ldb + j];
            double old = d->beta == 0 ? 0 : d->beta * C[i * d->ldc + j];
            C[i * d->ldc + j] = (float)(d->alpha * sum + old);
        }
    pthread_mutex_lock(&fake->lock);
    log_line(fake, "gemm-end %g", first);
    fake->prefetches_at_end = fake->prefetches;
    fake->last_c = c;
    fake->last_c_written = 0;
    pthread_mutex_unlock(&fake->lock);
    snprintf(op->record->algorithm, sizeof op->record->algorithm, "fake");
    return LOCUS_SUCCESS;
}

/* Only untransposed gemm in f32: all the test asks of it. */
static int offers(void *state, size_t device, locus_op_kind op, int algorithm,
                  locus_dtype dtype)
{
    (void)state, (void)device, (void)algorithm;
    return op == LOCUS_OP_GEMM && dtype == LOCUS_DTYPE_F32;
}

static const locus_backend table = {
    .struct_size = sizeof table,
    .abi_version = LOCUS_BACKEND_ABI_VERSION,
    .name = "cuda",
    .host_memory = 0,
    .init = init,
    .fini = fini,
    .device_info = describe,
    .alloc = alloc,
    .free = release,
    .upload = upload,
    .download = download,
    .gemm = gemm,
    .selector_parts = LOCUS_SELECTOR_INDEX,
    .offers = offers,
    .prefetch = prefetch,
    .prefetch_wait = prefetch_wait,
    .prefetch_to_host = prefetch_to_host,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
