/* A device backend whose "device memory" is ordinary heap memory: it lets
 * the tests watch coherence (which copies move, and when) on machines with
 * no GPU. It counts every upload and download, and can be told to fail the
 * next allocation. Its ops are plain loops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/backend.h>

typedef struct fake_state {
    const locus_services *services;
    void *runtime;
} fake_state;

/* The transfers show in the record (bytes_to_device, bytes_from_device);
 * LOCUS_TEST_FAKE_ALLOC_FAILS=1 makes every allocation fail, and
 * LOCUS_TEST_FAKE_NUMA_MASK gives the device nearest NUMA nodes (a mask of
 * OS node numbers), for the transfer accounting tests. */
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
    *state = fake;
    *device_count = 1;
    return LOCUS_SUCCESS;
}

static void fini(void *state)
{
    free(state);
}

static locus_status describe(void *state, size_t device,
                             locus_device_info *info)
{
    (void)state, (void)device;
    snprintf(info->name, sizeof info->name, "fake device");
    snprintf(info->vendor, sizeof info->vendor, "locus tests");
    info->kind = LOCUS_DEVICE_GPU;
    info->memory_bytes = 1u << 30;
    info->compute_units = 1;
    const char *mask = getenv("LOCUS_TEST_FAKE_NUMA_MASK");
    if (mask)
        info->nearest_numa_mask = strtoull(mask, NULL, 0);
    return LOCUS_SUCCESS;
}

static locus_status alloc(void *state, size_t device, size_t bytes,
                          void **memory)
{
    fake_state *fake = state;
    (void)device;
    const char *fail = getenv("LOCUS_TEST_FAKE_ALLOC_FAILS");
    if (fail && fail[0] == '1')
        return fake->services->fail(LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
                                    "fake device cannot hold %zu bytes", bytes);
    *memory = malloc(bytes);
    if (!*memory)
        return fake->services->fail(LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
                                    "fake device cannot hold %zu bytes", bytes);
    /* Poison: a copy used before an upload shows up as NaN. */
    memset(*memory, 0xff, bytes);
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
    (void)state, (void)device;
    memcpy(memory, host, bytes);
    if (op && op->record)
        op->record->bytes_to_device += bytes;
    return LOCUS_SUCCESS;
}

static locus_status download(void *state, size_t device, const void *memory,
                             void *host, size_t bytes, locus_op_context *op)
{
    (void)state, (void)device;
    memcpy(host, memory, bytes);
    if (op && op->record)
        op->record->bytes_from_device += bytes;
    return LOCUS_SUCCESS;
}

static locus_status reduce(void *state, size_t device,
                           const locus_reduce_desc *desc, const void *x,
                           double *result, locus_op_context *op)
{
    (void)state, (void)device;
    const float *values = x;
    double acc = values[0];
    for (size_t i = 1; i < desc->count; i++) {
        double v = values[i];
        if (desc->op == LOCUS_REDUCE_SUM)
            acc += v;
        else if (desc->op == LOCUS_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    *result = acc;
    snprintf(op->record->algorithm, sizeof op->record->algorithm, "fake");
    return LOCUS_SUCCESS;
}

static locus_status gemm(void *state, size_t device, const locus_gemm_desc *d,
                         const void *a, const void *b, void *c,
                         locus_op_context *op)
{
    (void)state, (void)device;
    const float *A = a, *B = b;
    float *C = c;
    for (size_t i = 0; i < d->m; i++)
        for (size_t j = 0; j < d->n; j++) {
            double sum = 0;
            for (size_t p = 0; p < d->k; p++) {
                double x = d->trans_a ? A[p * d->lda + i] : A[i * d->lda + p];
                double y = d->trans_b ? B[j * d->ldb + p] : B[p * d->ldb + j];
                sum += x * y;
            }
            double old = d->beta == 0 ? 0 : d->beta * C[i * d->ldc + j];
            C[i * d->ldc + j] = (float)(d->alpha * sum + old);
        }
    snprintf(op->record->algorithm, sizeof op->record->algorithm, "fake");
    return LOCUS_SUCCESS;
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
    .reduce = reduce,
    .gemm = gemm,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
