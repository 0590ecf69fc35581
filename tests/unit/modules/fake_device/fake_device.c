/* A device backend whose "device memory" is ordinary heap memory: it lets
 * the tests watch coherence (which copies move, and when) on machines with
 * no GPU. It counts every upload and download, and can be told to fail the
 * next allocation or copy. Its ops are plain loops. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/backend.h>

#include "../fake_reduce.h"

typedef struct fake_state {
    const locus_services *services;
    void *runtime;
} fake_state;

/* The transfers show in the record (bytes_to_device, bytes_from_device);
 * LOCUS_TEST_FAKE_ALLOC_FAILS=1 makes every allocation fail,
 * LOCUS_TEST_FAKE_COPY_FAILS=1 every upload and download,
 * LOCUS_TEST_FAKE_GEMM_FAILS=1 every gemm halfway, after it has scribbled
 * over its output (a device that runs out of memory mid-op), and
 * LOCUS_TEST_FAKE_NUMA_MASK gives the device nearest NUMA nodes (a mask of
 * OS node numbers), for the transfer accounting tests,
 * LOCUS_TEST_FAKE_DEVICE_COUNT makes that many identical devices (1), and
 * LOCUS_TEST_FAKE_PCI_BUS_IDS gives them PCI addresses: a comma list, the
 * i-th item device i's pci_bus_id as written (the runtime makes it
 * canonical), an empty item or a missing one none. */
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
    const char *count = getenv("LOCUS_TEST_FAKE_DEVICE_COUNT");
    *device_count = count ? strtoul(count, NULL, 10) : 1;
    return LOCUS_SUCCESS;
}

static void fini(void *state)
{
    free(state);
}

/* Item `device` of LOCUS_TEST_FAKE_PCI_BUS_IDS into info->pci_bus_id. */
static void describe_pci(size_t device, locus_device_info *info)
{
    const char *list = getenv("LOCUS_TEST_FAKE_PCI_BUS_IDS");
    for (size_t i = 0; list && i < device; i++) {
        list = strchr(list, ',');
        if (list)
            list++;
    }
    if (!list)
        return;
    size_t length = strcspn(list, ",");
    if (length >= sizeof info->pci_bus_id)
        length = sizeof info->pci_bus_id - 1;
    memcpy(info->pci_bus_id, list, length);
    info->pci_bus_id[length] = '\0';
}

