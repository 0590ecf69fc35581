/* MPI local ranks: the launchers' variables (good, garbled, missing, and
 * which launcher wins), the share of cores each local rank's pool takes on
 * synthetic topologies, and what a context does with it: narrowed pools,
 * and every reason for leaving the pool alone (docs/MPI.md). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "context_types.h"
#include "expect_error.h"
#include "local_rank.h"
#include "pool.h"

static const char *const launcher_variables[] = {
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE",
    "LOCUS_THREADS",
};

static void clear_launchers(void)
{
    for (size_t i = 0;
         i < sizeof launcher_variables / sizeof launcher_variables[0]; i++)
        unsetenv(launcher_variables[i]);
}

/* Sets name=value pairs from a NULL-terminated list, after clearing every
 * launcher variable. */
static void set_only(const char *const *pairs)
{
    clear_launchers();
    for (size_t i = 0; pairs[i]; i += 2)
        setenv(pairs[i], pairs[i + 1], 1);
}

static void expect_rank(const char *what, const char *const *pairs, int rank,
                        int size, const char *variable)
{
    set_only(pairs);
    locus__launcher_rank launcher;
    locus__launcher_rank_read(&launcher);
    TEST_EXPECT(launcher.rank == rank && launcher.size == size,
                "%s: rank %d of %d, expected %d of %d (%s)", what,
                launcher.rank, launcher.size, rank, size, launcher.problem);
    TEST_EXPECT(launcher.problem[0] == '\0', "%s: a problem reported: %s", what,
                launcher.problem);
    TEST_EXPECT(strcmp(launcher.rank_variable, variable) == 0,
                "%s: read from '%s', expected '%s'", what,
                launcher.rank_variable, variable);
    int r = -7, s = -7;
    TEST_EXPECT(locus__local_rank(&r, &s) && r == rank && s == size,
                "%s: locus__local_rank gives %d of %d", what, r, s);
}

/* Not under a launcher: no rank; `problem` NULL means none expected, else
 * a fragment the problem must contain (the variable and its value). */
static void expect_none(const char *what, const char *const *pairs,
                        const char *problem)
{
    set_only(pairs);
    locus__launcher_rank launcher;
    locus__launcher_rank_read(&launcher);
    TEST_EXPECT(launcher.rank == -1 && launcher.size == 0,
                "%s: rank %d of %d, expected none", what, launcher.rank,
                launcher.size);
    if (problem)
        TEST_EXPECT(strstr(launcher.problem, problem) != NULL,
                    "%s: problem '%s' does not mention '%s'", what,
                    launcher.problem, problem);
    else
        TEST_EXPECT(launcher.problem[0] == '\0', "%s: unexpected problem: %s",
                    what, launcher.problem);
    int r = -7, s = -7;
    TEST_EXPECT(!locus__local_rank(&r, &s) && r == 0 && s == 1,
                "%s: locus__local_rank gives %d of %d, expected 0 of 1", what,
                r, s);
}

