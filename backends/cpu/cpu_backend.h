/* The CPU backend, compiled into liblocus and registered through the same
 * ops table as the modules. */
#ifndef LOCUS_CPU_BACKEND_H
#define LOCUS_CPU_BACKEND_H

#include <locus/backend.h>

const locus_backend *locus__cpu_backend(void);

#endif
