/* oneDNN as conv's reference for `locus bench`, when the tool was built
 * with it (LOCUS_HAVE_ONEDNN); only the tool links it, never liblocus. */
#ifndef LOCUS_TOOL_BENCH_REF_ONEDNN_H
#define LOCUS_TOOL_BENCH_REF_ONEDNN_H

#include "bench.h"

/* oneDNN's forward-inference convolution primitive on the same inputs and
 * as many threads as the device has workers; adds nothing when oneDNN is
 * not built in or refuses the layer (the reason on stderr). */
void bench_reference_conv_onednn(const bench_reference_input *input,
                                 bench_result *result);

#endif
