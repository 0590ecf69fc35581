/* The reduce every fake module runs: a plain loop over the floats in
 * double, for modules whose results the tests compare. Header only, as
 * each module is one file. */
#ifndef LOCUS_TEST_FAKE_REDUCE_H
#define LOCUS_TEST_FAKE_REDUCE_H

#include <locus/backend.h>

static inline double fake_reduce(const locus_reduce_desc *desc, const void *x)
{
    const float *values = x;
    double acc = values[0];
    for (size_t i = 1; i < desc->count; i++) {
        double v = values[i];
        if (desc->op == LOCUS_REDUCE_SUM)
            acc += v;
        else if (desc->op == LOCUS_REDUCE_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    return acc;
}

#endif
