/* `locus bench first-op` (bench_first_op.c), reached through bench_command:
 * what the first op of a new process with an empty calibration cache
 * costs beyond the op itself. */
#ifndef LOCUS_TOOL_BENCH_FIRST_OP_H
#define LOCUS_TOOL_BENCH_FIRST_OP_H

#include <stdio.h>

int bench_first_op_command(int argc, char **argv);
void bench_first_op_usage(FILE *out);

#endif
