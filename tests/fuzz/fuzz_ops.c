/* libFuzzer target: op descriptors against small buffers. One context (the
 * CPU backend and the fake device module) and four buffers of 4 bytes to
 * 16 KiB live across runs; each input picks an op, every field of its
 * descriptor, the buffers (aliasing included), the device and the record.
 * A shape that is valid but huge must be refused because it does not fit
 * the buffers, so nothing here can run long or allocate much. Checked:
 *  - no crash, out-of-bounds access, leak or undefined behaviour;
 *  - a failure has a detail; a success fits the buffers it was given;
 *  - buffers an op only reads keep their bytes, failed or not, and a
 *    failed op leaves even its output as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <locus/locus.h>

#define BUFFERS 4
static const size_t buffer_bytes[BUFFERS] = {4, 60, 1024, 16384};

static locus_context *context;
static locus_device *devices[3]; /* NULL (the scheduler), cpu, fake */
static locus_buffer *buffers[BUFFERS];
static unsigned char *shadow[BUFFERS]; /* what each buffer must hold */

static void require(int condition, const char *what)
{
    if (!condition) {
        fprintf(stderr, "fuzz_ops: %s (%s)\n", what, locus_last_error());
        abort();
    }
}

/* Reads the input as a stream; past its end every value is 0. */
typedef struct stream {
    const unsigned char *data;
    size_t size;
} stream;

static unsigned byte(stream *s)
{
    if (s->size == 0)
        return 0;
    s->size--;
    return *s->data++;
}

/* Mostly small sizes (which reach the kernels), sometimes any 64 bits
 * (which reach the overflow checks). */
static size_t dimension(stream *s)
{
    unsigned first = byte(s);
    if (first < 0xf0)
        return first % 70;
    uint64_t value = 0;
    for (int i = 0; i < 8; i++)
        value = value << 8 | byte(s);
    return (size_t)value;
}

static double scalar(stream *s)
{
    unsigned first = byte(s);
    if (first < 0xf0)
        return (double)((int)first - 120) / 8;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits = bits << 8 | byte(s);
    double value;
    memcpy(&value, &bits, sizeof value); /* NaN and infinities included */
    return value;
}

/* The struct_size field: nearly always right, sometimes stale. */
static size_t struct_size(stream *s, size_t right)
{
    unsigned b = byte(s);
    return b < 0xf8 ? right : b & 0x7;
}

/* 0-4 mostly (every value of the widest enum, locus_conv_algorithm up to
 * LOCUS_CONV_WINOGRAD, and past the end of the others), sometimes
 * negative. */
static int enum_value(stream *s)
{
    unsigned b = byte(s);
    return b < 0xe0 ? (int)(b % 5) : (int)(signed char)b;
}

static void setup(void)
{
    setenv("HWLOC_HIDE_ERRORS", "1", 1);
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.backends = "cpu,cuda"; /* the fake module calls itself cuda */
    options.plugin_path = LOCUS_FUZZ_MODULE_DIR;
    options.log = "error";
    require(locus_context_create(&options, &context) == LOCUS_SUCCESS,
            "context");
    require(locus_device_find(context, "cpu", &devices[1]) == LOCUS_SUCCESS,
            "cpu device");
    require(locus_device_find(context, "cuda", &devices[2]) == LOCUS_SUCCESS,
            "fake device (build the unit suite's modules)");
    for (int i = 0; i < BUFFERS; i++) {
        require(locus_buffer_create(context, buffer_bytes[i], NULL,
                                    &buffers[i]) == LOCUS_SUCCESS,
                "buffer");
        shadow[i] = malloc(buffer_bytes[i]);
        require(shadow[i] != NULL, "shadow");
        for (size_t b = 0; b < buffer_bytes[i]; b++)
            shadow[i][b] = (unsigned char)(b * 7 + (size_t)i);
        require(locus_buffer_write(buffers[i], 0, shadow[i], buffer_bytes[i]) ==
                    LOCUS_SUCCESS,
                "write");
    }
}

