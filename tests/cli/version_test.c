/* The version a client sees three ways must be one: the header's
 * LOCUS_VERSION_* (what it compiles against), locus_version() and
 * locus_version_string() (the library it runs on, built from this tree),
 * and meson's project version, which docs/CHANGELOG.md must name as a
 * heading. meson passes the project version and the changelog's path.
 *
 * usage: cli_version_test; exit 0 pass, 1 fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#include "expect.h"

#ifndef LOCUS_PROJECT_VERSION
#error "meson defines LOCUS_PROJECT_VERSION"
#endif
#ifndef LOCUS_CHANGELOG_PATH
#error "meson defines LOCUS_CHANGELOG_PATH"
#endif

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define HEADER_VERSION                                                         \
    STRINGIFY(LOCUS_VERSION_MAJOR)                                             \
    "." STRINGIFY(LOCUS_VERSION_MINOR) "." STRINGIFY(LOCUS_VERSION_PATCH)

static void check_header_and_library(void)
{
    expect(strcmp(HEADER_VERSION, LOCUS_PROJECT_VERSION) == 0,
           "locus.h says %s, meson.build %s", HEADER_VERSION,
           LOCUS_PROJECT_VERSION);
    expect(LOCUS_VERSION == LOCUS_VERSION_MAJOR * 10000 +
                                LOCUS_VERSION_MINOR * 100 + LOCUS_VERSION_PATCH,
           "LOCUS_VERSION %d does not encode %s", LOCUS_VERSION,
           HEADER_VERSION);
    expect(locus_version() == LOCUS_VERSION,
           "locus_version() is %d, the header's LOCUS_VERSION %d",
           locus_version(), LOCUS_VERSION);
    const char *text = locus_version_string();
    expect(text != NULL && strcmp(text, LOCUS_PROJECT_VERSION) == 0,
           "locus_version_string() is \"%s\", meson.build's version %s",
           text != NULL ? text : "(null)", LOCUS_PROJECT_VERSION);
    expect(LOCUS_VERSION_AT_LEAST(LOCUS_VERSION_MAJOR, LOCUS_VERSION_MINOR,
                                  LOCUS_VERSION_PATCH) &&
               LOCUS_VERSION_AT_LEAST(0, 1, 0) &&
               !LOCUS_VERSION_AT_LEAST(LOCUS_VERSION_MAJOR, LOCUS_VERSION_MINOR,
                                       LOCUS_VERSION_PATCH + 1) &&
               !LOCUS_VERSION_AT_LEAST(LOCUS_VERSION_MAJOR + 1, 0, 0),
           "LOCUS_VERSION_AT_LEAST does not compare with %s", HEADER_VERSION);
}

/* A heading "## <version>" (optionally followed by a date or text) for
 * the project's version: what this version changed is written down. */
static void check_changelog(void)
{
    FILE *file = fopen(LOCUS_CHANGELOG_PATH, "r");
    if (!expect(file != NULL, "cannot open %s", LOCUS_CHANGELOG_PATH)) {
        return;
    }
    static const char prefix[] = "## " LOCUS_PROJECT_VERSION;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, prefix, sizeof prefix - 1) == 0 &&
            strchr(" \n", line[sizeof prefix - 1]) != NULL) {
            found = 1;
        }
    }
    fclose(file);
    expect(found, "%s has no heading \"%s\"", LOCUS_CHANGELOG_PATH, prefix);
}

int main(void)
{
    check_header_and_library();
    check_changelog();
    printf("version %s: %d failure(s)\n", HEADER_VERSION, failures);
    return failures == 0 ? 0 : 1;
}
