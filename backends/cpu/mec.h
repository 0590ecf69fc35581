/* MEC convolution on the CPU workers (mec.c says how). */
#ifndef LOCUS_CPU_MEC_H
#define LOCUS_CPU_MEC_H

#include <stddef.h>

#include "conv2d.h"

/* Bytes of workspace MEC allocates for the problem; 0 (false) when the
 * count overflows. */
int locus__cpu_mec_workspace(const locus__conv_problem *problem, size_t *bytes);

/* Images per GEMM MEC would use: 1 is its solution B, more solution A
 * (mec.c says when); 0 when a count overflows. For tests of the rule. */
size_t locus__cpu_mec_group(const locus__conv_problem *problem);

/* Workers per image in MEC's shared-lowering mode, 0 where it uses
 * solution A or B (mec.c says when); for tests of the rule. */
size_t locus__cpu_mec_filter_ways(const locus__conv_problem *problem);

/* Runs MEC over the device's workers and sets the record's
 * workspace_bytes to what it allocated. */
locus_status locus__cpu_conv2d_mec(const locus__conv_problem *problem);

#endif
