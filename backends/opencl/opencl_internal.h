/* What the OpenCL module's files share: the devices found at init and the
 * probe that finds them. */
#ifndef LOCUS_OPENCL_INTERNAL_H
#define LOCUS_OPENCL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <CL/cl.h>

#include <locus/backend.h>

typedef struct opencl_device {
    cl_platform_id platform;
    cl_device_id id;
    char name[128];
    char vendor[64];
    char version[64];
    locus_device_kind kind;
    int compute_units;
    uint64_t memory_bytes;
    uint64_t max_alloc_bytes;
    uint64_t numa_mask;

    /* Guards the lookup of context and queue at first use. Both belong to
     * the process, not to this state (opencl_queues.c). */
    pthread_mutex_t lock;
    cl_context context;
    /* In order, so that a later kernel sees the data of an earlier upload
     * without events. */
    cl_command_queue queue;
} opencl_device;

typedef struct opencl_state {
    const locus_services *services;
    void *runtime;
    size_t count;
    opencl_device *devices;
} opencl_state;

/* Adds the usable devices of one platform to state. Problems that cost
 * devices go to the log and into note, which becomes the reason when no
 * platform has a usable device. */
void locus__opencl_add_platform(opencl_state *state, cl_platform_id platform,
                                size_t *capacity, char *note, size_t note_size);

#endif
