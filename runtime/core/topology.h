/* The machine as hwloc sees it: NUMA nodes, allowed cores, distances, and
 * the locality of PCI devices. */
#ifndef LOCUS_RUNTIME_TOPOLOGY_H
#define LOCUS_RUNTIME_TOPOLOGY_H

#include <stdbool.h>
#include <stdint.h>

#include <hwloc.h>

#include <locus/locus.h>

typedef struct locus__numa_node {
    int os_index;
    uint64_t memory_bytes;
    hwloc_bitmap_t allowed_cpus; /* the node's cpus we may run on */
    char cpu_list[256];
} locus__numa_node;

typedef struct locus__topology {
    hwloc_topology_t hwloc;
    bool is_this_system; /* binding is real */
    char source[512];
    hwloc_bitmap_t allowed_cpus; /* cgroup cpuset and process binding */
    int node_count;
    locus__numa_node *nodes; /* in hwloc logical order */
    unsigned *distances;     /* node_count^2, row-major; NULL: none */
} locus__topology;

/* Loads this machine's topology, or the XML file or synthetic description
 * given (then binding is not real). */
locus_status locus__topology_load(locus__topology *topology,
                                  const char *description, bool synthetic);
void locus__topology_release(locus__topology *topology);

/* Position of the node with this OS number, or -1. */
int locus__topology_node_position(const locus__topology *topology,
                                  int os_index);
/* Mask of OS node numbers whose cpus intersect `cpus`. */
uint64_t locus__topology_nodes_of_cpus(const locus__topology *topology,
                                       hwloc_const_bitmap_t cpus);
uint64_t locus__topology_pci_nodes(const locus__topology *topology,
                                   unsigned domain, unsigned bus,
                                   unsigned device, unsigned function);
/* Size of the first data or unified cache of a level (1-3), 0 if none;
 * `sharing` gets the number of cores under it. */
size_t locus__topology_cache(const locus__topology *topology, int level,
                             int *sharing);
/* Position of the node holding OS cpu `cpu`, or -1. */
int locus__topology_node_of_cpu(const locus__topology *topology, int cpu);

#endif
