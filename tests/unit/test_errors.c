/* Every bad input of every entry point: a clear status and a detail that
 * names the problem, never a crash. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "expect_error.h"

static locus_context *context;
static locus_context *other_context;
static locus_device *cpu;
static locus_device *other_cpu;

static locus_buffer *make_buffer(size_t bytes)
{
    locus_buffer *buffer = NULL;
    TEST_OK(locus_buffer_create(context, bytes, NULL, &buffer));
    return buffer;
}

static void test_context_and_queries(void)
{
    size_t count;
    locus_setting setting;
    locus_device *device;
    locus_device_info info;
    locus_numa_node_info node;
    locus_backend_info backend;
    unsigned distance;
    TEST_ERROR(locus_context_create(NULL, NULL), LOCUS_ERROR_NULL_ARGUMENT,
               "out");
    TEST_ERROR(locus_setting_count(NULL, &count), LOCUS_ERROR_NULL_ARGUMENT,
               "context");
    TEST_ERROR(locus_setting_get(context, 99, &setting),
               LOCUS_ERROR_INVALID_ARGUMENT, "99");
    TEST_ERROR(locus_device_count(context, NULL), LOCUS_ERROR_NULL_ARGUMENT,
               "count");
    TEST_ERROR(locus_device_get(context, 1000, &device),
               LOCUS_ERROR_DEVICE_NOT_FOUND, "1000");
    TEST_ERROR(locus_device_find(context, "cuda:9", &device),
               LOCUS_ERROR_DEVICE_NOT_FOUND, "'cuda:9'");
    TEST_ERROR(locus_device_find(context, "quantum", &device),
               LOCUS_ERROR_INVALID_ARGUMENT, "'quantum'");
    TEST_ERROR(locus_device_find(context, NULL, &device),
               LOCUS_ERROR_NULL_ARGUMENT, "selector");
    TEST_ERROR(locus_device_get_info(NULL, &info), LOCUS_ERROR_NULL_ARGUMENT,
               "device");
    memset(&info, 0, sizeof info);
    TEST_ERROR(locus_device_get_info(cpu, &info), LOCUS_ERROR_INVALID_ARGUMENT,
               "struct_size");
    memset(&node, 0, sizeof node);
    TEST_ERROR(locus_numa_node_get(context, 0, &node),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");
    locus_numa_node_info_init(&node);
    TEST_ERROR(locus_numa_node_get(context, 64, &node),
               LOCUS_ERROR_INVALID_ARGUMENT, "64");
    TEST_ERROR(locus_numa_distance(context, 0, 64, &distance),
               LOCUS_ERROR_INVALID_ARGUMENT, "64");
    locus_backend_info_init(&backend);
    TEST_ERROR(locus_backend_get(context, 3, &backend),
               LOCUS_ERROR_INVALID_ARGUMENT, "3");
    TEST_EXPECT(!locus_topology_is_this_system(NULL),
                "NULL context reports a real topology");
}

static void test_buffers(void)
{
    locus_buffer *buffer = (locus_buffer *)&buffer;
    float data[4] = {1, 2, 3, 4};
    TEST_ERROR(locus_buffer_create(context, 0, NULL, &buffer),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    TEST_EXPECT(buffer == NULL, "a failed create left *out set");
    TEST_ERROR(locus_buffer_create(NULL, 16, NULL, &buffer),
               LOCUS_ERROR_NULL_ARGUMENT, "context");
    TEST_ERROR(locus_buffer_create(context, SIZE_MAX, NULL, &buffer),
               LOCUS_ERROR_SIZE_OVERFLOW, NULL);
    TEST_ERROR(locus_buffer_create(context, (size_t)1 << 62, NULL, &buffer),
               LOCUS_ERROR_OUT_OF_MEMORY, "mmap");
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = (locus_placement_policy)42;
    TEST_ERROR(locus_buffer_create(context, 16, &placement, &buffer),
               LOCUS_ERROR_INVALID_ARGUMENT, "policy 42");
    placement.policy = LOCUS_PLACE_NODE;
    placement.node = 63;
    TEST_ERROR(locus_buffer_create(context, 16, &placement, &buffer),
               LOCUS_ERROR_PLACEMENT, "node 63");
    locus_placement stale = {0};
    TEST_ERROR(locus_buffer_create(context, 16, &stale, &buffer),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");

    TEST_ERROR(locus_buffer_wrap(context, NULL, 16, &buffer),
               LOCUS_ERROR_NULL_ARGUMENT, "memory");
    TEST_ERROR(locus_buffer_wrap(context, data, 0, &buffer),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    TEST_ERROR(locus_buffer_wrap(context, data, SIZE_MAX, &buffer),
               LOCUS_ERROR_SIZE_OVERFLOW, NULL);

    buffer = make_buffer(sizeof data);
    if (!buffer)
        return;
    float out[8];
    TEST_ERROR(locus_buffer_write(buffer, 0, data, 0),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    TEST_ERROR(locus_buffer_read(buffer, 0, out, 0),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    TEST_ERROR(locus_buffer_write(buffer, 4, data, 16),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "offset 4");
    TEST_ERROR(locus_buffer_write(buffer, SIZE_MAX, data, 4),
               LOCUS_ERROR_BUFFER_TOO_SMALL, NULL);
    TEST_ERROR(locus_buffer_read(buffer, 0, out, 32),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "32 bytes");
    TEST_ERROR(locus_buffer_read(buffer, 0, NULL, 4), LOCUS_ERROR_NULL_ARGUMENT,
               "destination");
    TEST_ERROR(locus_buffer_write(NULL, 0, data, 4), LOCUS_ERROR_NULL_ARGUMENT,
               "buffer");
    void *host;
    TEST_ERROR(locus_buffer_map(buffer, (locus_map_mode)0, &host),
               LOCUS_ERROR_INVALID_ARGUMENT, "map mode 0");
    TEST_ERROR(locus_buffer_unmap(buffer), LOCUS_ERROR_INVALID_ARGUMENT,
               "not mapped");
    TEST_OK(locus_buffer_map(buffer, LOCUS_MAP_READ, &host));
    TEST_ERROR(locus_buffer_map(buffer, LOCUS_MAP_READ, &host),
               LOCUS_ERROR_BUSY, "already mapped");
    TEST_ERROR(locus_buffer_write(buffer, 0, data, 4), LOCUS_ERROR_BUSY,
               "mapped");
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    desc.count = 4;
    double result;
    TEST_ERROR(locus_reduce(context, cpu, &desc, buffer, &result, NULL),
               LOCUS_ERROR_BUSY, "unmap");
    TEST_OK(locus_buffer_unmap(buffer));
    TEST_OK(locus_reduce(context, cpu, &desc, buffer, &result, NULL));

    locus_page_report report;
    memset(&report, 0, sizeof report);
    TEST_ERROR(locus_buffer_query_pages(buffer, &report),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");
    locus_page_report_init(&report);
    TEST_ERROR(locus_query_pages(data, 0, 0, &report),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 bytes");
    TEST_ERROR(locus_query_pages(NULL, 16, 0, &report),
               LOCUS_ERROR_NULL_ARGUMENT, "memory");
    locus_buffer_destroy(buffer);
    locus_buffer_destroy(NULL);
}

static void test_reduce(void)
{
    locus_buffer *x = make_buffer(40);
    if (!x)
        return;
    float ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    TEST_OK(locus_buffer_write(x, 0, ones, sizeof ones));
    locus_reduce_desc desc;
    locus_reduce_desc_init(&desc);
    double result = 0;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "0 elements");
    desc.count = 11;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "11 elements");
    desc.count = SIZE_MAX / 2;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, "overflows");
    desc.count = 10;
    desc.op = (locus_reduce_op)7;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "op 7");
    desc.op = LOCUS_REDUCE_SUM;
    /* Sizes count elements of the dtype: 10 doubles do not fit the 10
     * floats' buffer. */
    desc.dtype = LOCUS_DTYPE_F64;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "needs 80 bytes");
    desc.dtype = LOCUS_DTYPE_BF16;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_NOT_SUPPORTED, "reduce takes f32 or f64, not bf16");
    desc.dtype = (locus_dtype)99;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "dtype 99");
    desc.dtype = LOCUS_DTYPE_F32;
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, NULL, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "result");
    TEST_ERROR(locus_reduce(context, cpu, NULL, x, &result, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "desc");
    TEST_ERROR(locus_reduce(context, other_cpu, &desc, x, &result, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "another context");
    locus_reduce_desc stale = {0};
    TEST_ERROR(locus_reduce(context, cpu, &stale, x, &result, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "locus_reduce_desc_init");
    locus_record record = {0};
    TEST_ERROR(locus_reduce(context, cpu, &desc, x, &result, &record),
               LOCUS_ERROR_INVALID_ARGUMENT, "locus_record_init");
    result = NAN;
    TEST_OK(locus_reduce(context, NULL, &desc, x, &result, NULL));
    TEST_EXPECT(result == 10.0, "sum of ten ones is %g", result);
    /* A caller built before allow_atomic was appended passes the smaller
     * struct: accepted, with the default for the field it lacks. */
    locus_reduce_desc older = desc;
    older.struct_size = offsetof(locus_reduce_desc, count) + sizeof(size_t);
    result = NAN;
    TEST_OK(locus_reduce(context, cpu, &older, x, &result, NULL));
    TEST_EXPECT(result == 10.0, "older caller's sum is %g", result);
    older.struct_size -= 1;
    TEST_ERROR(locus_reduce(context, cpu, &older, x, &result, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");
    locus_buffer_destroy(x);
}

/* Each matrix is sized in its own dtype: f64 everywhere; bf16 and f16 for
 * A and B with an f32 C. The tensor-core math modes are f32's. a, b and c
 * hold 3x4, 4x5 and 3x5 floats. */
static void test_gemm_dtypes(locus_buffer *a, locus_buffer *b, locus_buffer *c,
                             const locus_gemm_desc *desc)
{
    locus_gemm_desc d = *desc;
    d.dtype = LOCUS_DTYPE_F64;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "a needs 96 bytes");
    d.m = 1; /* a: 1x4 doubles fit; b: 4x5 doubles do not */
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "b needs 160 bytes");
    d = *desc;
    d.dtype = LOCUS_DTYPE_BF16;
    d.n = 10; /* b: 4x10 bf16 fit b's 80 bytes; c: 3x10 f32 do not fit 60 */
    d.ldb = 10;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "c needs 120 bytes");
    d = *desc;
    d.dtype = LOCUS_DTYPE_F64;
    d.math = LOCUS_MATH_TF32;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_NOT_SUPPORTED, "tf32 is for f32 operands, not f64");
    d.dtype = LOCUS_DTYPE_F16;
    d.math = LOCUS_MATH_3XTF32;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_NOT_SUPPORTED,
               "3xtf32 is for f32 operands, not f16");
    d = *desc;
    d.dtype = LOCUS_DTYPE_F64;
    d.m = 1;
    d.k = 2;
    d.n = 2;
    locus_device *devices[] = {cpu};
    double weights[] = {1.0};
    TEST_ERROR(
        locus_gemm_split(context, devices, 1, weights, &d, a, b, c, NULL),
        LOCUS_ERROR_NOT_SUPPORTED, "split takes f32 only");
    d.dtype = (locus_dtype)0;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "dtype 0 is unknown");
    TEST_EXPECT(locus_dtype_size(LOCUS_DTYPE_F32) == 4 &&
                    locus_dtype_size(LOCUS_DTYPE_F64) == 8 &&
                    locus_dtype_size(LOCUS_DTYPE_BF16) == 2 &&
                    locus_dtype_size(LOCUS_DTYPE_F16) == 2 &&
                    locus_dtype_size((locus_dtype)0) == 0,
                "locus_dtype_size");
    TEST_EXPECT(strcmp(locus_dtype_str(LOCUS_DTYPE_BF16), "bf16") == 0 &&
                    strcmp(locus_dtype_str((locus_dtype)9), "unknown") == 0,
                "locus_dtype_str");
}

