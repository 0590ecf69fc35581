/*
 * Argument setting and enqueueing of the kernels. Kernel objects keep their
 * arguments between calls, so these run with device->lock held from the
 * first clSetKernelArg to the end of the op.
 */
#include "opencl_launch.h"

#include <stdio.h>

cl_int locus__opencl_enqueue_1d(opencl_device *device, cl_kernel kernel,
                                const opencl_arg *args, size_t count,
                                size_t total, size_t group, const char **failed)
{
    for (size_t i = 0; i < count; i++) {
        cl_int err =
            clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            *failed = "clSetKernelArg";
            return err;
        }
    }
    size_t global = (total + group - 1) / group * group;
    cl_int err = clEnqueueNDRangeKernel(device->queue, kernel, 1, NULL, &global,
                                        &group, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        *failed = "clEnqueueNDRangeKernel";
    return err;
}

cl_int locus__opencl_enqueue_gemm(opencl_device *device, const opencl_gemm *g,
                                  const char **failed)
{
    const opencl_tuning *t = &device->tuning;
    const cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, k = (cl_uint)g->k;
    const cl_uint lda = (cl_uint)g->lda, ldb = (cl_uint)g->ldb,
                  ldc = (cl_uint)g->ldc;
    const cl_ulong a_off = g->a_off, b_off = g->b_off, c_off = g->c_off;
    const cl_ulong a_batch = g->a_batch, b_batch = g->b_batch,
                   c_batch = g->c_batch;
    const cl_int trans_a = g->trans_a, trans_b = g->trans_b;
    const opencl_arg args[] = {
        {sizeof m, &m},
        {sizeof n, &n},
        {sizeof k, &k},
        {sizeof(cl_mem), &g->a},
        {sizeof a_off, &a_off},
        {sizeof lda, &lda},
        {sizeof a_batch, &a_batch},
        {sizeof(cl_mem), &g->b},
        {sizeof b_off, &b_off},
        {sizeof ldb, &ldb},
        {sizeof b_batch, &b_batch},
        {sizeof(cl_mem), &g->c},
        {sizeof c_off, &c_off},
        {sizeof ldc, &ldc},
        {sizeof c_batch, &c_batch},
        {sizeof(float), &g->alpha},
        {sizeof(float), &g->beta},
        {sizeof trans_a, &trans_a},
        {sizeof trans_b, &trans_b},
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        cl_int err = clSetKernelArg(device->gemm, (cl_uint)i, args[i].size,
                                    args[i].value);
        if (err != CL_SUCCESS) {
            *failed = "clSetKernelArg(locus_gemm)";
            return err;
        }
    }
    const size_t local[3] = {t->wn, t->wm, 1};
    const size_t global[3] = {(g->n + t->tn - 1) / t->tn * t->wn,
                              (g->m + t->tm - 1) / t->tm * t->wm, g->batch};
    cl_int err = clEnqueueNDRangeKernel(device->queue, device->gemm, 3, NULL,
                                        global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        *failed = "clEnqueueNDRangeKernel(locus_gemm)";
    return err;
}

cl_int locus__opencl_finish(opencl_device *device, const char **failed)
{
    cl_int err = clFinish(device->queue);
    if (err != CL_SUCCESS)
        *failed = "clFinish";
    return err;
}

void locus__opencl_set_algorithm(locus_op_context *op, const char *name)
{
    if (op != NULL && op->record != NULL)
        snprintf(op->record->algorithm, sizeof op->record->algorithm, "%s",
                 name);
}
