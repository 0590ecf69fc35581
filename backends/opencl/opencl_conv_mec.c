/*
 * conv2d by MEC on an OpenCL device (backends/cpu/mec.c has the
 * derivation): per image the lowered matrix L, (Hp C S) x Q (conv.cl's
 * mec_lower kernel), and output row p is F' (K x RCS) times the window of
 * L starting at row p sh C S; one launch of gemm.cl's kernel per image
 * batched over the P rows (the windows overlap, which is MEC's point). F'
 * is the filter in (k, r, c, s) order, permuted once per call unless
 * R == 1 or C == 1.
 *
 * Images are lowered in chunks so the lowered part stays under
 * OPENCL_CONV_WORKSPACE_CAP and the device's largest allocation (at least
 * one image, which fails as out of device memory when even that is too
 * big).
 */
#include "opencl_conv.h"

size_t locus__opencl_mec_bytes(const opencl_conv_shape *s)
{
    return (s->h + 2 * s->ph) * s->c * s->s * s->q * sizeof(float);
}

size_t locus__opencl_mec_filter_bytes(const opencl_conv_shape *s)
{
    return (s->r > 1 && s->c > 1) ? s->k * s->c * s->r * s->s * sizeof(float)
                                  : 0;
}

locus_status locus__opencl_conv_mec(opencl_conv_run *run)
{
    const opencl_conv_shape *s = &run->sh;
    const size_t rcs = s->r * s->c * s->s;
    const size_t permuted_bytes = locus__opencl_mec_filter_bytes(s);
    const size_t per_image = locus__opencl_mec_bytes(s);
    const size_t chunk = locus__opencl_conv_chunk(run->device, s->n, per_image);
    const size_t l_size = per_image / sizeof(float);
    cl_mem lowered = NULL, permuted = NULL;
    const char *failed = "";
    cl_int err = CL_SUCCESS;
    locus_status status =
        locus__opencl_conv_workspace(run, chunk * per_image, 0, &lowered);
    if (status == LOCUS_SUCCESS && permuted_bytes > 0)
        status =
            locus__opencl_conv_workspace(run, permuted_bytes, 1, &permuted);
    if (status != LOCUS_SUCCESS)
        goto release;
    run->workspace_bytes = chunk * per_image + permuted_bytes;
    const cl_uint C = (cl_uint)s->c, H = (cl_uint)s->h, W = (cl_uint)s->w,
                  R = (cl_uint)s->r, S = (cl_uint)s->s, Q = (cl_uint)s->q,
                  SW = (cl_uint)s->sw, PH = (cl_uint)s->ph, PW = (cl_uint)s->pw;
    if (permuted != NULL) {
        const cl_ulong total =
            opencl_lower_total(run, s->k * s->r, s->c * s->s);
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->filter},
            {sizeof(cl_mem), &permuted},
            {sizeof total, &total},
            {sizeof C, &C},
            {sizeof R, &R},
            {sizeof S, &S},
        };
        err = locus__opencl_enqueue_1d(run->device, run->device->filter_krcs,
                                       args, sizeof args / sizeof args[0],
                                       opencl_lower_items(run, total),
                                       opencl_lower_group(run), &failed);
    }
    opencl_gemm g = {
        .m = s->k,
        .n = s->q,
        .k = rcs,
        .lda = rcs,
        .ldb = s->q,
        .ldc = s->p * s->q,
        .alpha = 1.0f,
        .beta = 0.0f,
        .a = permuted != NULL ? permuted : run->filter,
        .b = lowered,
        .c = run->output,
        .b_batch = s->sh * s->c * s->s * s->q,
        .c_batch = s->q,
        .batch = s->p,
    };
    for (size_t first = 0; first < s->n && err == CL_SUCCESS; first += chunk) {
        const size_t images = s->n - first < chunk ? s->n - first : chunk;
        const cl_ulong x_off = first * s->c * s->h * s->w;
        const cl_ulong total =
            opencl_lower_total(run, images * l_size / s->q, s->q);
        const opencl_arg args[] = {
            {sizeof(cl_mem), &run->input},
            {sizeof x_off, &x_off},
            {sizeof(cl_mem), &lowered},
            {sizeof total, &total},
            {sizeof C, &C},
            {sizeof H, &H},
            {sizeof W, &W},
            {sizeof S, &S},
            {sizeof Q, &Q},
            {sizeof SW, &SW},
            {sizeof PH, &PH},
            {sizeof PW, &PW},
        };
        err = locus__opencl_enqueue_1d(run->device, run->device->mec_lower,
                                       args, sizeof args / sizeof args[0],
                                       opencl_lower_items(run, total),
                                       opencl_lower_group(run), &failed);
        for (size_t i = 0; i < images && err == CL_SUCCESS; i++) {
            g.b_off = i * l_size;
            g.c_off = (first + i) * s->k * s->p * s->q;
            err = locus__opencl_enqueue_gemm(run->device, &g, &failed);
        }
        if (err == CL_SUCCESS && first + chunk < s->n)
            err = locus__opencl_finish(run->device, &failed);
    }
    if (err != CL_SUCCESS)
        status = locus__opencl_op_fail(run->state, run->index, run->device, err,
                                       failed, "conv2d mec");
release:
    if (lowered != NULL)
        clReleaseMemObject(lowered);
    if (permuted != NULL)
        clReleaseMemObject(permuted);
    return status;
}
