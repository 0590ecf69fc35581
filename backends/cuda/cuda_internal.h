/*
 * What the C files of the CUDA module share: the module's state, per-device
 * resources (stream, pinned staging, scratch) and the helpers that report
 * CUDA failures. Names here are hidden by the module's visibility; only
 * locus_backend_entry leaves it.
 */
#ifndef LOCUS_CUDA_INTERNAL_H
#define LOCUS_CUDA_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include <locus/backend.h>

/* Pinned staging: two slots, so the CPU copies one chunk of a pageable
 * buffer while the DMA engine moves the other. */
#define LOCUS_CUDA_STAGING_SLOTS 2
#define LOCUS_CUDA_STAGING_CHUNK ((size_t)8 << 20)

/* A device's stream, staging and lock for prefetches (cuda_prefetch.c). */
typedef struct cuda_copy_engine cuda_copy_engine;

typedef struct cuda_device {
    int ordinal; /* for cudaSetDevice; devices Locus skips leave gaps */
    char name[128];
    char version[64];
    int compute_units;
    int cc_major, cc_minor; /* compute capability */
    uint64_t memory_bytes;
    uint64_t numa_mask;
    /* Domain, bus, device, function: the device_info's pci_bus_id, by
     * which the runtime knows NVIDIA's OpenCL view of the same GPU. */
    unsigned pci_address[4];

    /* Everything below is made at first use and guarded by lock: one op
     * or copy at a time per device, in the order the runtime issues them
     * (the runtime already orders ops on the same buffer). */
    pthread_mutex_t lock;
    int ready; /* stream and events made */
    cudaStream_t stream;
    cudaEvent_t slot_done[LOCUS_CUDA_STAGING_SLOTS];
    void *staging[LOCUS_CUDA_STAGING_SLOTS];
    /* 1: services->host_alloc on the nearest node + cudaHostRegister;
     * 2: cudaHostAlloc (node not chosen); 0: none yet. */
    int staging_kind;
    int staging_failed;     /* no pinned memory: plain cudaMemcpy from now on */
    void *reduce_scratch;   /* device, locus__cuda_reduce_scratch_bytes */
    double *result_host;    /* pinned, the reduce result lands here */
    double *result_mapped;  /* its device address; NULL: copy it instead */
    void *workspace;        /* device, grown as ops need, kept */
    size_t workspace_bytes; /* its size */
    /* Made at first prefetch (uploads) and first write-back (downloads)
     * under the engines' own lock, not this one: one per direction, so
     * that the two copy directions run beside each other. */
    cuda_copy_engine *copy_engine;
    cuda_copy_engine *download_engine;
} cuda_device;

typedef struct cuda_state {
    const locus_services *services;
    void *runtime;
    size_t count;
    cuda_device *devices;
} cuda_state;

/* Reports a failed CUDA call as "<what> failed on cuda:N (name): <message>
 * (<enumerator>)", out of memory as LOCUS_ERROR_DEVICE_OUT_OF_MEMORY. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
locus_status
locus__cuda_fail(const cuda_state *state, size_t index, cudaError_t err,
                 const char *what_format, ...);

locus_status locus__cuda_check_device(const cuda_state *state, size_t index);

/* Checks the device, takes its lock, makes it current and creates its
 * stream on first use. On success the caller must call locus__cuda_end. */
locus_status locus__cuda_begin(cuda_state *state, size_t index,
                               cuda_device **device);
void locus__cuda_end(cuda_device *device);

/* Waits for the device's stream; a kernel's failure surfaces here. */
locus_status locus__cuda_sync(const cuda_state *state, size_t index,
                              const char *what);

/* With the device begun: device scratch of at least `bytes`, kept for
 * later ops (grown, never shrunk, freed at fini). */
locus_status locus__cuda_workspace(const cuda_state *state, size_t index,
                                   size_t bytes, void **memory);

/* Frees the pinned staging ring (cuda_memory.c). */
void locus__cuda_release_staging(const cuda_state *state, cuda_device *device);

/* Frees what locus__cuda_begin and the ops made; at fini. */
void locus__cuda_release(const cuda_state *state, size_t index);

/* The memory entries of the backend table (cuda_memory.c). */
locus_status locus__cuda_alloc(void *state, size_t device, size_t bytes,
                               void **memory);
void locus__cuda_free(void *state, size_t device, void *memory);
locus_status locus__cuda_upload(void *state, size_t device, void *memory,
                                const void *host, size_t bytes,
                                locus_op_context *op);
locus_status locus__cuda_download(void *state, size_t device,
                                  const void *memory, void *host, size_t bytes,
                                  locus_op_context *op);
/* Adopts the application's memory of the device: checked with
 * cudaPointerGetAttributes, the handle is the pointer itself. */
locus_status locus__cuda_wrap(void *state, size_t device, void *memory,
                              size_t bytes, void **handle);
/* Uploads beside the ops, on a stream of their own (cuda_prefetch.c). */
locus_status locus__cuda_prefetch(void *state, size_t device, void *memory,
                                  const void *host, size_t bytes,
                                  void **ticket);
locus_status locus__cuda_prefetch_wait(void *state, size_t device,
                                       void *ticket);
/* A queued op's result back to the host beside the next op, on a stream
 * of its own (cuda_prefetch.c); waited for with locus__cuda_prefetch_wait. */
locus_status locus__cuda_prefetch_to_host(void *state, size_t device,
                                          void *host, const void *memory,
                                          size_t bytes, void **ticket);
/* Frees the device's copy engines, those made; at fini. */
void locus__cuda_release_prefetch(const cuda_state *state, size_t device);
/* Page-locks caller memory for every device (cudaHostRegister). */
locus_status locus__cuda_pin(void *state, size_t device, void *host,
                             size_t bytes);
void locus__cuda_unpin(void *state, size_t device, void *host);

/* The ops (cuda_ops.c, cuda_conv.c). */
locus_status locus__cuda_reduce_op(void *state, size_t device,
                                   const locus_reduce_desc *desc, const void *x,
                                   double *result, locus_op_context *op);
locus_status locus__cuda_gemm_op(void *state, size_t device,
                                 const locus_gemm_desc *desc, const void *a,
                                 const void *b, void *c, locus_op_context *op);
locus_status locus__cuda_conv2d_op(void *state, size_t device,
                                   const locus_conv2d_desc *desc,
                                   const void *input, const void *filter,
                                   void *output, locus_op_context *op);

void locus__cuda_set_algorithm(locus_op_context *op, const char *algorithm);

#endif
