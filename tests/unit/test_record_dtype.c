/* The record names the op's dtype (appended in 0.3), in the struct and in
 * its JSON, and a caller's record of 0.2's size gets 0.2's fields only:
 * nothing is written past its struct_size. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "expect_error.h"

static locus_context *context;
static locus_device *cpu;

static void test_reduce_record_names_f32(void)
{
    float values[5] = {1, 2, 3, 4, 5};
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(context, sizeof values, NULL, &x)))
        return;
    TEST_OK(locus_buffer_write(x, 0, values, sizeof values));
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = 5;
    locus_record record;
    locus_record_init(&record);
    memset(record.dtype, 'x', sizeof record.dtype);
    double sum = 0;
    TEST_OK(locus_reduce(context, cpu, &desc, x, &sum, &record));
    TEST_EXPECT(strcmp(record.dtype, "f32") == 0, "record dtype '%.8s'",
                record.dtype);
    char json[2048];
    locus_record_to_json(&record, json, sizeof json);
    TEST_EXPECT(strstr(json, "\"dtype\":\"f32\"}") != NULL,
                "no dtype at the end of %s", json);
    locus_buffer_destroy(x);
}

/* A quick return (m = 0) runs nowhere, but its record still says f64. */
static void test_quick_return_names_f64(void)
{
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.dtype = LOCUS_DTYPE_F64;
    desc.n = 3; /* m = k = 0: no matrix holds an element */
    locus_record record;
    locus_record_init(&record);
    TEST_OK(locus_gemm(context, NULL, &desc, NULL, NULL, NULL, &record));
    TEST_EXPECT(strcmp(record.dtype, "f64") == 0 &&
                    strcmp(record.algorithm, "quick return") == 0,
                "quick return record: dtype '%.8s', algorithm '%s'",
                record.dtype, record.algorithm);
}

/* A record of 0.2's layout (it ends before dtype): the op leaves the bytes
 * after it alone, and its JSON has 0.2's fields, chosen_by the last. */
static void test_record_of_version_02(void)
{
    float values[3] = {1, 2, 3};
    locus_buffer *x = NULL;
    if (TEST_OK(locus_buffer_create(context, sizeof values, NULL, &x)))
        return;
    TEST_OK(locus_buffer_write(x, 0, values, sizeof values));
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = 3;
    locus_record record;
    memset(&record, 0x5a, sizeof record);
    record.struct_size = offsetof(locus_record, dtype);
    double sum = 0;
    TEST_OK(locus_reduce(context, cpu, &desc, x, &sum, &record));
    const unsigned char *tail = (const unsigned char *)record.dtype;
    int untouched = 1;
    for (size_t i = 0; i < sizeof record.dtype; i++)
        untouched &= tail[i] == 0x5a;
    TEST_EXPECT(untouched, "the op wrote past a 0.2 record's struct_size");
    char json[2048];
    record.dtype[0] = '\0';
    locus_record_to_json(&record, json, sizeof json);
    TEST_EXPECT(strstr(json, "\"chosen_by\":\"caller\"") != NULL &&
                    strstr(json, "dtype") == NULL,
                "0.2 record's JSON: %s", json);
    locus_buffer_destroy(x);
}

int main(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS ||
        TEST_OK(locus_device_find(context, "cpu", &cpu)) != LOCUS_SUCCESS)
        return 1;
    test_reduce_record_names_f32();
    test_quick_return_names_f64();
    test_record_of_version_02();
    locus_context_destroy(context);
    return test_exit_code();
}
