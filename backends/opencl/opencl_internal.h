/* What the OpenCL module's files share: the devices found at init and the
 * probe that finds them. */
#ifndef LOCUS_OPENCL_INTERNAL_H
#define LOCUS_OPENCL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <CL/cl.h>

#include <locus/backend.h>

/* Work-group and tile sizes of one device type, passed to the compiler as
 * -D options (opencl_program.c chooses them; docs/PERFORMANCE.md has the
 * measurements). */
typedef struct opencl_tuning {
    const char *name;            /* "gpu", "cpu" */
    unsigned tm, tn, tk, wm, wn; /* gemm: tile, depth, work-group WN x WM */
    unsigned rwg;                /* reduce: work-group size */
    unsigned groups_per_unit;    /* reduce: work-groups per compute unit */
    int cpu_kernels;             /* the LOCUS_CPU_KERNELS variants */
    /* Register cap per work-item passed as -cl-nv-maxrregcount where the
     * device has cl_nv_compiler_options; 0: none. */
    unsigned max_registers;
} opencl_tuning;

typedef struct opencl_device {
    cl_platform_id platform;
    cl_device_id id;
    char name[128];
    char vendor[64];
    char version[64];
    locus_device_kind kind;
    int compute_units;
    uint64_t memory_bytes;
    uint64_t max_alloc_bytes;
    uint64_t numa_mask;
    /* Domain, bus, device, function; has_pci_address when all four are
     * known (not a guessed domain): the device info's pci_bus_id, by which
     * the runtime knows two views of one GPU (NVIDIA's OpenCL and CUDA). */
    int has_pci_address;
    unsigned pci_address[4];

    /* Guards the lookup of context and queue at first use. Both belong to
     * the process, not to this state (opencl_queues.c). */
    pthread_mutex_t lock;
    cl_context context;
    /* In order, so that a later kernel sees the data of an earlier upload
     * without events. */
    cl_command_queue queue;

    /* The kernels' program, built or loaded from the disk cache at the first
     * op on the device (opencl_program.c), released at fini. Kernel objects
     * hold their arguments, so an op holds `lock` from setting them to the
     * end of its work. gemm_short, conv_implicit and conv_implicit_short
     * exist in the GPU variant only (NULL in the CPU one); the Winograd
     * transforms (winograd.cl) in both. */
    cl_program program;
    cl_kernel gemm, gemm_scale_c, reduce, im2col, mec_lower, filter_krcs;
    cl_kernel gemm_short, conv_implicit, conv_implicit_short;
    cl_kernel winograd_filter, winograd_input, winograd_output;
    opencl_tuning tuning;
    /* conv2d's workspaces kept between calls (opencl_conv.c,
     * locus__opencl_conv_workspace): slot 0 the lowered images or Winograd's
     * input tiles V, 1 the permuted or transformed filter, 2 Winograd's
     * products M; released with the program. */
    cl_mem workspace[3];
    size_t workspace_bytes[3];
    /* The reduce's per-group partials, kept between calls (making and
     * releasing a buffer per op cost NVIDIA's OpenCL tens of
     * microseconds); grow-only, released with the program. */
    cl_mem reduce_partials;
    size_t reduce_partials_count;
    /* Pinned host memory the partials are read into (a host-allocated
     * buffer, mapped once): the read is then one DMA, not a copy through
     * the driver's staging. NULL: not made yet, or not available. */
    cl_mem reduce_staging;
    float *reduce_staging_ptr;
    size_t reduce_staging_count;

    /* f64 (kernels/f64.cl): whether the device has cl_khr_fp64 (probe
     * time), and the f64 program, built at the first f64 op
     * (locus__opencl_f64_ready), with its kernels, its variant (the CPU
     * kernels or the GPU ones) and the reduce's partials, two doubles a
     * group; released with the f32 program. */
    int has_fp64;
    cl_program program_f64;
    cl_kernel gemm_f64, gemm_scale_c_f64, reduce_f64, im2col_f64;
    int f64_cpu_kernels;
    unsigned f64_rwg, f64_groups_per_unit;
    cl_mem reduce_partials_f64;
    size_t reduce_partials_f64_groups;

    /* conv2d_layer's kernels (kernels/conv_layer.cl), [0] from the f32
     * program, [1] from the f64 one, made at their first use
     * (opencl_conv_layer.c) and released with their program
     * (locus__opencl_conv_layer_release). */
    cl_kernel conv_layer[2][4];
} opencl_device;