static void test_launchers(void)
{
    expect_rank("open mpi",
                (const char *const[]){"OMPI_COMM_WORLD_LOCAL_RANK", "3",
                                      "OMPI_COMM_WORLD_LOCAL_SIZE", "4", NULL},
                3, 4, "OMPI_COMM_WORLD_LOCAL_RANK");
    expect_rank("mvapich",
                (const char *const[]){"MV2_COMM_WORLD_LOCAL_RANK", "0",
                                      "MV2_COMM_WORLD_LOCAL_SIZE", "2", NULL},
                0, 2, "MV2_COMM_WORLD_LOCAL_RANK");
    expect_rank("hydra",
                (const char *const[]){"MPI_LOCALRANKID", "5", "MPI_LOCALNRANKS",
                                      "8", NULL},
                5, 8, "MPI_LOCALRANKID");
    /* Slurm: two tasks on each of the first three nodes, one on the
     * fourth. */
    const char *slurm_node1[] = {
        "SLURM_LOCALID", "1", "SLURM_NODEID", "1", "SLURM_STEP_TASKS_PER_NODE",
        "2(x3),1",       NULL};
    expect_rank("slurm node 1", slurm_node1, 1, 2, "SLURM_LOCALID");
    const char *slurm_node3[] = {
        "SLURM_LOCALID", "0", "SLURM_NODEID", "3", "SLURM_STEP_TASKS_PER_NODE",
        "2(x3),1",       NULL};
    expect_rank("slurm last node", slurm_node3, 0, 1, "SLURM_LOCALID");
    const char *slurm_mixed[] = {
        "SLURM_LOCALID", "2", "SLURM_NODEID", "1", "SLURM_STEP_TASKS_PER_NODE",
        "1,3,2(x2)",     NULL};
    expect_rank("slurm mixed list", slurm_mixed, 2, 3, "SLURM_LOCALID");
    /* mpirun inside a Slurm allocation: Open MPI's variables win. */
    const char *both[] = {"SLURM_LOCALID",
                          "0",
                          "SLURM_NODEID",
                          "0",
                          "SLURM_STEP_TASKS_PER_NODE",
                          "1",
                          "OMPI_COMM_WORLD_LOCAL_RANK",
                          "1",
                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "2",
                          NULL};
    expect_rank("open mpi over slurm", both, 1, 2,
                "OMPI_COMM_WORLD_LOCAL_RANK");
    /* An empty variable reads as unset, so Hydra's speak. */
    const char *empty[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                           "",
                           "MPI_LOCALRANKID",
                           "1",
                           "MPI_LOCALNRANKS",
                           "2",
                           NULL};
    expect_rank("empty open mpi rank", empty, 1, 2, "MPI_LOCALRANKID");
}

static void test_not_a_launcher(void)
{
    expect_none("no variables", (const char *const[]){NULL}, NULL);
    /* A batch script sees SLURM_LOCALID but is no task of a step. */
    expect_none(
        "slurm batch script",
        (const char *const[]){"SLURM_LOCALID", "0", "SLURM_NODEID", "0", NULL},
        NULL);
    expect_none("sizes only",
                (const char *const[]){"OMPI_COMM_WORLD_LOCAL_SIZE", "2", NULL},
                NULL);
}

static void test_garbled(void)
{
    static const char *const bad_ranks[] = {"x",  "-1",         "1.5", " 1",
                                            "1 ", "+1",         "0x1", "1e3",
                                            "2a", "9999999999", NULL};
    for (size_t i = 0; bad_ranks[i]; i++) {
        const char *pairs[] = {"OMPI_COMM_WORLD_LOCAL_RANK", bad_ranks[i],
                               "OMPI_COMM_WORLD_LOCAL_SIZE", "4", NULL};
        char fragment[64];
        snprintf(fragment, sizeof fragment, "OMPI_COMM_WORLD_LOCAL_RANK='%s'",
                 bad_ranks[i]);
        expect_none(bad_ranks[i], pairs, fragment);
    }
    expect_none("size zero",
                (const char *const[]){"MPI_LOCALRANKID", "0", "MPI_LOCALNRANKS",
                                      "0", NULL},
                "MPI_LOCALNRANKS=0");
    expect_none("rank not below size",
                (const char *const[]){"OMPI_COMM_WORLD_LOCAL_RANK", "2",
                                      "OMPI_COMM_WORLD_LOCAL_SIZE", "2", NULL},
                "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below");
    expect_none("size garbled",
                (const char *const[]){"MV2_COMM_WORLD_LOCAL_RANK", "0",
                                      "MV2_COMM_WORLD_LOCAL_SIZE", "two", NULL},
                "MV2_COMM_WORLD_LOCAL_SIZE='two'");
    expect_none("size missing",
                (const char *const[]){"OMPI_COMM_WORLD_LOCAL_RANK", "0", NULL},
                "OMPI_COMM_WORLD_LOCAL_SIZE is not set");
    /* The first launcher that speaks decides, even when garbled. */
    expect_none("garbled open mpi over good slurm",
                (const char *const[]){"OMPI_COMM_WORLD_LOCAL_RANK", "?",
                                      "OMPI_COMM_WORLD_LOCAL_SIZE", "2",
                                      "SLURM_LOCALID", "0", "SLURM_NODEID", "0",
                                      "SLURM_STEP_TASKS_PER_NODE", "2", NULL},
                "OMPI_COMM_WORLD_LOCAL_RANK='?'");
    static const char *const bad_lists[] = {
        "2(x3", "2(x0)",  "(x2)", "2,",   "",
        "2;3",  "2(x3),", "a",    "2(3)", "2(x3)", /* node 3 is past the list */
        NULL};
    for (size_t i = 0; bad_lists[i]; i++) {
        const char *pairs[] = {"SLURM_LOCALID",
                               "0",
                               "SLURM_NODEID",
                               "3",
                               "SLURM_STEP_TASKS_PER_NODE",
                               bad_lists[i],
                               NULL};
        /* An empty list reads as unset: a batch script, no problem. */
        expect_none(bad_lists[i], pairs,
                    bad_lists[i][0] ? "SLURM_STEP_TASKS_PER_NODE" : NULL);
    }
    expect_none("slurm node id missing",
                (const char *const[]){"SLURM_LOCALID", "0",
                                      "SLURM_STEP_TASKS_PER_NODE", "2", NULL},
                "SLURM_NODEID is not set");
}

