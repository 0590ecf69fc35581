/* The op tests are written once and built for each device backend: this
 * header picks the backend's helpers from the define the build passes
 * (LOCUS_TEST_BACKEND_OPENCL, else CUDA). A CUDA test skips (77) without a
 * CUDA device; an OpenCL test never skips (test_opencl_common.h). */
#ifndef LOCUS_DEVICE_TEST_H
#define LOCUS_DEVICE_TEST_H

#if defined(LOCUS_TEST_BACKEND_OPENCL)
#include "test_opencl_common.h"
#define device_test_open opencl_test_open
#define DEVICE_TEST_BACKEND "opencl"
/* 0: whether the implicit GEMM convolution is offered is decided at run
 * time (test_device_conv.c): on OpenCL only with the GPU kernels. */
#define DEVICE_TEST_HAS_IMPLICIT_CONV 0
#else
#include "cuda_test.h"
#define device_test_open cuda_test_open
#define DEVICE_TEST_BACKEND "cuda"
#define DEVICE_TEST_HAS_IMPLICIT_CONV 1
#endif

#endif
