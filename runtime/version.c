#include <locus/locus.h>

#define LOCUS_STRINGIFY_(x) #x
#define LOCUS_VERSION_TEXT_(a, b, c)                                           \
    LOCUS_STRINGIFY_(a) "." LOCUS_STRINGIFY_(b) "." LOCUS_STRINGIFY_(c)

int locus_version(void)
{
    return LOCUS_VERSION;
}

const char *locus_version_string(void)
{
    return LOCUS_VERSION_TEXT_(LOCUS_VERSION_MAJOR, LOCUS_VERSION_MINOR,
                               LOCUS_VERSION_PATCH);
}