static void test_gemm(void)
{
    /* a: 3x4, b: 4x5, c: 3x5 */
    locus_buffer *a = make_buffer(3 * 4 * 4);
    locus_buffer *b = make_buffer(4 * 5 * 4);
    locus_buffer *c = make_buffer(3 * 5 * 4);
    if (!a || !b || !c)
        goto release;
    locus_gemm_desc desc;
    locus_gemm_desc_init(&desc);
    desc.m = 3;
    desc.n = 5;
    desc.k = 4;
    locus_gemm_desc d = desc;
    /* BLAS: m = 0 is a quick return, but k = 0 still needs all of C. */
    d.m = 0;
    TEST_OK(locus_gemm(context, cpu, &d, a, b, c, NULL));
    d = desc;
    d.k = 0;
    d.n = 6;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "c needs 72 bytes");
    d = desc;
    d.m = d.n = d.k = (size_t)1 << 30;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, "m * n * k");
    d = desc;
    d.m = (size_t)1 << 62; /* a spans 2^64 bytes */
    d.n = d.k = 1;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, NULL);
    d = desc;
    d.k = 5;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "a needs");
    d = desc;
    d.ldb = 6;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "b needs");
    d = desc;
    d.ldc = 4;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "ldc = 4");
    d = desc;
    d.trans_a = LOCUS_TRANS; /* a stored 4x3: lda 3 < 4 tight? no, ld 4 */
    d.lda = 2;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "lda = 2");
    d = desc;
    d.trans_b = (locus_transpose)5;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "transpose");
    d = desc;
    d.math = (locus_math_mode)9;
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "math mode 9");
    TEST_ERROR(locus_gemm(context, cpu, &desc, a, b, NULL, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "c is NULL");
    d = desc;
    d.n = 4;
    d.k = 3; /* c (3x4) fits a's 12 floats, so only aliasing is wrong */
    TEST_ERROR(locus_gemm(context, cpu, &d, a, b, a, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "alias");
    TEST_ERROR(locus_gemm(context, other_cpu, &desc, a, b, c, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "another context");
    test_gemm_dtypes(a, b, c, &desc);
release:
    locus_buffer_destroy(a);
    locus_buffer_destroy(b);
    locus_buffer_destroy(c);
}

static void test_conv2d(void)
{
    locus_conv2d_desc desc;
    locus_conv2d_desc_init(&desc);
    desc.batch = 1;
    desc.in_channels = 2;
    desc.in_height = 5;
    desc.in_width = 6;
    desc.out_channels = 3;
    desc.kernel_height = 3;
    desc.kernel_width = 3;
    size_t oh, ow;
    TEST_OK(locus_conv2d_output_shape(&desc, &oh, &ow));
    TEST_EXPECT(oh == 3 && ow == 4, "output %zu x %zu, expected 3 x 4", oh, ow);
    locus_buffer *input = make_buffer(2 * 5 * 6 * 4);
    locus_buffer *filter = make_buffer(3 * 2 * 3 * 3 * 4);
    locus_buffer *output = make_buffer(3 * 3 * 4 * 4);
    if (!input || !filter || !output)
        goto release;
    locus_conv2d_desc d = desc;
    d.stride_w = 0;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "stride");
    d = desc;
    d.kernel_height = 8;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "does not fit");
    d.pad_h = 2; /* now 9 rows: fits, but the filter buffer is too small */
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "filter needs");
    d = desc;
    d.batch = 0;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "batch 0");
    d = desc;
    d.batch = 2;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_BUFFER_TOO_SMALL, "input needs");
    d = desc;
    d.batch = SIZE_MAX / 3;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, "overflows");
    d = desc;
    d.pad_w = SIZE_MAX / 2;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_SIZE_OVERFLOW, NULL);
    d = desc;
    d.algorithm = (locus_conv_algorithm)8;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "algorithm 8");
    d = desc;
    d.math = (locus_math_mode)9;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, "conv2d math mode 9 is unknown");
    d.math = LOCUS_MATH_TF32; /* for f32 operands only, on every device */
    d.dtype = LOCUS_DTYPE_F64;
    TEST_ERROR(locus_conv2d(context, cpu, &d, input, filter, output, NULL),
               LOCUS_ERROR_NOT_SUPPORTED,
               "conv2d math mode tf32 is for f32 operands, not f64");
    TEST_ERROR(locus_conv2d(context, cpu, &desc, input, filter, input, NULL),
               LOCUS_ERROR_INVALID_ARGUMENT, NULL);
    TEST_ERROR(locus_conv2d(context, cpu, &desc, NULL, filter, output, NULL),
               LOCUS_ERROR_NULL_ARGUMENT, "input");
    TEST_ERROR(locus_conv2d_output_shape(&desc, NULL, &ow),
               LOCUS_ERROR_NULL_ARGUMENT, "out_height");
release:
    locus_buffer_destroy(input);
    locus_buffer_destroy(filter);
    locus_buffer_destroy(output);
}

int main(void)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu";
    if (TEST_OK(locus_context_create(&options, &context)) != LOCUS_SUCCESS ||
        TEST_OK(locus_context_create(&options, &other_context)) !=
            LOCUS_SUCCESS ||
        TEST_OK(locus_device_find(context, "cpu", &cpu)) != LOCUS_SUCCESS ||
        TEST_OK(locus_device_find(other_context, "cpu", &other_cpu)) !=
            LOCUS_SUCCESS)
        return 1;
    test_context_and_queries();
    test_buffers();
    test_reduce();
    test_gemm();
    test_conv2d();
    locus_context_destroy(other_context);
    locus_context_destroy(context);
    locus_context_destroy(NULL);
    return test_exit_code();
}
