/* The op accounting's per-thread lists (runtime/memory/account.c): a thread
 * keeps its block of lists from one op to the next, an op begun inside
 * another (as a calibration run inside an op) gets a block of its own, and
 * each op's figures are its own reads only, from a clear start, on every
 * thread at once.
 *
 * usage: test_account */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "context_types.h"
#include "test_util.h"

static uint64_t total_of(locus__account *account)
{
    locus__account_result result;
    locus__account_finish(account, &result);
    return result.local_bytes + result.remote_bytes + result.unknown_bytes;
}

static void expect_total(locus__account *account, uint64_t want,
                         const char *what)
{
    uint64_t got = total_of(account);
    TEST_EXPECT(got == want, "%s: %llu bytes accounted, want %llu", what,
                (unsigned long long)got, (unsigned long long)want);
}

typedef struct sequence {
    locus_context *context;
    unsigned char *memory; /* 64 KiB, touched */
    int rounds;
} sequence;

static void *run_sequence(void *opaque)
{
    sequence *s = opaque;
    const locus__topology *topology = &s->context->topology;
    const locus__pool *pool = s->context->pool;
    for (int round = 0; round < s->rounds; round++) {
        locus__account outer, inner, after;
        if (TEST_OK(locus__account_begin(&outer, topology, pool)) !=
            LOCUS_SUCCESS)
            return NULL;
        locus__account_read(&outer, s->memory, 3 * 4096);
        /* An op inside the op: its own lists, not the outer one's. */
        if (TEST_OK(locus__account_begin(&inner, topology, pool)) ==
            LOCUS_SUCCESS) {
            TEST_EXPECT(inner.lists != outer.lists,
                        "an op inside an op shares its lists");
            locus__account_read(&inner, s->memory + 40000, 1000);
            expect_total(&inner, 1000, "the inner op");
            locus__account_release(&inner);
        }
        locus__account_read(&outer, s->memory + 20000, 500);
        expect_total(&outer, 3 * 4096 + 500, "the outer op");
        const locus__range_list *kept = outer.lists;
        locus__account_release(&outer);

        /* The next op takes the kept block back, cleared. */
        if (TEST_OK(locus__account_begin(&after, topology, pool)) !=
            LOCUS_SUCCESS)
            return NULL;
        TEST_EXPECT(after.lists == kept,
                    "the thread's next op did not reuse its lists");
        locus_op_context op = {.record = NULL, .runtime_private = &after};
        locus__account_transfer(&op, s->memory + 8192, 777, 1);
        locus__account_read_rows(&after, s->memory, 100, 1000, 5);
        expect_total(&after, 777 + 500, "the op after");
        locus__account_release(&after);
    }
    return NULL;
}

int main(void)
{
    locus_context *context = NULL;
    if (TEST_OK(locus_context_create(NULL, &context)) != LOCUS_SUCCESS)
        return test_exit_code();
    enum { THREADS = 3 };
    sequence sequences[THREADS];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        sequences[t].context = context;
        sequences[t].memory = malloc(65536);
        sequences[t].rounds = 50;
        if (!sequences[t].memory)
            return 1;
        memset(sequences[t].memory, t + 1, 65536);
    }
    run_sequence(&sequences[0]); /* the main thread first, alone */
    printf("one thread: done\n");
    for (int t = 0; t < THREADS; t++)
        TEST_EXPECT(
            pthread_create(&threads[t], NULL, run_sequence, &sequences[t]) == 0,
            "pthread_create %d", t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    printf("%d threads at once: done\n", THREADS);
    for (int t = 0; t < THREADS; t++)
        free(sequences[t].memory);
    locus_context_destroy(context);
    return test_exit_code();
}
