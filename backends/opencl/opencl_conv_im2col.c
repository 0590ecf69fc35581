/*
 * conv2d by im2col + GEMM on an OpenCL device: per image the (C R S) x
 * (P Q) column matrix (conv.cl's im2col kernel), then output_i (K x PQ) =
 * F (K x CRS) * cols_i, one launch of gemm.cl's kernel batched over the
 * images of a chunk. A 1x1 filter with stride 1 and no padding needs no
 * lowering: the image is the column matrix (workspace 0).
 *
 * Images are lowered in chunks so the lowered part stays under
 * OPENCL_CONV_WORKSPACE_CAP and the device's largest allocation (at least
 * one image, which fails as out of device memory when even that is too
 * big).
 */
#include "opencl_conv.h"

size_t locus__opencl_im2col_bytes(const opencl_conv_shape *s)
{
    return s->c * s->r * s->s * s->p * s->q * sizeof(float);
}

locus_status locus__opencl_conv_im2col(opencl_conv_run *run)
{
    const opencl_conv_shape *s = &run->sh;
    const size_t pq = s->p * s->q, crs = s->c * s->r * s->s;
    /* f64: doubles, and the f64 program's element-wise lowering on every
     * device type. */
    const size_t element = run->f64 ? sizeof(double) : sizeof(float);
    opencl_gemm g = {
        .f64 = run->f64,
        .m = s->k,
        .n = pq,
        .k = crs,
        .lda = crs,
        .ldb = pq,
        .ldc = pq,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = run->filter,
        .c = run->output,
        .b_batch = crs * pq,
        .c_batch = s->k * pq,
    };
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    if (opencl_conv_is_pointwise(s)) {
        g.b = run->input;
        g.batch = s->n;
        run->workspace_bytes = 0;
        err = locus__opencl_enqueue_gemm(run->device, &g, &failed);
        return err == CL_SUCCESS
                   ? LOCUS_SUCCESS
                   : locus__opencl_op_fail(run->state, run->index, run->device,
                                           err, failed, "conv2d 1x1 gemm");
    }
    const size_t per_image =
        locus__opencl_im2col_bytes(s) / sizeof(float) * element;
    const size_t chunk = locus__opencl_conv_chunk(run->device, s->n, per_image);
    cl_mem cols = NULL;
    locus_status status =
        locus__opencl_conv_workspace(run, chunk * per_image, 0, &cols);
    if (status != LOCUS_SUCCESS)
        return status;
    run->workspace_bytes = chunk * per_image;
    g.b = cols;
    const cl_uint C = (cl_uint)s->c, H = (cl_uint)s->h, W = (cl_uint)s->w,
                  R = (cl_uint)s->r, S = (cl_uint)s->s, P = (cl_uint)s->p,
                  Q = (cl_uint)s->q, SH = (cl_uint)s->sh, SW = (cl_uint)s->sw,
                  PH = (cl_uint)s->ph, PW = (cl_uint)s->pw;
    for (size_t first = 0; first < s->n && status == LOCUS_SUCCESS;
         first += chunk) {
        const size_t images = s->n - first < chunk ? s->n - first : chunk;
        const cl_ulong x_off = first * s->c * s->h * s->w;
        const cl_ulong total = run->f64
                                   ? (cl_ulong)(images * crs * pq)
                                   : opencl_lower_total(run, images * crs, pq);
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->input},
            {sizeof x_off, &x_off},
            {sizeof(cl_mem), &cols},
            {sizeof total, &total},
            {sizeof C, &C},
            {sizeof H, &H},
            {sizeof W, &W},
            {sizeof R, &R},
            {sizeof S, &S},
            {sizeof P, &P},
            {sizeof Q, &Q},
            {sizeof SH, &SH},
            {sizeof SW, &SW},
            {sizeof PH, &PH},
            {sizeof PW, &PW},
        };
        err = locus__opencl_enqueue_1d(
            run->device,
            run->f64 ? run->device->im2col_f64 : run->device->im2col, args,
            sizeof args / sizeof args[0],
            run->f64 ? (size_t)total : opencl_lower_items(run, total),
            run->f64 ? OPENCL_LOWER_GROUP : opencl_lower_group(run), &failed);
        if (err == CL_SUCCESS) {
            g.c_off = first * s->k * pq;
            g.batch = images;
            err = locus__opencl_enqueue_gemm(run->device, &g, &failed);
        }
        /* The next chunk overwrites cols: wait for this one's GEMM. */
        if (err == CL_SUCCESS && first + chunk < s->n)
            err = locus__opencl_finish(run->device, &failed);
        if (err != CL_SUCCESS)
            status = locus__opencl_op_fail(run->state, run->index, run->device,
                                           err, failed, "conv2d im2col");
    }
    /* Released after the op's commands completed: conv2d waits with
     * clFinish before anything else, and the queue keeps the buffer alive
     * until its commands end anyway. */
    clReleaseMemObject(cols);
    return status;
}
