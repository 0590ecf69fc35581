/*
 * One OpenCL context and one in-order command queue per device for the
 * whole process, made at first use and never released.
 *
 * Why never released: NVIDIA's clReleaseContext intermittently hangs forever
 * once the context has been used from several threads (seen on an H200 with
 * driver 580.159.04, about half of the runs: the queue released, the context
 * release never returned). A Locus context is destroyed while application
 * and worker threads that used the device may still exist, so releasing at
 * fini would turn locus_context_destroy into a hang. Keeping the contexts
 * also spares every later Locus context the cost of a new CUDA context
 * under NVIDIA's OpenCL. The runtime loads modules with RTLD_NODELETE, so
 * this table lives as long as the process; the driver frees the contexts at
 * exit.
 */
#include "opencl_queues.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct shared_queue {
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
} shared_queue;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_queue *shared;
static size_t shared_count;
static size_t shared_capacity;

cl_int locus__opencl_device_queue(cl_platform_id platform, cl_device_id device,
                                  cl_context *context, cl_command_queue *queue,
                                  const char **failed_call)
{
    cl_int err = CL_SUCCESS;
    *failed_call = "";
    pthread_mutex_lock(&shared_lock);
    for (size_t i = 0; i < shared_count; i++) {
        if (shared[i].device == device) {
            *context = shared[i].context;
            *queue = shared[i].queue;
            goto unlock;
        }
    }
    if (shared_count == shared_capacity) {
        size_t grown = shared_capacity == 0 ? 4 : 2 * shared_capacity;
        shared_queue *entries = realloc(shared, grown * sizeof *entries);
        if (entries == NULL) {
            *failed_call = "realloc";
            err = CL_OUT_OF_HOST_MEMORY;
            goto unlock;
        }
        shared = entries;
        shared_capacity = grown;
    }
    cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                          (cl_context_properties)platform, 0};
    cl_context made = clCreateContext(properties, 1, &device, NULL, NULL, &err);
    if (made == NULL || err != CL_SUCCESS) {
        *failed_call = "clCreateContext";
        if (err == CL_SUCCESS)
            err = CL_INVALID_CONTEXT;
        goto unlock;
    }
    cl_command_queue made_queue = clCreateCommandQueue(made, device, 0, &err);
    if (made_queue == NULL || err != CL_SUCCESS) {
        /* A context without a queue is of no use; releasing one that was
         * never used from other threads is safe. */
        clReleaseContext(made);
        *failed_call = "clCreateCommandQueue";
        if (err == CL_SUCCESS)
            err = CL_INVALID_COMMAND_QUEUE;
        goto unlock;
    }
    shared[shared_count++] = (shared_queue){device, made, made_queue};
    *context = made;
    *queue = made_queue;
unlock:
    pthread_mutex_unlock(&shared_lock);
    return err;
}
