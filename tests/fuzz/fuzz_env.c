/* libFuzzer target: the LOCUS_* grammar. The input is split at newlines
 * into the eleven option strings of locus_context_options (device,
 * backends, threads, numa, strict, log, record, topology, plugin_path,
 * cpu_isa, calibration), read
 * with the environment ignored, exactly as locus_context_create reads them;
 * the whole input is also parsed as one device selector list. Checked:
 *  - nothing crashes or leaks (ASan, LSan, UBSan);
 *  - a failure is LOCUS_ERROR_BAD_ENVIRONMENT (or out of memory) with a
 *    detail that names the variable;
 *  - a selector list that parses writes back (canonical spelling) to text
 *    that parses to the same selectors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#define FIELDS 11
/* Values longer than this say nothing new to a parser of short tokens. */
#define MAX_INPUT 4096

static void require(int condition, const char *what)
{
    if (!condition) {
        fprintf(stderr, "fuzz_env: %s (%s)\n", what, locus_last_error());
        abort();
    }
}

static void check_round_trip(const locus__selector_list *list)
{
    char text[LOCUS__MAX_SELECTORS * 32 + 1] = "";
    size_t used = 0;
    for (size_t i = 0; i < list->count; i++) {
        char item[32];
        locus__format_selector(&list->items[i], item, sizeof item);
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s",
                                 i ? "," : "", item);
    }
    locus__selector_list again;
    require(locus__parse_selector_list(text, &again) == LOCUS_SUCCESS,
            "a formatted selector list does not parse");
    require(again.count == list->count, "round trip changed the count");
    for (size_t i = 0; i < list->count; i++)
        require(memcmp(&again.items[i], &list->items[i],
                       sizeof list->items[i]) == 0,
                "round trip changed a selector");
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    locus__selector_list list;
    if (locus__parse_selector_list(text, &list) == LOCUS_SUCCESS)
        check_round_trip(&list);
    else
        require(locus_last_error()[0] != '\0', "selector failure, no detail");

    /* Newlines separate the fields (a value cannot hold one). */
    const char *fields[FIELDS] = {0};
    char *cursor = text;
    for (int i = 0; i < FIELDS && cursor; i++) {
        fields[i] = cursor;
        cursor = strchr(cursor, '\n');
        if (cursor)
            *cursor++ = '\0';
    }
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.device = fields[0];
    options.backends = fields[1];
    options.threads = fields[2];
    options.numa = fields[3];
    options.strict = fields[4];
    options.log = fields[5];
    options.record = fields[6];
    options.topology = fields[7];
    options.plugin_path = fields[8];
    options.cpu_isa = fields[9];
    options.calibration = fields[10];

    locus__config config;
    locus_status status = locus__config_load(&config, &options);
    if (status == LOCUS_SUCCESS) {
        check_round_trip(&config.device);
        require(config.device.count >= 1, "no device selector");
        require(config.threads >= 0, "negative thread count");
        for (int id = 0; id < LOCUS__SETTING_COUNT; id++)
            require(memchr(config.settings[id].resolved, '\0',
                           sizeof config.settings[id].resolved) != NULL,
                    "unterminated resolved text");
        locus__config_release(&config);
    } else {
        require(status == LOCUS_ERROR_BAD_ENVIRONMENT ||
                    status == LOCUS_ERROR_OUT_OF_MEMORY,
                "unexpected status");
        require(strstr(locus_last_error(), "LOCUS_") != NULL,
                "failure detail does not name the variable");
    }
    free(text);
    return 0;
}