typedef struct opencl_state {
    const locus_services *services;
    void *runtime;
    size_t count;
    opencl_device *devices;
} opencl_state;

/* Unmaps and releases the reduce's pinned staging (opencl_ops.c), if any;
 * with the program, under the device's lock. */
void locus__opencl_release_staging(opencl_device *device);

/* Adds the usable devices of one platform to state. Problems that cost
 * devices go to the log and into note, which becomes the reason when no
 * platform has a usable device. */
void locus__opencl_add_platform(opencl_state *state, cl_platform_id platform,
                                size_t *capacity, char *note, size_t note_size);

/* Whether bytes of address space can still be reserved under RLIMIT_AS
 * (always, without a limit); *left gets what the limit leaves when there
 * is one (opencl_headroom.c). */
int locus__opencl_address_room(uint64_t bytes, uint64_t *left);

/* The address space PoCL's CPU device takes to start its threads, and how
 * many it starts. */
uint64_t locus__opencl_pocl_startup_bytes(unsigned *threads);

/* The device's context and queue, made at the state's first use of it
 * (opencl_backend.c); *device is set on success. */
locus_status locus__opencl_device_ready(opencl_state *state, size_t index,
                                        opencl_device **device);

/* The status of an OpenCL error: out of device or host memory, else
 * LOCUS_ERROR_BACKEND. */
locus_status locus__opencl_status_of(cl_int code);

/* Builds or loads the program and its kernels unless done already. Called
 * with device->lock held. */
locus_status locus__opencl_program_ready(opencl_state *state, size_t index,
                                         opencl_device *device);
/* Releases what program_ready and f64_ready made (fini). */
void locus__opencl_program_release(opencl_device *device);

/* The f64 program and its kernels unless built already; NOT_SUPPORTED
 * ("opencl:N has no cl_khr_fp64") on a device without the extension.
 * Called with device->lock held. */
locus_status locus__opencl_f64_ready(opencl_state *state, size_t index,
                                     opencl_device *device);

/* The f64 ops (opencl_ops_f64.c), which the table's entries hand an f64
 * descriptor to. */
locus_status locus__opencl_reduce_f64(opencl_state *state, size_t index,
                                      const locus_reduce_desc *desc,
                                      const void *x, double *result,
                                      locus_op_context *op);
locus_status locus__opencl_gemm_f64(opencl_state *state, size_t index,
                                    const locus_gemm_desc *desc, const void *a,
                                    const void *b, void *c,
                                    locus_op_context *op);

/* The ops (opencl_ops.c, opencl_conv.c), as the backend table takes them. */
locus_status locus__opencl_reduce(void *state, size_t device,
                                  const locus_reduce_desc *desc, const void *x,
                                  double *result, locus_op_context *op);
locus_status locus__opencl_gemm(void *state, size_t device,
                                const locus_gemm_desc *desc, const void *a,
                                const void *b, void *c, locus_op_context *op);
locus_status locus__opencl_conv2d(void *state, size_t device,
                                  const locus_conv2d_desc *desc,
                                  const void *input, const void *filter,
                                  void *output, locus_op_context *op);
/* conv2d with the features of 0.3 (opencl_conv_layer.c), and the release
 * of its kernels of the f32 (f64 0) or the f64 program. */
void locus__opencl_conv_layer_release(opencl_device *device, int f64);
/* conv2d with the features of 0.3 (opencl_conv_layer.c). */
locus_status locus__opencl_conv2d_layer(void *state, size_t device,
                                        const locus_conv2d_desc *desc,
                                        const void *input, const void *filter,
                                        const void *bias, void *output,
                                        locus_op_context *op);

#endif
