/* Large host copies on the workers of the caller's node (host_copy.h). */
#include "host_copy.h"

#include <sched.h>
#include <string.h>

#include "pool.h"
#include "topology.h"

typedef struct copy_job {
    unsigned char *to;
    const unsigned char *from;
    size_t bytes;
} copy_job;

/* Shares are whole cache lines but the last. */
static void copy_share(void *arg, int rank, int ranks)
{
    const copy_job *job = arg;
    size_t begin, end;
    locus__pool_split(job->bytes, 64, rank, ranks, &begin, &end);
    if (end > begin)
        memcpy(job->to + begin, job->from + begin, end - begin);
}

static int caller_node(const locus_context *context)
{
    if (!context->topology.is_this_system)
        return -1;
    int cpu = sched_getcpu();
    int position =
        cpu < 0 ? -1 : locus__topology_node_of_cpu(&context->topology, cpu);
    return position < 0 ? -1 : context->topology.nodes[position].os_index;
}

void locus__host_copy(locus_context *context, void *to, const void *from,
                      size_t bytes)
{
    if (bytes >= LOCUS__PARALLEL_COPY_MIN_BYTES && context->pool) {
        int node = caller_node(context);
        if (locus__pool_count_on(context->pool, node) > 1) {
            copy_job job = {to, from, bytes};
            if (locus__pool_try_run(context->pool, node, copy_share, &job))
                return;
        }
    }
    memcpy(to, from, bytes);
}
