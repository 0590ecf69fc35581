/* The C side of test_layout: sizeof and offsetof of the structs that
 * bindings/fortran/locus_c.f90 mirrors, by "struct.field" name ("struct"
 * alone: its size). SIZE_MAX for a name not in the table, so a field the
 * Fortran test asks about and this table lacks fails too. */
#include <locus/locus.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SIZE(s)                                                                \
    {                                                                          \
#s, sizeof(locus_##s)                                                  \
    }
#define FIELD(s, f)                                                            \
    {                                                                          \
#s "." #f, offsetof(locus_##s, f)                                      \
    }

static const struct {
    const char *name;
    size_t value;
} layout[] = {
    SIZE(context_options),
    FIELD(context_options, device),
    FIELD(context_options, cpu_isa),
    FIELD(context_options, ignore_environment),
    FIELD(context_options, calibration),
    SIZE(device_info),
    FIELD(device_info, selector),
    FIELD(device_info, name),
    FIELD(device_info, kind),
    FIELD(device_info, nearest_numa_mask),
    FIELD(device_info, compute_units),
    FIELD(device_info, pci_bus_id),
    SIZE(estimate),
    FIELD(estimate, seconds),
    SIZE(record),
    FIELD(record, op),
    FIELD(record, algorithm),
    FIELD(record, seconds),
    FIELD(record, bytes),
    FIELD(record, remote_bytes),
    FIELD(record, provenance),
    FIELD(record, chosen_by),
    FIELD(record, estimated_seconds),
    FIELD(record, estimate_count),
    FIELD(record, estimates),
    FIELD(record, dtype),
    FIELD(record, migrated_bytes),
    FIELD(record, migrate_node),
    FIELD(record, buffer_address),
    SIZE(reduce_desc),
    FIELD(reduce_desc, dtype),
    FIELD(reduce_desc, count),
    FIELD(reduce_desc, allow_atomic),
    SIZE(gemm_desc),
    FIELD(gemm_desc, trans_b),
    FIELD(gemm_desc, m),
    FIELD(gemm_desc, ldc),
    FIELD(gemm_desc, alpha),
    FIELD(gemm_desc, math),
    SIZE(conv2d_desc),
    FIELD(conv2d_desc, dtype),
    FIELD(conv2d_desc, batch),
    FIELD(conv2d_desc, pad_w),
    FIELD(conv2d_desc, algorithm),
    FIELD(conv2d_desc, math),
    FIELD(conv2d_desc, groups),
    FIELD(conv2d_desc, dilation_w),
    FIELD(conv2d_desc, activation),
    FIELD(conv2d_desc, output_layout),
};

size_t locus_test_c_layout(const char *name);

size_t locus_test_c_layout(const char *name)
{
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++)
        if (strcmp(layout[i].name, name) == 0)
            return layout[i].value;
    return SIZE_MAX;
}
