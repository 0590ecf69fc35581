/* conv's references for `locus bench` (bench_reference_conv in bench.h
 * runs them in this order): oneDNN first, the vendor library and so the
 * result's "reference" and "ratio"; then im2col + OpenBLAS, the textbook
 * lowering on the BLAS the gemm benchmark compares with. */
#ifndef LOCUS_TOOL_BENCH_REF_CONV_H
#define LOCUS_TOOL_BENCH_REF_CONV_H

#include <stdbool.h>

#include "bench.h"
#include "bench_ref_onednn.h"

/* im2col + cblas_sgemm per image (bench_ref_conv_openblas.c); nothing
 * without OpenBLAS. */
void bench_reference_conv_openblas(const bench_reference_input *input,
                                   bench_result *result);

/* Whether a reference's NCHW output agrees with a float64 direct loop on
 * a fixed sample of entries; says why not on stderr, naming `what`. A
 * reference whose output is wrong (a layout or padding mistake) would make
 * its time meaningless, so it is then left out. */
bool bench_conv_output_agrees(const bench_reference_input *input,
                              const float *output, const char *what);

#endif
