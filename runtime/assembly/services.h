/* The table of runtime services handed to every backend at init. */
#ifndef LOCUS_RUNTIME_SERVICES_H
#define LOCUS_RUNTIME_SERVICES_H

#include <locus/backend.h>

void locus__services_fill(locus_services *services);

#endif