/* The share of rank `rank` of `size` on a synthetic topology, as a list. */
static void expect_share(const char *description, int rank, int size,
                         const char *expected)
{
    locus__topology topology;
    if (TEST_OK(locus__topology_load(&topology, description, true)) !=
        LOCUS_SUCCESS)
        return;
    hwloc_bitmap_t share = hwloc_bitmap_alloc();
    char list[256] = "";
    if (TEST_OK(locus__local_rank_share(&topology, rank, size, share)) ==
        LOCUS_SUCCESS)
        hwloc_bitmap_list_snprintf(list, sizeof list, share);
    TEST_EXPECT(strcmp(list, expected) == 0,
                "%s: rank %d of %d gets cpus '%s', expected '%s'", description,
                rank, size, list, expected);
    hwloc_bitmap_free(share);
    locus__topology_release(&topology);
}

static void test_shares(void)
{
    /* As many ranks as nodes: a node each. */
    expect_share("node:2 core:2 pu:1", 0, 2, "0-1");
    expect_share("node:2 core:2 pu:1", 1, 2, "2-3");
    /* More ranks: round-robin over nodes, a node's cores split. */
    expect_share("node:2 core:2 pu:1", 0, 4, "0");
    expect_share("node:2 core:2 pu:1", 1, 4, "2");
    expect_share("node:2 core:2 pu:1", 2, 4, "1");
    expect_share("node:2 core:2 pu:1", 3, 4, "3");
    /* Three ranks on two nodes: node 0 has ranks 0 and 2, node 1 rank 1. */
    expect_share("node:2 core:2 pu:1", 0, 3, "0");
    expect_share("node:2 core:2 pu:1", 1, 3, "2-3");
    expect_share("node:2 core:2 pu:1", 2, 3, "1");
    /* Uneven split of a node's cores: 5 cores, 2 ranks on the node. */
    expect_share("node:1 core:5 pu:1", 0, 2, "0-2");
    expect_share("node:1 core:5 pu:1", 1, 2, "3-4");
    /* Fewer ranks than nodes: whole consecutive nodes. */
    expect_share("node:4 core:2 pu:1", 0, 2, "0-3");
    expect_share("node:4 core:2 pu:1", 1, 2, "4-7");
    expect_share("node:4 core:2 pu:1", 0, 3, "0-3");
    expect_share("node:4 core:2 pu:1", 1, 3, "4-5");
    expect_share("node:4 core:2 pu:1", 2, 3, "6-7");
    /* Hardware threads go with their core. */
    expect_share("node:2 core:2 pu:2", 1, 2, "4-7");
    expect_share("node:2 core:2 pu:2", 1, 4, "4-5");
    /* More ranks than cores on a node: ranks pair up on a core. */
    expect_share("node:2 core:1 pu:1", 0, 4, "0");
    expect_share("node:2 core:1 pu:1", 2, 4, "0");
    expect_share("node:2 core:1 pu:1", 3, 4, "1");
    /* One rank: everything. */
    expect_share("node:2 core:2 pu:1", 0, 1, "0-3");
}

