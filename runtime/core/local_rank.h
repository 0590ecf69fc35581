/* Local ranks: which of the processes an MPI launcher started on this machine
 * we are, read from the launcher's own variables, and the share of the
 * machine's cores the worker pool of such a rank takes (docs/MPI.md). */
#ifndef LOCUS_RUNTIME_LOCAL_RANK_H
#define LOCUS_RUNTIME_LOCAL_RANK_H

#include <stdbool.h>

#include <hwloc.h>

#include <locus/locus.h>

#include "topology.h"

/* What the launcher's variables say. */
typedef struct locus__launcher_rank {
    int rank; /* -1: not started by a launcher Locus knows */
    int size; /* 0 when rank is -1 */
    /* The variables read ("" when none): the rank's and the size's. */
    char rank_variable[32];
    char size_variable[32];
    /* A launcher variable that is set but does not parse or contradicts its
     * partner ("" when none). The process then reads as not started by a
     * launcher: these are the launcher's variables, not the user's, and a
     * garbled one must not stop an application that Locus merely serves;
     * the context logs it as a warning. */
    char problem[192];
} locus__launcher_rank;

/* Reads Open MPI's OMPI_COMM_WORLD_LOCAL_RANK/_SIZE, MVAPICH's
 * MV2_COMM_WORLD_LOCAL_RANK/_SIZE, Hydra's (MPICH, Intel MPI)
 * MPI_LOCALRANKID/MPI_LOCALNRANKS, then Slurm's SLURM_LOCALID with the size
 * from SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID; the first launcher whose
 * rank variable is set decides. Empty values read as unset. Never fails. */
void locus__launcher_rank_read(locus__launcher_rank *out);

/* The local rank and the number of local ranks, when this process was
 * started by a launcher and its variables parse; false otherwise (rank and
 * size are then 0 and 1). Logs nothing: the context logs a garbled
 * variable once, at creation. */
bool locus__local_rank(int *rank, int *size);

/* The cores local rank `rank` of `size` works on: ranks spread over the
 * NUMA nodes that have allowed cpus, rank r on node r % nodes with a
 * node's cores split evenly among its ranks (ranks share a core only when a
 * node has fewer cores than ranks); with fewer ranks than nodes, each rank
 * takes whole nodes, consecutive ones. `share` gets every allowed hardware
 * thread of the chosen cores. Fails only when memory runs out. */
locus_status locus__local_rank_share(const locus__topology *topology, int rank,
                                     int size, hwloc_bitmap_t share);

/* What the context did with its local rank, for locus_local_rank_get. */
typedef struct locus__local_rank_map {
    locus__launcher_rank launcher;
    bool narrowed; /* the pool was made on this rank's share */
    char reason[192];
} locus__local_rank_map;

typedef struct locus_context locus_context;

/* Creates the context's worker pool: on this local rank's share of the
 * cores when the process is one of several local ranks, the pool size is
 * not set (LOCUS_THREADS or the option) and the launcher did not bind the
 * process itself; on every allowed core otherwise. `ignore_environment`
 * skips the launcher's variables too. Fills context->local_rank and logs
 * the mapping at LOCUS_LOG=info. */
locus_status locus__local_rank_pool_create(locus_context *context,
                                           bool ignore_environment);

#endif
