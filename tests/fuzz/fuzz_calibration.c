/* libFuzzer target: the calibration cache reader. Whatever bytes a cache
 * file holds, locus__calibration_parse must not crash, over-read or leak,
 * and must accept only what locus__calibration_format could have written
 * for the key: checked by writing what it accepted back and comparing
 * byte for byte, and by requiring every accepted figure to be finite and
 * not negative. A refused input leaves the output untouched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration_file.h"

/* The key of the seeds (tests/fuzz/seeds/calibration-*.txt). */
static const char key[] = "locus=0.1.0 host=fuzz device=cpu name=fuzz";

static void require(int condition, const char *what)
{
    if (!condition) {
        fprintf(stderr, "fuzz_calibration: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    /* An exact-size copy, so ASan sees any read past the end. */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    locus__rates rates, untouched;
    memset(&rates, 0x5a, sizeof rates);
    untouched = rates;
    locus_status status = locus__calibration_parse(text, size, key, &rates);
    if (status != LOCUS_SUCCESS) {
        require(status == LOCUS_ERROR_INVALID_ARGUMENT,
                "a refusal that is not INVALID_ARGUMENT");
        require(memcmp(&rates, &untouched, sizeof rates) == 0,
                "a refused file changed the output");
        free(text);
        return 0;
    }
    const double *figures = (const double *)&rates;
    for (size_t i = 0; i < sizeof rates / sizeof(double); i++)
        require(isfinite(figures[i]) && figures[i] >= 0,
                "an accepted figure is not finite and >= 0");
    char again[8192];
    size_t length = locus__calibration_format(&rates, key, again, sizeof again);
    require(length < sizeof again, "an accepted file does not format");
    /* %.17g writes back the same text only for numbers it wrote itself;
     * another spelling of a number ("1e3" for "1000") is accepted, and then
     * the values, not the bytes, must survive the round trip. */
    locus__rates back;
    require(locus__calibration_parse(again, length, key, &back) ==
                LOCUS_SUCCESS,
            "what was accepted, written back, is refused");
    require(memcmp(&back, &rates, sizeof back) == 0,
            "the round trip changed a figure");
    free(text);
    return 0;
}
