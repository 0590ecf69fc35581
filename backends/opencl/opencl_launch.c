/*
 * Argument setting and enqueueing of the kernels. Kernel objects keep their
 * arguments between calls, so these run with device->lock held from the
 * first clSetKernelArg to the end of the op.
 */
#include "opencl_launch.h"

#include <stdio.h>

static cl_int set_args(cl_kernel kernel, const opencl_arg *args, size_t count,
                       const char **failed)
{
    for (size_t i = 0; i < count; i++) {
        cl_int err =
            clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            *failed = "clSetKernelArg";
            return err;
        }
    }
    return CL_SUCCESS;
}

cl_int locus__opencl_enqueue_1d(opencl_device *device, cl_kernel kernel,
                                const opencl_arg *args, size_t count,
                                size_t total, size_t group, const char **failed)
{
    cl_int err = set_args(kernel, args, count, failed);
    if (err != CL_SUCCESS)
        return err;
    size_t global = (total + group - 1) / group * group;
    err = clEnqueueNDRangeKernel(device->queue, kernel, 1, NULL, &global,
                                 &group, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        *failed = "clEnqueueNDRangeKernel";
    return err;
}

cl_int locus__opencl_enqueue_3d(opencl_device *device, cl_kernel kernel,
                                const opencl_arg *args, size_t count,
                                const size_t global[3], const size_t local[3],
                                const char **failed)
{
    cl_int err = set_args(kernel, args, count, failed);
    if (err != CL_SUCCESS)
        return err;
    err = clEnqueueNDRangeKernel(device->queue, kernel, 3, NULL, global, local,
                                 0, NULL, NULL);
    if (err != CL_SUCCESS)
        *failed = "clEnqueueNDRangeKernel";
    return err;
}

/* The CPU variant's micro-tile (gemm.cl's MR and NR). */
#define CPU_GEMM_MR 6
#define CPU_GEMM_NR 16
/* Groups wanted per compute unit: PoCL hands work-groups to its threads
 * as they come free, so a few per thread even out blocks of unequal cost
 * (the edges) without making the blocks so small that packing dominates. */
#define CPU_GEMM_GROUPS_PER_UNIT 4

/* The CPU variant's range: one work-item per group, each owning an even
 * share of m and n (gemm.cl). At least ceil(m / TM) x ceil(n / TN) groups
 * so that a block fits the local arrays; more, splitting the dimension
 * with the larger blocks, while the range leaves compute units without
 * a few groups each and there are micro-tiles left to share out. */
static void cpu_gemm_groups(const opencl_device *device, const opencl_gemm *g,
                            size_t global[3])
{
    const size_t tiles_m = (g->m + CPU_GEMM_MR - 1) / CPU_GEMM_MR;
    const size_t tiles_n = (g->n + CPU_GEMM_NR - 1) / CPU_GEMM_NR;
    const size_t units =
        device->compute_units > 0 ? (size_t)device->compute_units : 1;
    const size_t wanted = units * CPU_GEMM_GROUPS_PER_UNIT;
    size_t gm = global[1], gn = global[0];
    while (gm * gn * g->batch < wanted) {
        /* Split the longer side of the blocks: it keeps them square,
         * which packs the fewest elements per flop. */
        const size_t side_m = (tiles_m + gm - 1) / gm * CPU_GEMM_MR;
        const size_t side_n = (tiles_n + gn - 1) / gn * CPU_GEMM_NR;
        if (side_m >= side_n && gm < tiles_m)
            gm++;
        else if (gn < tiles_n)
            gn++;
        else if (gm < tiles_m)
            gm++;
        else
            break;
    }
    global[0] = gn;
    global[1] = gm;
}

/* The f64 program's gemm (kernels/f64.cl): GPU variant, a 16 x 16 group
 * per 64 x 64 tile of C; CPU variant, one work-item per 4 x 8 block, in
 * groups the implementation picks. */
#define F64_TILE 64
#define F64_SIDE 16
#define F64_CPU_ROWS 4
#define F64_CPU_COLS 8

static cl_int enqueue_gemm_f64(opencl_device *device, const opencl_gemm *g,
                               const char **failed)
{
    const cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, k = (cl_uint)g->k;
    const cl_uint lda = (cl_uint)g->lda, ldb = (cl_uint)g->ldb,
                  ldc = (cl_uint)g->ldc;
    const cl_ulong a_off = g->a_off, b_off = g->b_off, c_off = g->c_off;
    const cl_ulong a_batch = g->a_batch, b_batch = g->b_batch,
                   c_batch = g->c_batch;
    const cl_int trans_a = g->trans_a, trans_b = g->trans_b;
    const cl_double alpha = g->alpha, beta = g->beta;
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
        {sizeof alpha, &alpha},
        {sizeof beta, &beta},
        {sizeof trans_a, &trans_a},
        {sizeof trans_b, &trans_b},
    };
    if (device->f64_cpu_kernels) {
        const size_t global[3] = {(g->n + F64_CPU_COLS - 1) / F64_CPU_COLS,
                                  (g->m + F64_CPU_ROWS - 1) / F64_CPU_ROWS,
                                  g->batch};
        cl_int err = set_args(device->gemm_f64, args,
                              sizeof args / sizeof args[0], failed);
        if (err != CL_SUCCESS)
            return err;
        err = clEnqueueNDRangeKernel(device->queue, device->gemm_f64, 3, NULL,
                                     global, NULL, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            *failed = "clEnqueueNDRangeKernel(locus_gemm f64)";
        return err;
    }
    const size_t local[3] = {F64_SIDE, F64_SIDE, 1};
    const size_t global[3] = {(g->n + F64_TILE - 1) / F64_TILE * F64_SIDE,
                              (g->m + F64_TILE - 1) / F64_TILE * F64_SIDE,
                              g->batch};
    return locus__opencl_enqueue_3d(device, device->gemm_f64, args,
                                    sizeof args / sizeof args[0], global, local,
                                    failed);
}

cl_int locus__opencl_enqueue_gemm(opencl_device *device, const opencl_gemm *g,
                                  const char **failed)
{
    if (g->f64)
        return enqueue_gemm_f64(device, g, failed);
    const opencl_tuning *t = &device->tuning;
    const cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, k = (cl_uint)g->k;
    const cl_uint lda = (cl_uint)g->lda, ldb = (cl_uint)g->ldb,
                  ldc = (cl_uint)g->ldc;
    const cl_ulong a_off = g->a_off, b_off = g->b_off, c_off = g->c_off;
    const cl_ulong a_batch = g->a_batch, b_batch = g->b_batch,
                   c_batch = g->c_batch;
    const cl_int trans_a = g->trans_a, trans_b = g->trans_b;
    const cl_float alpha = (cl_float)g->alpha, beta = (cl_float)g->beta;
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
        {sizeof alpha, &alpha},
        {sizeof beta, &beta},
        {sizeof trans_a, &trans_a},
        {sizeof trans_b, &trans_b},
    };
    /* GPU variant: a group of WN x WM = 256 x 1 work-items per TM x TN tile
     * of C, groups along dimension 0 over the tiles of n (neighbouring
     * groups share A's row panel, as the CUDA kernel's grid), dimension 1
     * over those of m, dimension 2 over the batch; for m <= 64 the short
     * kernel, 128 work-items per 64 x TN tile (gemm.cl says why). CPU
     * variant: one work-item per group, the groups chosen by
     * cpu_gemm_groups. */
    const int short_tile = !t->cpu_kernels && device->gemm_short != NULL &&
                           g->m <= OPENCL_SHORT_TILE_M;
    cl_kernel kernel = short_tile ? device->gemm_short : device->gemm;
    const size_t tm = short_tile ? OPENCL_SHORT_TILE_M : t->tm;
    const size_t group = short_tile ? OPENCL_SHORT_TILE_ITEMS : t->wn;
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        cl_int err =
            clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            *failed = "clSetKernelArg(locus_gemm)";
            return err;
        }
    }
    size_t local[3] = {group, t->wm, 1};
    size_t global[3] = {(g->n + t->tn - 1) / t->tn * group,
                        (g->m + tm - 1) / tm * t->wm, g->batch};
    if (t->cpu_kernels)
        cpu_gemm_groups(device, g, global);
    cl_int err = clEnqueueNDRangeKernel(device->queue, kernel, 3, NULL, global,
                                        local, 0, NULL, NULL);
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
