/* `locus bench conv` reference: cuDNN forward convolution, NCHW/KCRS f32,
 * with the fastest algorithm cudnnFindConvolutionForwardAlgorithm measures
 * for the shape (whatever its workspace), then timed on its own. FP32 uses
 * CUDNN_FMA_MATH (no TF32 tensor cores, FP32 semantics as Locus's fp32);
 * --math tf32 allows tensor cores (CUDNN_TENSOR_OP_MATH). --dtype f64:
 * double tensors and compute type. conv_layer: the same for a network's
 * layer (`--net`), with groups, dilation, bias and activation. */
#include <cudnn.h>

#include "bench_cuda_common.cuh"

namespace
{

const char *algorithm_name(cudnnConvolutionFwdAlgo_t algorithm)
{
    switch (algorithm) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
        return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
        return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
        return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
        return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
        return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return "winograd_nonfused";
    default:
        return "unknown";
    }
}

#define CUDNN_TRY(call)                                                        \
    do {                                                                       \
        cudnnStatus_t s_ = (call);                                             \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                      \
            bench_cuda::fail(error, error_size, "%s: %s", #call,               \
                             cudnnGetErrorString(s_));                         \
            goto cleanup;                                                      \
        }                                                                      \
    } while (0)

template <class T>
int conv_in(const locus_bench_cuda_conv *t, cudnnDataType_t type, int tf32,
            uint64_t seed, int repeat, double *seconds, char *name,
            size_t name_size, char *error, size_t error_size)
{
    cudnnHandle_t handle = nullptr;
    cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
    cudnnFilterDescriptor_t w_desc = nullptr;
    cudnnConvolutionDescriptor_t conv_desc = nullptr;
    T *x = nullptr, *w = nullptr, *y = nullptr;
    void *workspace = nullptr;
    int n = 0, k = 0, p = 0, q = 0, returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
    size_t workspace_bytes = 0;
    /* cuDNN's scaling factors are doubles for double data, else floats. */
    const T alpha = 1, beta = 0;
    if (error_size > 0)
        error[0] = '\0';
    CUDNN_TRY(cudnnCreate(&handle));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&x_desc));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&y_desc));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&w_desc));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&conv_desc));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, type,
                                         (int)t->batch, (int)t->channels,
                                         (int)t->height, (int)t->width));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(w_desc, type, CUDNN_TENSOR_NCHW,
                                         (int)t->filters, (int)t->channels,
                                         (int)t->kernel_h, (int)t->kernel_w));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(
        conv_desc, (int)t->pad, (int)t->pad, (int)t->stride, (int)t->stride, 1,
        1, CUDNN_CROSS_CORRELATION, type));
    CUDNN_TRY(cudnnSetConvolutionMathType(
        conv_desc, type == CUDNN_DATA_DOUBLE ? CUDNN_DEFAULT_MATH
                   : tf32                    ? CUDNN_TENSOR_OP_MATH
                                             : CUDNN_FMA_MATH));
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(conv_desc, x_desc, w_desc,
                                                    &n, &k, &p, &q));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(y_desc, CUDNN_TENSOR_NCHW, type, n, k,
                                         p, q));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(
        &x, t->batch * t->channels * t->height * t->width, seed));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(
        &w, t->filters * t->channels * t->kernel_h * t->kernel_w, seed + 1));
    BENCH_CUDA_TRY(cudaMalloc(&y, (size_t)n * (size_t)k * (size_t)p *
                                      (size_t)q * sizeof(T)));
    CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(
        handle, x_desc, w_desc, conv_desc, y_desc, 16, &returned, perf));
    for (int i = 0; i < returned; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) {
            algorithm = perf[i].algo;
            workspace_bytes = perf[i].memory;
            break;
        }
    if (workspace_bytes > 0)
        BENCH_CUDA_TRY(cudaMalloc(&workspace, workspace_bytes));
    snprintf(name, name_size, "%s", algorithm_name(algorithm));
    BENCH_CUDA_TRY(bench_cuda::time_best(
        [&]() {
            cudnnStatus_t s = cudnnConvolutionForward(
                handle, &alpha, x_desc, x, w_desc, w, conv_desc, algorithm,
                workspace, workspace_bytes, &beta, y_desc, y);
            return s == CUDNN_STATUS_SUCCESS ? cudaGetLastError()
                                             : cudaErrorUnknown;
        },
        repeat, seconds));
cleanup:
    int failed = error_size > 0 && error[0] != '\0';
    cudaFree(workspace);
    cudaFree(y);
    cudaFree(w);
    cudaFree(x);
    if (conv_desc != nullptr)
        cudnnDestroyConvolutionDescriptor(conv_desc);
    if (w_desc != nullptr)
        cudnnDestroyFilterDescriptor(w_desc);
    if (y_desc != nullptr)
        cudnnDestroyTensorDescriptor(y_desc);
    if (x_desc != nullptr)
        cudnnDestroyTensorDescriptor(x_desc);
    if (handle != nullptr)
        cudnnDestroy(handle);
    return failed;
}

