/* LOCUS_TOPOLOGY XML that hwloc 2.9 would crash on (found by fuzz_topology:
 * an object with a cpuset but no complete_cpuset, a bitmap with a leading
 * comma) fails with a status that names the line, while the same file
 * intact loads. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect_error.h"

static locus_status load(const char *path)
{
    locus_context_options options;
    locus_context_options_init(&options);
    options.ignore_environment = 1;
    options.topology = path;
    options.backends = "cpu";
    options.threads = "1";
    options.log = "error";
    locus_context *context = NULL;
    locus_status status = locus_context_create(&options, &context);
    locus_context_destroy(context);
    return status;
}

/* The seed with one attribute renamed, written to a temporary file. */
static int broken_copy(const char *seed, const char *from, const char *to,
                       char *path)
{
    FILE *in = fopen(seed, "rb");
    if (!in)
        return 0;
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = '\0';
    char *at = strstr(text, from);
    if (!at || strlen(from) != strlen(to))
        return 0;
    memcpy(at, to, strlen(to));
    strcpy(path, "/tmp/locus-test-topology-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    int ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_topology_xml SEED_XML\n");
        return 1;
    }
    TEST_OK(load(argv[1]));
    char path[64];
    static const char *const cases[][2] = {
        {" complete_cpuset=", " bomplete_cpuset="},
        {" complete_nodeset=", " bomplete_nodeset="},
        {"nodeset=\"0x00000001\"", "nodeset=\",x00000001\""},
        {"cpuset=\"0x00000003\"", "cpuset= '0x0,,0003'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!TEST_EXPECT(broken_copy(argv[1], cases[i][0], cases[i][1], path),
                         "cannot write a broken copy of %s", argv[1]))
            continue;
        TEST_ERROR(load(path), LOCUS_ERROR_TOPOLOGY, "line 4");
        unlink(path);
    }
    TEST_ERROR(load("/nonexistent/topology.xml"), LOCUS_ERROR_TOPOLOGY,
               "not a readable hwloc XML file");
    return test_exit_code();
}
