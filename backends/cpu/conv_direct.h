/* Direct convolution on the CPU workers (conv_direct.c says how): the
 * implicit GEMM's other orientation, filters as vectors and the input
 * read in place. conv_implicit.c runs it where the ISA has its kernel and
 * the shape fills its tiles. */
#ifndef LOCUS_CPU_CONV_DIRECT_H
#define LOCUS_CPU_CONV_DIRECT_H

#include <stddef.h>

#include "conv2d.h"

/* Whether the direct kernel takes this problem: the ISA has one, its
 * tiles waste no more lanes than the implicit GEMM's would, and its sizes
 * do not overflow. */
int locus__cpu_direct_fits(const locus__conv_problem *problem);

/* Bytes of workspace the direct convolution uses (only where it fits). */
size_t locus__cpu_direct_workspace(const locus__conv_problem *problem);

/* For tests: each of problem->workers workers' first share of the work
 * (before any stealing, shares.h), in kernel calls, into loads[workers];
 * 0 where the kernel is missing or a count overflows. */
int locus__cpu_direct_loads(const locus__conv_problem *problem, size_t *loads);

/* Runs it over the device's workers and sets the record's
 * workspace_bytes. */
locus_status locus__cpu_conv2d_direct(const locus__conv_problem *problem);

#endif