/* Over many shapes: every rank gets cores, all of them together cover the
 * machine, and while there are enough cores no two ranks share one. */
static void test_share_properties(void)
{
    static const char *const shapes[] = {
        "node:1 core:8 pu:1", "node:2 core:3 pu:2", "node:3 core:5 pu:1",
        "node:4 core:4 pu:2", "package:2 node:2 core:3 pu:1"};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        locus__topology topology;
        if (TEST_OK(locus__topology_load(&topology, shapes[t], true)) !=
            LOCUS_SUCCESS)
            continue;
        int cores = hwloc_get_nbobjs_by_type(topology.hwloc, HWLOC_OBJ_CORE);
        for (int size = 1; size <= 2 * cores + 1; size++) {
            hwloc_bitmap_t all = hwloc_bitmap_alloc();
            hwloc_bitmap_t share = hwloc_bitmap_alloc();
            int overlapping = 0, empty = 0;
            for (int rank = 0; rank < size; rank++) {
                if (TEST_OK(locus__local_rank_share(&topology, rank, size,
                                                    share)) != LOCUS_SUCCESS)
                    break;
                empty += hwloc_bitmap_iszero(share) != 0;
                overlapping += hwloc_bitmap_intersects(all, share) != 0;
                hwloc_bitmap_or(all, all, share);
            }
            TEST_EXPECT(empty == 0, "%s, %d ranks: %d ranks got no cpu",
                        shapes[t], size, empty);
            TEST_EXPECT(hwloc_bitmap_isequal(all, topology.allowed_cpus),
                        "%s, %d ranks: the shares do not cover the machine",
                        shapes[t], size);
            TEST_EXPECT(size > cores || overlapping == 0,
                        "%s, %d ranks on %d cores: %d shares overlap",
                        shapes[t], size, cores, overlapping);
            hwloc_bitmap_free(share);
            hwloc_bitmap_free(all);
        }
        locus__topology_release(&topology);
    }
}

static locus_context *make(const char *topology, const char *threads,
                           int ignore_environment)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.backends = "cpu";
    char synthetic[128];
    if (topology) {
        snprintf(synthetic, sizeof synthetic, "synthetic:%s", topology);
        options.topology = synthetic;
    }
    options.threads = threads;
    options.log = "error";
    options.ignore_environment = ignore_environment;
    locus_context *context = NULL;
    TEST_OK(locus_context_create(&options, &context));
    return context;
}

static void get_info(locus_context *context, locus_local_rank_info *info)
{
    locus_local_rank_info_init(info);
    TEST_OK(locus_local_rank_get(context, info));
}

static void set_ompi(const char *rank, const char *size)
{
    clear_launchers();
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", rank, 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", size, 1);
}

/* Rank 1 of 2 on two nodes of two cores: node 1's cores, and ops still
 * compute correctly on the narrowed pool. */
