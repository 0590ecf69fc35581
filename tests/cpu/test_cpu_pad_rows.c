/* The zero-padded row copy of every kernel table this CPU runs (isa.h:
 * locus__pad_rows_kernel; "generic", "avx2", "avx512"), alone, on random
 * shapes: pads 0 to 20, widths 1 to 40, destination rows shorter than,
 * as long as and longer than pad + width, 1 to 4 rows with strides that
 * leave gaps. Every destination element inside the rows must equal the
 * expected copy or 0.0f bit for bit, every element in the gaps and the
 * guards around them must come back unchanged, and the source is the
 * very start or the very end of a mapped range, an inaccessible page on
 * the other side: a load that touches any float outside the rows' source
 * (the masked loads' lanes in the padding) crashes the test. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_table.h"
#include "test_util.h"

#define GUARD 5
#define CASES 400

typedef struct pad_case {
    size_t rows, pad, width, dst_width, dst_stride, src_stride;
} pad_case;

/* Source floats the case reads: its rows' [0, width). */
static size_t source_floats(const pad_case *pc)
{
    return (pc->rows - 1) * pc->src_stride + pc->width;
}

/* The source placed at the start (at_end 0) or the end of `pages`
 * accessible pages that sit between two inaccessible ones. */
static float *place_source(char *mapping, size_t page, size_t pages,
                           size_t floats, int at_end)
{
    char *first = mapping + page;
    if (!at_end)
        return (float *)(void *)first;
    return (float *)(void *)(first + pages * page - floats * sizeof(float));
}

static void run_case(const char *isa_name, const locus__cpu_isa *isa,
                     const pad_case *pc, int at_end)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t floats = source_floats(pc);
    size_t pages = (floats * sizeof(float) + page - 1) / page;
    char *mapping = mmap(NULL, (pages + 2) * page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!TEST_EXPECT(mapping != MAP_FAILED, "mmap failed"))
        return;
    TEST_EXPECT(mprotect(mapping, page, PROT_NONE) == 0 &&
                    mprotect(mapping + (pages + 1) * page, page, PROT_NONE) ==
                        0,
                "mprotect failed");
    float *src = place_source(mapping, page, pages, floats, at_end);
    for (size_t i = 0; i < floats; i++)
        src[i] = (float)test_rng_uniform(-1.0, 1.0);

    size_t dst_floats =
        2 * GUARD + (pc->rows - 1) * pc->dst_stride + pc->dst_width;
    float *array = malloc(dst_floats * sizeof *array);
    float *before = malloc(dst_floats * sizeof *before);
    if (!TEST_EXPECT(array && before, "out of memory"))
        goto done;
    for (size_t i = 0; i < dst_floats; i++)
        array[i] = before[i] = (float)test_rng_uniform(5.0, 6.0);
    isa->pad_rows(array + GUARD, pc->dst_stride, src, pc->src_stride, pc->rows,
                  pc->pad, pc->width, pc->dst_width);

    size_t wrong = 0, first_wrong = 0;
    for (size_t at = 0; at < dst_floats; at++) {
        float expected = before[at];
        if (at >= GUARD && at < dst_floats - GUARD) {
            size_t row = (at - GUARD) / pc->dst_stride;
            size_t x = (at - GUARD) % pc->dst_stride;
            if (x < pc->dst_width)
                expected = x >= pc->pad && x < pc->pad + pc->width
                               ? src[row * pc->src_stride + x - pc->pad]
                               : 0.0f;
        }
        if (memcmp(&array[at], &expected, sizeof expected) != 0 && wrong++ == 0)
            first_wrong = at;
    }
    TEST_EXPECT(wrong == 0,
                "[%s] rows %zu pad %zu width %zu dst_width %zu (strides %zu, "
                "%zu), source at the %s: %zu floats wrong, first at %zu",
                isa_name, pc->rows, pc->pad, pc->width, pc->dst_width,
                pc->dst_stride, pc->src_stride, at_end ? "end" : "start", wrong,
                first_wrong);
done:
    free(array);
    free(before);
    munmap(mapping, (pages + 2) * page);
}

static pad_case random_case(void)
{
    pad_case pc;
    pc.rows = test_rng_range(1, 4);
    pc.pad = test_rng_range(0, 20);
    pc.width = test_rng_range(1, 40);
    /* Shorter than, as long as, or longer than pad + width. */
    size_t full = pc.pad + pc.width;
    switch (test_rng_range(0, 2)) {
    case 0:
        pc.dst_width = test_rng_range(1, full);
        break;
    case 1:
        pc.dst_width = full;
        break;
    default:
        pc.dst_width = full + test_rng_range(1, 20);
        break;
    }
    pc.dst_stride = pc.dst_width + test_rng_range(0, 3);
    pc.src_stride = pc.width + test_rng_range(0, 3);
    return pc;
}

int main(int argc, char **argv)
{
    test_seed(argc, argv);
    int tested = 0;
    for (size_t t = 0; t < TEST_CPU_ISA_COUNT; t++) {
        const char *name = test_cpu_isas[t];
        locus__cpu_isa isa;
        if (!test_cpu_table(name, &isa) ||
            !TEST_EXPECT(isa.pad_rows != NULL, "table %s has no pad_rows",
                         name))
            continue;
        printf("isa %s\n", name);
        fflush(stdout);
        for (int i = 0; i < CASES; i++) {
            pad_case pc = random_case();
            run_case(name, &isa, &pc, i % 2);
        }
        tested++;
    }
    TEST_EXPECT(tested > 0, "no kernel table tested");
    printf("%s: %d failure(s)\n", argv[0], test_failures());
    return test_exit_code();
}
