/* The names of public enums that the records, the scheduler's messages
 * and the tools print: on the ground floor, so that every part may name
 * them. */
#include <locus/backend.h>

/* The backends' names (backend.h), plus auto's and unknown values'. */
const char *locus_conv_algorithm_str(locus_conv_algorithm algorithm)
{
    if (algorithm == LOCUS_CONV_AUTO)
        return "auto";
    if ((int)algorithm < (int)LOCUS_CONV_IM2COL ||
        (int)algorithm > (int)LOCUS_CONV_WINOGRAD)
        return "unknown";
    return locus_conv_algorithm_ran(algorithm);
}

const char *locus_device_kind_str(locus_device_kind kind)
{
    switch (kind) {
    case LOCUS_DEVICE_CPU:
        return "cpu";
    case LOCUS_DEVICE_GPU:
        return "gpu";
    case LOCUS_DEVICE_ACCELERATOR:
        return "accelerator";
    }
    return "unknown";
}

size_t locus_dtype_size(locus_dtype dtype)
{
    switch (dtype) {
    case LOCUS_DTYPE_F32:
        return 4;
    case LOCUS_DTYPE_F64:
        return 8;
    case LOCUS_DTYPE_BF16:
    case LOCUS_DTYPE_F16:
        return 2;
    }
    return 0;
}

const char *locus_dtype_str(locus_dtype dtype)
{
    switch (dtype) {
    case LOCUS_DTYPE_F32:
        return "f32";
    case LOCUS_DTYPE_F64:
        return "f64";
    case LOCUS_DTYPE_BF16:
        return "bf16";
    case LOCUS_DTYPE_F16:
        return "f16";
    }
    return "unknown";
}
