/* A kernel table (backends/cpu/isa.h) for the tests that call its
 * kernels directly, without a context (locus_internal_dep). Header only,
 * like test_util.h. */
#ifndef LOCUS_TEST_CPU_TABLE_H
#define LOCUS_TEST_CPU_TABLE_H

#include <stdio.h>
#include <string.h>

#include "cpu_contexts.h"
#include "isa.h"
#include "test_util.h"

/* Fills *isa with the table named `name` (one of test_cpu_isas). Returns
 * 0 where this CPU does not run it (printing "skipping NAME: not
 * supported by this CPU", no failure) or where the table came back as
 * another level (a failure). */
static inline int test_cpu_table(const char *name, locus__cpu_isa *isa)
{
    int runs = strcmp(name, "avx2") == 0     ? test_cpu_has_avx2_fma()
               : strcmp(name, "avx512") == 0 ? test_cpu_has_avx512f()
                                             : 1;
    if (!runs) {
        printf("skipping %s: not supported by this CPU\n", name);
        return 0;
    }
    locus__cpu_isa_init(isa, name);
    return TEST_EXPECT(strcmp(isa->name, name) == 0, "table %s came back as %s",
                       name, isa->name);
}

#endif
