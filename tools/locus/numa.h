/* `locus numa`: what the NUMA machine looks like and how it behaves. The
 * facts are gathered first into a numa_view (numa.c), measured
 * (numa_measure.c) and read from the kernel (numa_system.c), judged
 * (numa_findings.c), then written as tables and JSON (numa_report.c) or
 * SVG (numa_svg.c), so that every form shows the same facts. */
#ifndef LOCUS_TOOL_NUMA_H
#define LOCUS_TOOL_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <locus/locus.h>

#define NUMA_MAX_FINDINGS 32

/* HMAT attributes of a memory node as its nearest initiators see it
 * (/sys/devices/system/node/nodeN/access0/initiators). */
typedef struct numa_hmat {
    bool present;
    long read_bandwidth_mbps; /* -1: not given */
    long write_bandwidth_mbps;
    long read_latency_ns;
    long write_latency_ns;
    uint64_t initiators; /* OS nodes of the nearest initiators */
} numa_hmat;

/* /sys/devices/system/node/nodeN/numastat, counted in pages since boot. */
#define NUMASTAT_FIELDS 6
extern const char *const numastat_names[NUMASTAT_FIELDS];

typedef struct numa_node_view {
    locus_numa_node_info info;
    numa_hmat hmat;
    bool has_numastat;
    uint64_t numastat[NUMASTAT_FIELDS];
} numa_node_view;

/* Where a process's pages and threads are (--pid). */
typedef struct numa_process {
    int pid;
    bool ok;
    char error[256];
    char command[64];
    uint64_t bytes_by_node[LOCUS_MAX_NUMA_NODES]; /* every mapping */
    uint64_t anon_bytes_by_node[LOCUS_MAX_NUMA_NODES];
    uint64_t file_bytes_by_node[LOCUS_MAX_NUMA_NODES];
    int thread_count;
    int threads_by_node[LOCUS_MAX_NUMA_NODES]; /* by the cpu each last ran on */
    /* Its Locus buffers, from the "migrate" lines of its LOCUS_RECORD
     * file (the last line of each buffer), placed by a move_pages query of
     * the process now, or as the line says when it cannot be asked. */
    char record_path[256]; /* empty: the process sets no LOCUS_RECORD */
    size_t buffer_count;
    struct numa_buffer_view {
        uint64_t id, address, bytes;
        bool queried; /* bytes_by_node from move_pages, else recorded */
        uint64_t bytes_by_node[LOCUS_MAX_NUMA_NODES];
    } buffers[16];
} numa_process;

typedef struct numa_device_view {
    locus_device_info info;
    int staging_node; /* where Locus places its staging memory; -1: none */
} numa_device_view;

typedef struct numa_finding {
    char kind[32]; /* stable name for scripts */
    char message[512];
    /* The command line or setting that fixes it (a numactl, taskset or
     * mpirun binding, a LOCUS_* value, a sysctl); empty when there is
     * nothing to run (a firmware table). */
    char fix[256];
} numa_finding;

typedef struct numa_options {
    bool json;
    const char *svg_path;
    int pid;              /* 0: none */
    size_t bytes;         /* per bandwidth pair; 0: chosen by calibration */
    size_t latency_bytes; /* 0: chosen from bytes */
    int repeat;           /* runs per pair; 0: NUMA_DEFAULT_REPEAT */
    bool measure;
} numa_options;

/* Each pair is measured this many times after a warm-up, so that the
 * report can give the spread of the runs, not one sample's luck. */
#define NUMA_DEFAULT_REPEAT 5
#define NUMA_MAX_REPEAT 100

typedef struct numa_view {
    const char *topology_source;
    bool this_system;
    /* Why figures of this machine cannot be shown ("topology is
     * synthetic"), empty when they can. */
    char not_measured[128];

    size_t node_count;
    numa_node_view *nodes;
    unsigned *distances; /* node_count^2, by node order */

    /* Measured matrices, by node order: threads on the row's node, memory
     * on the column's. NULL when not measured. Each pair ran `repeats`
     * times: bandwidth_gbps and latency_ns hold the median of the runs,
     * the _min and _max matrices the least and the greatest (for bandwidth
     * the slowest run gives the least). NaN where a pair failed. */
    int repeats;
    double *bandwidth_gbps;
    double *bandwidth_min_gbps;
    double *bandwidth_max_gbps;
    double *latency_ns;
    double *latency_min_ns;
    double *latency_max_ns;
    size_t bandwidth_bytes;
    size_t latency_bytes;
    int threads_per_node[LOCUS_MAX_NUMA_NODES];
    char measure_error[256];

    int balancing; /* /proc/sys/kernel/numa_balancing; -1 unknown */
    bool has_vmstat;
    uint64_t migrated_before, migrated_after; /* numa_pages_migrated */
    double window_seconds;

    char cpus_allowed[256]; /* this process, from /proc/self/status */
    char cpus_online[256];
    char mems_allowed[256];
    char nodes_online[256];
    int cpus_allowed_count, cpus_online_count;

    char default_placement[64]; /* LOCUS_NUMA as resolved */
    size_t device_count;
    numa_device_view *devices;

    bool counters_available;
    char counters_reason[160];

    numa_process *process; /* NULL without --pid */

    size_t finding_count;
    numa_finding findings[NUMA_MAX_FINDINGS];
} numa_view;

/* numa_measure.c: fills the bandwidth and latency matrices. */
bool numa_measure(locus_context *context, const numa_options *options,
                  numa_view *view);

/* numa_system.c: the kernel's view of this machine. */
void numa_read_hmat(int node, numa_hmat *hmat);
bool numa_read_numastat(int node, uint64_t *values);
int numa_read_balancing(void);
bool numa_read_migrated(uint64_t *pages);
void numa_read_cpusets(numa_view *view);
void numa_read_process(int pid, numa_process *process);
bool numa_counters_available(char *why, size_t capacity);

/* numa_findings.c: the problems in plain words. */
void numa_find(numa_view *view);
void numa_add_finding(numa_view *view, const char *kind, const char *fix,
                      const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* numa_report.c */
void numa_write_text(const numa_view *view);
void numa_write_json(const numa_view *view, FILE *out);
/* numa_svg.c: false after saying why on stderr. */
bool numa_write_svg(const numa_view *view, const char *path);

#endif
