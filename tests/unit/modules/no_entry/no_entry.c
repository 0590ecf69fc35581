/* A shared object that is not a Locus module: it exports no entry point. */
#include <locus/backend.h>

LOCUS_BACKEND_EXPORT int not_a_locus_module(void)
{
    return 1;
}
