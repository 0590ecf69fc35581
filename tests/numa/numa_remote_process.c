/* A Locus process whose memory is deliberately remote, for `locus numa
 * --pid` in the VM: pinned to cpu 0 (node 0), it places 32 MiB on node 0,
 * migrates it to the last node, creates the file argv[1] to say it is
 * ready, and waits (at most a minute) to be looked at and killed. Its
 * LOCUS_RECORD (from the environment) holds the "migrate" line. */
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <locus/locus.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s READY-FILE\n", argv[0]);
        return 2;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    locus_context *context = NULL;
    size_t nodes = 0;
    locus_numa_node_info last;
    locus_numa_node_info_init(&last);
    locus_buffer *buffer = NULL;
    locus_placement placement;
    locus_placement_init(&placement);
    placement.policy = LOCUS_PLACE_NODE;
    placement.node = 0;
    if (locus_context_create(NULL, &context) != LOCUS_SUCCESS ||
        locus_numa_node_count(context, &nodes) != LOCUS_SUCCESS ||
        locus_numa_node_get(context, nodes - 1, &last) != LOCUS_SUCCESS ||
        locus_buffer_create(context, (size_t)32 << 20, &placement, &buffer) !=
            LOCUS_SUCCESS ||
        locus_buffer_migrate(buffer, last.os_index) != LOCUS_SUCCESS) {
        fprintf(stderr, "remote process: %s\n", locus_last_error());
        return 1;
    }
    FILE *ready = fopen(argv[1], "w");
    if (!ready) {
        perror(argv[1]);
        return 1;
    }
    fclose(ready);
    sleep(60);
    locus_buffer_destroy(buffer);
    locus_context_destroy(context);
    return 0;
}
