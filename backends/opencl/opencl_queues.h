/* The process-wide context and command queue of each OpenCL device. */
#ifndef LOCUS_OPENCL_QUEUES_H
#define LOCUS_OPENCL_QUEUES_H

#include <CL/cl.h>

/* The context and in-order queue of device, made on the first call and the
 * same on every later one, from any thread. Never to be released by the
 * caller (opencl_queues.c says why). On failure returns the OpenCL error
 * and names the call that failed in *failed_call. */
cl_int locus__opencl_device_queue(cl_platform_id platform, cl_device_id device,
                                  cl_context *context, cl_command_queue *queue,
                                  const char **failed_call);

#endif
