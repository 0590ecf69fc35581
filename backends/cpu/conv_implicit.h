/* Implicit-GEMM convolution on the CPU workers (conv_implicit.c says
 * how): im2col fused into the GEMM's packing, no lowered matrix. */
#ifndef LOCUS_CPU_CONV_IMPLICIT_H
#define LOCUS_CPU_CONV_IMPLICIT_H

#include <stddef.h>

#include "conv2d.h"

/* Bytes of workspace the implicit GEMM uses for the problem; 0 (false)
 * when the count overflows. */
int locus__cpu_implicit_workspace(const locus__conv_problem *problem,
                                  size_t *bytes);

/* For tests: each of problem->workers workers' first share of the work
 * (its filter row panels and micro-panel columns in the worker grid,
 * before any stealing), in kernel calls of the whole depth plus its
 * packing of B, into loads[workers]; 0 where a count overflows. Reads
 * the problem, its ISA table and services->split alone. */
int locus__cpu_implicit_loads(const locus__conv_problem *problem,
                              size_t *loads);

/* Runs the implicit GEMM over the device's workers and sets the record's
 * workspace_bytes to the bytes it used. */
locus_status locus__cpu_conv2d_implicit(const locus__conv_problem *problem);

#endif
