/*
 * conv2d with the 0.3 features on a CUDA device (cuda_conv_layer.c) and
 * the kernels it launches (conv_layer.cu): groups (depthwise included),
 * dilation, asymmetric padding, bias, relu/relu6, NHWC input (KRSC filter)
 * and/or output, in f32 and f64. Same conventions as cuda_kernels.h:
 * device pointers, a stream, the launch status back, no synchronization.
 */
#ifndef LOCUS_CUDA_CONV_LAYER_H
#define LOCUS_CUDA_CONV_LAYER_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A resolved layer. Every extent below fits the kernels' 32-bit indexing
 * (locus__cuda_layer_fits); the batch need not. Only pad_top and
 * pad_left reach the index math: bottom and right padding only decide
 * out_h and out_w. */
typedef struct locus__cuda_layer {
    size_t batch, channels, height, width;
    size_t filters, kernel_h, kernel_w;
    size_t stride_h, stride_w, pad_top, pad_left;
    size_t dilation_h, dilation_w, groups;
    size_t out_h, out_w;
    int input_nhwc, output_nhwc; /* the filter is KRSC with an NHWC input */
    int activation;              /* locus_activation: none, relu, relu6 */
} locus__cuda_layer;

/* Nonzero when an image, an output image, the filter and one group's
 * column matrix (C/G R S by P Q) each stay under 2^31 - 2^28 elements
 * (the kernels' 32-bit grid-stride indices). */
int locus__cuda_layer_fits(const locus__cuda_layer *l);

/* The group's column matrix of images [first, first + images), each
 * (image, group) pair at columns + ((i - first) G + g) * C/G R S P Q.
 * NCHW input: rows (c, r, s), columns (p, q), so that output_g (K/G x PQ)
 * = F_g (K/G x C/G R S) cols. NHWC input: transposed, rows (p, q),
 * columns (r, s, c), matching the KRSC filter (threads run along c, so
 * reads and writes are coalesced). Padding and dilation in the index
 * math; out-of-image taps are 0. */
cudaError_t locus__cuda_layer_im2col(const locus__cuda_layer *l,
                                     const float *input, size_t first,
                                     size_t images, float *columns,
                                     cudaStream_t stream);
cudaError_t locus__cuda_layer_im2col_f64(const locus__cuda_layer *l,
                                         const double *input, size_t first,
                                         size_t images, double *columns,
                                         cudaStream_t stream);

/* output = act(output + bias) in place over the whole output (bias may be
 * NULL); nothing is launched when there is neither. */
cudaError_t locus__cuda_layer_epilogue(const locus__cuda_layer *l,
                                       const float *bias, float *output,
                                       cudaStream_t stream);
cudaError_t locus__cuda_layer_epilogue_f64(const locus__cuda_layer *l,
                                           const double *bias, double *output,
                                           cudaStream_t stream);

/* groups == channels (each group one input channel, K/C multipliers):
 * NCHW input: a block per output tile of one (image, channel), the input
 * patch and the channel's taps staged once in shared memory, every
 * multiplier computed from them; NHWC input: a thread per output with
 * channels fastest (coalesced along c). Bias and activation fused. Returns
 * cudaErrorInvalidConfiguration where the patch would not fit shared
 * memory (the caller then runs the direct kernel). */
cudaError_t locus__cuda_layer_depthwise(const locus__cuda_layer *l,
                                        const float *input, const float *filter,
                                        const float *bias, float *output,
                                        cudaStream_t stream);
cudaError_t locus__cuda_layer_depthwise_f64(const locus__cuda_layer *l,
                                            const double *input,
                                            const double *filter,
                                            const double *bias, double *output,
                                            cudaStream_t stream);

/* Every feature, a thread per output summing its C/G R S terms in (c, r,
 * s) order: the correct-first fallback, no workspace. Bias and activation
 * fused. */
cudaError_t locus__cuda_layer_direct(const locus__cuda_layer *l,
                                     const float *input, const float *filter,
                                     const float *bias, float *output,
                                     cudaStream_t stream);
cudaError_t locus__cuda_layer_direct_f64(const locus__cuda_layer *l,
                                         const double *input,
                                         const double *filter,
                                         const double *bias, double *output,
                                         cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include "cuda_internal.h"

/* The backend table's conv2d_layer (backend.h, ABI 3). */
locus_status locus__cuda_conv2d_layer_op(void *state, size_t device,
                                         const locus_conv2d_desc *desc,
                                         const void *input, const void *filter,
                                         const void *bias, void *output,
                                         locus_op_context *op);

/* cuda_conv.c: 0.2's f32 kernels for desc (groups 1, dilation 1,
 * symmetric padding, NCHW), its algorithm chosen as 0.2 chooses it, with
 * the device begun and nothing waited for; *ran: the record's name of the
 * algorithm that ran. */
locus_status locus__cuda_conv2d_f32_begun(cuda_state *state, size_t index,
                                          cuda_device *device,
                                          const locus_conv2d_desc *desc,
                                          const void *input, const void *filter,
                                          void *output, locus_op_context *op,
                                          const char **ran);
#endif

#endif