/* Every buffer but the output of a successful op holds its shadow; the
 * output's new bytes become its shadow. */
static void check_buffers(int written)
{
    static unsigned char now[16384];
    for (int i = 0; i < BUFFERS; i++) {
        require(locus_buffer_read(buffers[i], 0, now, buffer_bytes[i]) ==
                    LOCUS_SUCCESS,
                "read back");
        if (i == written)
            memcpy(shadow[i], now, buffer_bytes[i]);
        else
            require(memcmp(now, shadow[i], buffer_bytes[i]) == 0,
                    "an op changed a buffer it did not write");
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (!context)
        setup();
    stream s = {data, size};
    unsigned op = byte(&s) % 3;
    locus_device *device = devices[byte(&s) % 3];
    locus_buffer *operand[3];
    int index[3];
    for (int i = 0; i < 3; i++) {
        index[i] = (int)(byte(&s) % BUFFERS);
        operand[i] = buffers[index[i]];
    }
    locus_record record;
    locus_record_init(&record);
    unsigned record_choice = byte(&s) % 3;
    if (record_choice == 2)
        record.struct_size = 0;
    locus_record *out_record = record_choice ? &record : NULL;

    locus_status status;
    int written = -1;
    if (op == 0) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.struct_size = struct_size(&s, sizeof desc);
        desc.dtype = (locus_dtype)enum_value(&s);
        desc.op = (locus_reduce_op)enum_value(&s);
        desc.count = dimension(&s);
        double result = 0;
        status = locus_reduce(context, device, &desc, operand[0], &result,
                              out_record);
        if (status == LOCUS_SUCCESS)
            require(desc.count * 4 <= buffer_bytes[index[0]], "reduce fit");
    } else if (op == 1) {
        locus_gemm_desc desc;
        locus_gemm_desc_init(&desc);
        desc.struct_size = struct_size(&s, sizeof desc);
        desc.dtype = (locus_dtype)enum_value(&s);
        desc.trans_a = (locus_transpose)enum_value(&s);
        desc.trans_b = (locus_transpose)enum_value(&s);
        desc.m = dimension(&s), desc.n = dimension(&s), desc.k = dimension(&s);
        desc.lda = dimension(&s), desc.ldb = dimension(&s);
        desc.ldc = dimension(&s);
        desc.alpha = scalar(&s), desc.beta = scalar(&s);
        desc.math = (locus_math_mode)enum_value(&s);
        status = locus_gemm(context, device, &desc, operand[0], operand[1],
                            operand[2], out_record);
        if (status == LOCUS_SUCCESS) {
            written = index[2];
            require(desc.m * desc.n * 4 <= buffer_bytes[index[2]], "c fit");
        }
    } else {
        locus_conv2d_desc desc;
        locus_conv2d_desc_init(&desc);
        desc.struct_size = struct_size(&s, sizeof desc);
        desc.dtype = (locus_dtype)enum_value(&s);
        desc.batch = dimension(&s), desc.in_channels = dimension(&s);
        desc.in_height = dimension(&s), desc.in_width = dimension(&s);
        desc.out_channels = dimension(&s);
        desc.kernel_height = dimension(&s), desc.kernel_width = dimension(&s);
        desc.stride_h = dimension(&s), desc.stride_w = dimension(&s);
        desc.pad_h = dimension(&s), desc.pad_w = dimension(&s);
        desc.algorithm = (locus_conv_algorithm)enum_value(&s);
        desc.math = (locus_math_mode)enum_value(&s);
        status = locus_conv2d(context, device, &desc, operand[0], operand[1],
                              operand[2], out_record);
        if (status == LOCUS_SUCCESS)
            written = index[2];
    }
    if (status != LOCUS_SUCCESS)
        require(locus_last_error()[0] != '\0', "failure without a detail");
    check_buffers(written);
    return 0;
}
