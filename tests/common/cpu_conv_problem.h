/* The locus__conv_problem the CPU backend builds for a conv_case, as far
 * as the algorithms' plans read it, for the tests that reach internal
 * functions (locus_internal_dep): a zeroed state with this machine's page
 * size and, unless isa is NULL, the kernel table forced to isa. Header
 * only, like test_util.h. */
#ifndef LOCUS_TEST_CPU_CONV_PROBLEM_H
#define LOCUS_TEST_CPU_CONV_PROBLEM_H

#include <string.h>
#include <unistd.h>

#include "conv2d.h"
#include "conv_reference.h"
#include "isa.h"

static inline locus__conv_problem test_conv_problem(const conv_case *cc,
                                                    const char *isa,
                                                    int workers,
                                                    locus__cpu_state *state)
{
    memset(state, 0, sizeof *state);
    long page = sysconf(_SC_PAGESIZE);
    state->page_size = page > 0 ? (size_t)page : 4096;
    if (isa)
        locus__cpu_isa_init(&state->isa, isa);
    locus__conv_problem pr = {
        .state = state,
        .node = -1,
        .workers = workers,
        .shape =
            {
                .channels = cc->c,
                .height = cc->h,
                .width = cc->w,
                .kernel_h = cc->r,
                .kernel_w = cc->s,
                .stride_h = cc->sh,
                .stride_w = cc->sw,
                .pad_h = cc->ph,
                .pad_w = cc->pw,
                .out_h = (cc->h + 2 * cc->ph - cc->r) / cc->sh + 1,
                .out_w = (cc->w + 2 * cc->pw - cc->s) / cc->sw + 1,
            },
        .batch = cc->n,
        .out_channels = cc->k,
    };
    return pr;
}

#endif