/* f32 and f64 (double data, double compute, where cuDNN has algorithms
 * for it). Not the 16-bit types: Locus's have an f32 output, which
 * cuDNN's forward convolution does not take with 16-bit inputs. */
int conv(const locus_bench_cuda_conv *t, int dtype, int tf32, uint64_t seed,
         int repeat, double *seconds, char *name, size_t name_size, char *error,
         size_t error_size)
{
    if (dtype == LOCUS_BENCH_CUDA_F64)
        return conv_in<double>(t, CUDNN_DATA_DOUBLE, 0, seed, repeat, seconds,
                               name, name_size, error, error_size);
    if (dtype == LOCUS_BENCH_CUDA_F32)
        return conv_in<float>(t, CUDNN_DATA_FLOAT, tf32, seed, repeat, seconds,
                              name, name_size, error, error_size);
    return bench_cuda::not_offered(error, error_size, "cudnn conv", dtype);
}

/* A network's layer as a cuDNN user runs it: the group count on the
 * convolution descriptor, the fastest algorithm cudnnFind measures for
 * the convolution, then the bias and activation: relu fused by
 * cudnnConvolutionBiasActivationForward (z = y with alpha2 0); relu6,
 * which that call does not take (relu and identity only), and no
 * activation as the convolution, cudnnAddTensor of the bias and, for
 * relu6, cudnnActivationForward (clipped relu at 6). cuDNN's padding is
 * symmetric: an asymmetric layer is not offered. */
template <class T>
int conv_layer_in(const locus_bench_cuda_conv_layer *t, cudnnDataType_t type,
                  int tf32, uint64_t seed, int repeat, double *seconds,
                  char *name, size_t name_size, char *error, size_t error_size)
{
    cudnnHandle_t handle = nullptr;
    cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr,
                            b_desc = nullptr;
    cudnnFilterDescriptor_t w_desc = nullptr;
    cudnnConvolutionDescriptor_t conv_desc = nullptr;
    cudnnActivationDescriptor_t act_desc = nullptr;
    T *x = nullptr, *w = nullptr, *y = nullptr, *b = nullptr;
    void *workspace = nullptr;
    int n = 0, k = 0, p = 0, q = 0, returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    cudnnConvolutionFwdAlgo_t algorithm = CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
    size_t workspace_bytes = 0;
    bool fused = false;
    const char *how = "";
    const T alpha = 1, beta = 0, one = 1;
    const size_t groups = t->groups > 0 ? t->groups : 1;
    if (error_size > 0)
        error[0] = '\0';
    if (t->pad_top != t->pad_bottom || t->pad_left != t->pad_right) {
        bench_cuda::fail(error, error_size,
                         "cudnn: asymmetric padding is not offered");
        return LOCUS_BENCH_CUDA_NOT_OFFERED;
    }
    CUDNN_TRY(cudnnCreate(&handle));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&x_desc));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&y_desc));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&b_desc));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&w_desc));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&conv_desc));
    CUDNN_TRY(cudnnCreateActivationDescriptor(&act_desc));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, type,
                                         (int)t->batch, (int)t->channels,
                                         (int)t->height, (int)t->width));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(
        w_desc, type, CUDNN_TENSOR_NCHW, (int)t->filters,
        (int)(t->channels / groups), (int)t->kernel_h, (int)t->kernel_w));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(
        conv_desc, (int)t->pad_top, (int)t->pad_left, (int)t->stride_h,
        (int)t->stride_w, (int)t->dilation_h, (int)t->dilation_w,
        CUDNN_CROSS_CORRELATION, type));
    CUDNN_TRY(cudnnSetConvolutionGroupCount(conv_desc, (int)groups));
    CUDNN_TRY(cudnnSetConvolutionMathType(
        conv_desc, type == CUDNN_DATA_DOUBLE ? CUDNN_DEFAULT_MATH
                   : tf32                    ? CUDNN_TENSOR_OP_MATH
                                             : CUDNN_FMA_MATH));
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(conv_desc, x_desc, w_desc,
                                                    &n, &k, &p, &q));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(y_desc, CUDNN_TENSOR_NCHW, type, n, k,
                                         p, q));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(b_desc, CUDNN_TENSOR_NCHW, type, 1, k,
                                         1, 1));
    CUDNN_TRY(cudnnSetActivationDescriptor(
        act_desc,
        t->activation == 2   ? CUDNN_ACTIVATION_CLIPPED_RELU
        : t->activation == 1 ? CUDNN_ACTIVATION_RELU
                             : CUDNN_ACTIVATION_IDENTITY,
        CUDNN_NOT_PROPAGATE_NAN, 6.0));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(
        &x, t->batch * t->channels * t->height * t->width, seed));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(
        &w, t->filters * (t->channels / groups) * t->kernel_h * t->kernel_w,
        seed + 1));
    BENCH_CUDA_TRY(bench_cuda::random_buffer(&b, t->filters, seed + 2));
    BENCH_CUDA_TRY(cudaMalloc(&y, (size_t)n * (size_t)k * (size_t)p *
                                      (size_t)q * sizeof(T)));
    CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(
        handle, x_desc, w_desc, conv_desc, y_desc, 16, &returned, perf));
    for (int i = 0; i < returned; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) {
            algorithm = perf[i].algo;
            workspace_bytes = perf[i].memory;
            break;
        }
    if (workspace_bytes > 0)
        BENCH_CUDA_TRY(cudaMalloc(&workspace, workspace_bytes));
    /* The fused call where it takes the layer: tried once, else the
     * three calls. */
    if (t->bias && t->activation == 1) {
        const T zero = 0;
        fused = cudnnConvolutionBiasActivationForward(
                    handle, &alpha, x_desc, x, w_desc, w, conv_desc, algorithm,
                    workspace, workspace_bytes, &zero, y_desc, y, b_desc, b,
                    act_desc, y_desc, y) == CUDNN_STATUS_SUCCESS;
        (void)cudaGetLastError();
    }
    how = fused                           ? "+fused"
          : t->bias && t->activation != 0 ? "+add+act"
          : t->bias                       ? "+add"
          : t->activation != 0            ? "+act"
                                          : "";
    snprintf(name, name_size, "%s%s", algorithm_name(algorithm), how);
    BENCH_CUDA_TRY(bench_cuda::time_best(
        [&]() {
            cudnnStatus_t s;
            if (fused) {
                s = cudnnConvolutionBiasActivationForward(
                    handle, &alpha, x_desc, x, w_desc, w, conv_desc, algorithm,
                    workspace, workspace_bytes, &beta, y_desc, y, b_desc, b,
                    act_desc, y_desc, y);
            } else {
                s = cudnnConvolutionForward(handle, &alpha, x_desc, x, w_desc,
                                            w, conv_desc, algorithm, workspace,
                                            workspace_bytes, &beta, y_desc, y);
                if (s == CUDNN_STATUS_SUCCESS && t->bias)
                    s = cudnnAddTensor(handle, &one, b_desc, b, &one, y_desc,
                                       y);
                if (s == CUDNN_STATUS_SUCCESS && t->activation != 0)
                    s = cudnnActivationForward(handle, act_desc, &one, y_desc,
                                               y, &beta, y_desc, y);
            }
            return s == CUDNN_STATUS_SUCCESS ? cudaGetLastError()
                                             : cudaErrorUnknown;
        },
        repeat, seconds));