static void test_context_narrowed(void)
{
    set_ompi("1", "2");
    locus_context *context = make("node:2 core:2 pu:1", NULL, 0);
    if (!context)
        return;
    locus_local_rank_info info;
    get_info(context, &info);
    TEST_EXPECT(info.local_rank == 1 && info.local_size == 2 && info.narrowed &&
                    strcmp(info.cpus, "2-3") == 0 && info.numa_mask == 2 &&
                    info.workers == 2 &&
                    strcmp(info.variable, "OMPI_COMM_WORLD_LOCAL_RANK") == 0,
                "rank 1 of 2: rank %d of %d, narrowed %d, cpus '%s', nodes "
                "%llx, %d workers, from %s",
                info.local_rank, info.local_size, info.narrowed, info.cpus,
                (unsigned long long)info.numa_mask, info.workers,
                info.variable);
    int size = locus__pool_size(context->pool);
    for (int w = 0; w < size; w++) {
        const locus__worker_info *worker = locus__pool_worker(context->pool, w);
        TEST_EXPECT(worker->node_os_index == 1 && worker->cpu == 2 + w,
                    "worker %d on cpu %d, node %d", w, worker->cpu,
                    worker->node_os_index);
    }
    /* The topology still describes the whole machine. */
    locus_numa_node_info node;
    locus_numa_node_info_init(&node);
    TEST_OK(locus_numa_node_get(context, 0, &node));
    TEST_EXPECT(node.cpu_count == 2 && strcmp(node.cpus, "0-1") == 0,
                "node 0 reads %d cpus '%s' after narrowing", node.cpu_count,
                node.cpus);
    /* A sum on the rank's workers, and on the device of the node this rank
     * has no worker on, which must say so. */
    enum { COUNT = 1001 };
    float values[COUNT];
    double expected = 0.0;
    for (int i = 0; i < COUNT; i++) {
        values[i] = (float)(i % 17) * 0.25f + 1.0f;
        expected += values[i];
    }
    locus_buffer *x = NULL;
    locus_device *all = NULL, *node0 = NULL;
    if (TEST_OK(locus_buffer_create(context, sizeof values, NULL, &x)) ==
            LOCUS_SUCCESS &&
        TEST_OK(locus_buffer_write(x, 0, values, sizeof values)) ==
            LOCUS_SUCCESS &&
        TEST_OK(locus_device_find(context, "cpu", &all)) == LOCUS_SUCCESS &&
        TEST_OK(locus_device_find(context, "cpu:numa=0", &node0)) ==
            LOCUS_SUCCESS) {
        locus_reduce_desc desc;
        locus_reduce_desc_init(&desc);
        desc.count = COUNT;
        double sum = 0.0;
        locus_record record;
        locus_record_init(&record);
        if (TEST_OK(locus_reduce(context, all, &desc, x, &sum, &record)) ==
            LOCUS_SUCCESS)
            TEST_EXPECT(sum == expected && strcmp(record.device, "cpu") == 0,
                        "narrowed pool: sum %.17g on %s, expected %.17g on cpu",
                        sum, record.device, expected);
        locus_device_info info;
        locus_device_info_init(&info);
        TEST_OK(locus_device_get_info(node0, &info));
        TEST_EXPECT(info.compute_units == 0,
                    "cpu:numa=0 has %d compute units on rank 1's context",
                    info.compute_units);
    }
    locus_buffer_destroy(x);
    locus_context_destroy(context);
}

static void expect_left_alone(const char *what, const char *topology,
                              const char *threads, int ignore_environment,
                              int rank, int workers, const char *reason)
{
    locus_context *context = make(topology, threads, ignore_environment);
    if (!context)
        return;
    locus_local_rank_info info;
    get_info(context, &info);
    TEST_EXPECT(!info.narrowed && info.local_rank == rank &&
                    info.workers == workers &&
                    strstr(info.reason, reason) != NULL,
                "%s: rank %d, narrowed %d, %d workers (expected rank %d, %d "
                "workers), reason '%s' (expected '%s')",
                what, info.local_rank, info.narrowed, info.workers, rank,
                workers, info.reason, reason);
    locus_context_destroy(context);
}

static void test_context_left_alone(void)
{
    const char *two_by_two = "node:2 core:2 pu:1";
    clear_launchers();
    expect_left_alone("no launcher", two_by_two, NULL, 0, -1, 4,
                      "not started by an MPI launcher");
    set_ompi("0", "1");
    expect_left_alone("one rank", two_by_two, NULL, 0, 0, 4, "only rank");
    set_ompi("1", "2");
    expect_left_alone("threads option", two_by_two, "3", 0, 1, 3,
                      "LOCUS_THREADS=3");
    setenv("LOCUS_THREADS", "2", 1);
    expect_left_alone("LOCUS_THREADS", two_by_two, NULL, 0, 1, 2,
                      "LOCUS_THREADS=2");
    unsetenv("LOCUS_THREADS");
    expect_left_alone("ignore_environment", two_by_two, NULL, 1, -1, 4,
                      "reads no environment");
    /* A garbled launcher variable is no error: the context is made, with
     * every core, and says why. */
    set_ompi("one", "2");
    expect_left_alone("garbled rank", two_by_two, NULL, 0, -1, 4,
                      "OMPI_COMM_WORLD_LOCAL_RANK='one'");
    clear_launchers();
}

