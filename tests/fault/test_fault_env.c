/* Run with LOCUS_FAULT=alloc:1: the first allocation of the runtime (the
 * context itself) fails, and the caller gets out-of-memory with a detail,
 * nothing else; the next creation works. */
#include "expect_error.h"

int main(void)
{
    locus_context *context = NULL;
    TEST_ERROR(locus_context_create(NULL, &context), LOCUS_ERROR_OUT_OF_MEMORY,
               "context");
    TEST_EXPECT(context == NULL, "a failed create returned a context");
    if (TEST_OK(locus_context_create(NULL, &context)) == LOCUS_SUCCESS)
        locus_context_destroy(context);
    return test_exit_code();
}