cleanup:
    int failed = error_size > 0 && error[0] != '\0';
    cudaFree(workspace);
    cudaFree(b);
    cudaFree(y);
    cudaFree(w);
    cudaFree(x);
    if (act_desc != nullptr)
        cudnnDestroyActivationDescriptor(act_desc);
    if (conv_desc != nullptr)
        cudnnDestroyConvolutionDescriptor(conv_desc);
    if (w_desc != nullptr)
        cudnnDestroyFilterDescriptor(w_desc);
    if (b_desc != nullptr)
        cudnnDestroyTensorDescriptor(b_desc);
    if (y_desc != nullptr)
        cudnnDestroyTensorDescriptor(y_desc);
    if (x_desc != nullptr)
        cudnnDestroyTensorDescriptor(x_desc);
    if (handle != nullptr)
        cudnnDestroy(handle);
    return failed;
}

int conv_layer(const locus_bench_cuda_conv_layer *t, int dtype, int tf32,
               uint64_t seed, int repeat, double *seconds, char *name,
               size_t name_size, char *error, size_t error_size)
{
    if (dtype == LOCUS_BENCH_CUDA_F64)
        return conv_layer_in<double>(t, CUDNN_DATA_DOUBLE, 0, seed, repeat,
                                     seconds, name, name_size, error,
                                     error_size);
    if (dtype == LOCUS_BENCH_CUDA_F32)
        return conv_layer_in<float>(t, CUDNN_DATA_FLOAT, tf32, seed, repeat,
                                    seconds, name, name_size, error,
                                    error_size);
    return bench_cuda::not_offered(error, error_size, "cudnn conv", dtype);
}

const locus_bench_cuda table = {
    LOCUS_BENCH_CUDA_ABI, "cudnn", nullptr, nullptr, conv, nullptr, conv_layer,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const locus_bench_cuda *
locus_bench_cuda_entry(void)
{
    return &table;
}
