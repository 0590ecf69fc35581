/* Status codes: every code has its own message and name, unknown values are
 * named as such, and the error detail is per thread and cleared by the next
 * successful call. */
#include <pthread.h>
#include <string.h>

#include "expect_error.h"

static const locus_status all_statuses[] = {
#define AS_ENTRY(name, value, message) name,
    LOCUS_STATUS_LIST(AS_ENTRY)
#undef AS_ENTRY
};
#define STATUS_COUNT (sizeof all_statuses / sizeof all_statuses[0])

static void test_messages_are_distinct(void)
{
    for (size_t i = 0; i < STATUS_COUNT; i++) {
        const char *message = locus_status_str(all_statuses[i]);
        const char *name = locus_status_name(all_statuses[i]);
        TEST_EXPECT(message && message[0], "status %d has no message",
                    (int)all_statuses[i]);
        TEST_EXPECT(strncmp(name, "LOCUS_", 6) == 0, "status %d named '%s'",
                    (int)all_statuses[i], name);
        TEST_EXPECT(i == 0 ? all_statuses[i] == 0 : all_statuses[i] < 0,
                    "%s is %d: errors are negative", name,
                    (int)all_statuses[i]);
        for (size_t j = 0; j < i; j++) {
            TEST_EXPECT(strcmp(message, locus_status_str(all_statuses[j])),
                        "%s and %s share the message '%s'", name,
                        locus_status_name(all_statuses[j]), message);
            TEST_EXPECT(all_statuses[i] != all_statuses[j],
                        "%s repeats a value", name);
        }
    }
    TEST_EXPECT(
        strcmp(locus_status_str((locus_status)12345), "unknown status") == 0,
        "an unknown status is '%s'", locus_status_str((locus_status)12345));
    TEST_EXPECT(strcmp(locus_status_name((locus_status)-999),
                       "LOCUS_STATUS_UNKNOWN") == 0,
                "an unknown status is named '%s'",
                locus_status_name((locus_status)-999));
}

static void *fail_on_other_thread(void *unused)
{
    (void)unused;
    locus_buffer_destroy(NULL);
    TEST_ERROR(locus_context_create(NULL, NULL), LOCUS_ERROR_NULL_ARGUMENT,
               "out is NULL");
    return NULL;
}

static void test_detail_is_per_thread(void)
{
    size_t bytes = 0;
    TEST_ERROR(locus_buffer_size(NULL, &bytes), LOCUS_ERROR_NULL_ARGUMENT,
               "buffer is NULL");
    char before[256];
    snprintf(before, sizeof before, "%s", locus_last_error());
    pthread_t thread;
    TEST_EXPECT(pthread_create(&thread, NULL, fail_on_other_thread, NULL) == 0,
                "pthread_create");
    pthread_join(thread, NULL);
    TEST_EXPECT(strcmp(before, locus_last_error()) == 0,
                "another thread's failure changed this thread's detail to "
                "'%s'",
                locus_last_error());
    TEST_EXPECT(strstr(before, locus_status_str(LOCUS_ERROR_NULL_ARGUMENT)),
                "detail '%s' does not start with the status message", before);
}

static void test_success_clears_detail(void)
{
    TEST_ERROR(locus_context_create(NULL, NULL), LOCUS_ERROR_NULL_ARGUMENT,
               NULL);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS)
        return;
    TEST_EXPECT(locus_last_error()[0] == '\0',
                "detail '%s' survived a successful call", locus_last_error());
    locus_context_destroy(context);
}

static void test_version(void)
{
    TEST_EXPECT(locus_version() == LOCUS_VERSION,
                "library version %d, header %d", locus_version(),
                LOCUS_VERSION);
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", LOCUS_VERSION_MAJOR,
             LOCUS_VERSION_MINOR, LOCUS_VERSION_PATCH);
    TEST_EXPECT(strcmp(locus_version_string(), expected) == 0,
                "version string '%s', expected '%s'", locus_version_string(),
                expected);
}

int main(void)
{
    test_messages_are_distinct();
    test_detail_is_per_thread();
    test_success_clears_detail();
    test_version();
    return test_exit_code();
}