static locus_status describe(void *state, size_t device,
                             locus_device_info *info)
{
    (void)state;
    describe_pci(device, info);
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

/* Wrapped device memory: the fake's own is heap memory, so it takes any
 * 256-byte aligned pointer (cudaMalloc's alignment) as its own and
 * refuses others, as CUDA refuses host memory. No unwrap: the runtime must
 * never free() wrapped memory, which the tests then free themselves (a
 * double free shows under valgrind and the sanitizers, and in glibc). */
static locus_status wrap(void *state, size_t device, void *memory, size_t bytes,
                         void **handle)
{
    fake_state *fake = state;
    if ((uintptr_t)memory % 256 != 0)
        return fake->services->fail(LOCUS_ERROR_INVALID_ARGUMENT,
                                    "%zu bytes at %p are not memory of fake "
                                    "device %zu (not 256-byte aligned)",
                                    bytes, memory, device);
    *handle = memory;
    return LOCUS_SUCCESS;
}

static int copy_fails(void)
{
    const char *fail = getenv("LOCUS_TEST_FAKE_COPY_FAILS");
    return fail && fail[0] == '1';
}

static locus_status upload(void *state, size_t device, void *memory,
                           const void *host, size_t bytes, locus_op_context *op)
{
    fake_state *fake = state;
    (void)device;
    if (copy_fails())
        return fake->services->fail(LOCUS_ERROR_BACKEND,
                                    "fake upload of %zu bytes failed", bytes);
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
    if (copy_fails())
        return fake->services->fail(LOCUS_ERROR_BACKEND,
                                    "fake download of %zu bytes failed", bytes);
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
    *result = fake_reduce(desc, x);
    snprintf(op->record->algorithm, sizeof op->record->algorithm, "fake");
    return LOCUS_SUCCESS;
}

static locus_status gemm(void *state, size_t device, const locus_gemm_desc *d,
                         const void *a, const void *b, void *c,
                         locus_op_context *op)
{
    (void)device;
    const float *A = a, *B = b;
    float *C = c;
    const char *fail = getenv("LOCUS_TEST_FAKE_GEMM_FAILS");
    if (fail && fail[0] == '1') {
        memset(C, 0x7f, d->n * sizeof(float));
        fake_state *fake = state;
        return fake->services->fail(LOCUS_ERROR_DEVICE_OUT_OF_MEMORY,
                                    "fake device ran out of memory in gemm");
    }
    for (size_t i = 0; i < d->m; i++)
        for (size_t j = 0; j < d->n; j++) {
            double sum = 0;
            /* alpha or k 0: A and B come NULL (backend.h); an alpha
             * that rounds to 0 in f32 is 0 there too, so A is what
             * says it, not d->alpha. */
            for (size_t p = 0; A && p < d->k; p++) {
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

/* Direct convolution, NCHW input, KCRS filter, zero padding. */
static locus_status conv2d(void *state, size_t device,
                           const locus_conv2d_desc *d, const void *input,
                           const void *filter, void *output,
                           locus_op_context *op)
{
    (void)state, (void)device;
    const float *in = input, *w = filter;
    float *out = output;
    size_t P =
        (d->in_height + 2 * d->pad_h - d->kernel_height) / d->stride_h + 1;
    size_t Q = (d->in_width + 2 * d->pad_w - d->kernel_width) / d->stride_w + 1;
    size_t C = d->in_channels, H = d->in_height, W = d->in_width;
    size_t R = d->kernel_height, S = d->kernel_width;
    for (size_t n = 0; n < d->batch; n++)
        for (size_t k = 0; k < d->out_channels; k++)
            for (size_t p = 0; p < P; p++)
                for (size_t q = 0; q < Q; q++) {
                    double sum = 0;
                    for (size_t c = 0; c < C; c++)
                        for (size_t r = 0; r < R; r++)
                            for (size_t s = 0; s < S; s++) {
                                size_t y = p * d->stride_h + r;
                                size_t x = q * d->stride_w + s;
                                if (y < d->pad_h || x < d->pad_w ||
                                    y - d->pad_h >= H || x - d->pad_w >= W)
                                    continue;
                                sum += (double)
                                           in[((n * C + c) * H + y - d->pad_h) *
                                                  W +
                                              x - d->pad_w] *
                                       w[((k * C + c) * R + r) * S + s];
                            }
                    out[((n * d->out_channels + k) * P + p) * Q + q] =
                        (float)sum;
                }
    snprintf(op->record->algorithm, sizeof op->record->algorithm, "fake");
    return LOCUS_SUCCESS;
}

/* The figures of a CUDA GPU (backends/cuda), whose name this module
 * takes: the tests' choices by nominal figures were written for them. */
static void nominal_rates(void *state, size_t device,
                          const locus_device_info *info,
                          locus_backend_rates *rates)
{
    (void)state, (void)device;
    int units = info->compute_units > 0 ? info->compute_units : 1;
    *rates = locus_backend_rates_linked(10e-6, 128e9 * units, 1e12, 12e9, 10e-6,
                                        25e9);
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
    .conv2d = conv2d,
    .selector_parts = LOCUS_SELECTOR_INDEX, /* cuda:N, as the real one */
    .nominal_rates = nominal_rates,
    .wrap = wrap,
};

LOCUS_BACKEND_EXPORT const locus_backend *locus_backend_entry(void)
{
    return &table;
}