/* On this machine: a process the launcher (here: the test itself) bound
 * keeps its binding; an unbound one is narrowed to part of its cores. */
static void test_context_real_binding(void)
{
    cpu_set_t original;
    if (sched_getaffinity(0, sizeof original, &original) != 0 ||
        CPU_COUNT(&original) < 2) {
        printf("real binding: fewer than 2 allowed cpus, not checked\n");
        return;
    }
    set_ompi("1", "2");
    locus_context *context = make(NULL, NULL, 0);
    if (context) {
        locus_local_rank_info info;
        get_info(context, &info);
        /* Unbound unless the cgroup's set differs from our affinity (a
         * runner that pinned the test): then the binding must be named. */
        TEST_EXPECT((info.narrowed && info.workers >= 1 &&
                     info.workers < CPU_COUNT(&original)) ||
                        (!info.narrowed && strstr(info.reason, "bound")),
                    "unbound rank 1 of 2 on %d cpus: narrowed %d, %d "
                    "workers on '%s' (%s)",
                    CPU_COUNT(&original), info.narrowed, info.workers,
                    info.cpus, info.reason);
        locus_context_destroy(context);
    }
    int first = 0;
    while (!CPU_ISSET(first, &original))
        first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer runs a thread of its own, which this call does not
     * bind; the process's binding (all its threads) then stays whole, as
     * it would for any program that binds one thread of several. */
    printf("real binding: not checked under ThreadSanitizer\n");
    clear_launchers();
    return;
#endif
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        printf("real binding: sched_setaffinity refused, not checked\n");
        clear_launchers();
        return;
    }
    context = make(NULL, NULL, 0);
    if (context) {
        locus_local_rank_info info;
        get_info(context, &info);
        char expected[16];
        snprintf(expected, sizeof expected, "%d", first);
        TEST_EXPECT(!info.narrowed && strstr(info.reason, "bound") &&
                        strcmp(info.cpus, expected) == 0,
                    "bound rank: narrowed %d, cpus '%s' (expected %s), "
                    "reason '%s'",
                    info.narrowed, info.cpus, expected, info.reason);
        locus_context_destroy(context);
    }
    TEST_EXPECT(sched_setaffinity(0, sizeof original, &original) == 0,
                "cannot restore the affinity");
    clear_launchers();
}

static void test_get_errors(void)
{
    locus_local_rank_info info;
    locus_local_rank_info_init(&info);
    TEST_EXPECT(info.local_rank == -1 && info.struct_size == sizeof info,
                "init leaves local_rank %d, struct_size %zu", info.local_rank,
                info.struct_size);
    locus_local_rank_info_init(NULL);
    TEST_ERROR(locus_local_rank_get(NULL, &info), LOCUS_ERROR_NULL_ARGUMENT,
               "context");
    clear_launchers();
    locus_context *context = make("node:1 core:2 pu:1", NULL, 0);
    if (!context)
        return;
    TEST_ERROR(locus_local_rank_get(context, NULL), LOCUS_ERROR_NULL_ARGUMENT,
               "info");
    info.struct_size = sizeof info - 1;
    TEST_ERROR(locus_local_rank_get(context, &info),
               LOCUS_ERROR_INVALID_ARGUMENT, "struct_size");
    locus_context_destroy(context);
}

int main(void)
{
    test_launchers();
    test_not_a_launcher();
    test_garbled();
    test_shares();
    test_share_properties();
    test_context_narrowed();
    test_context_left_alone();
    test_context_real_binding();
    test_get_errors();
    clear_launchers();
    if (test_failures())
        fprintf(stderr, "%d failures\n", test_failures());
    return test_exit_code();
}
