/* Finding and loading the CPU BLAS references (bench_ref_blas.h). */
#include "bench_ref_blas.h"

#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_ref_openblas.h"

/* MKL's threading layers (mkl_service.h): GNU runs on libgomp, which every
 * gcc system has and the tool already uses; Intel's needs libiomp5, which
 * the mkl wheel does not carry. */
#define MKL_THREADING_GNU 3
#define MKL_INTERFACE_LP64 0

/* Where pip puts each wheel's library: the mkl wheel's data files go to
 * the environment's lib/, scipy-openblas32's library sits in its package
 * folder. Patterns for glob(3), tried in order; ~ is $HOME. */
static const char *const mkl_places[] = {
    "$VIRTUAL_ENV/lib/libmkl_rt.so.[0-9]",
    "~/.local/lib/libmkl_rt.so.[0-9]",
    "/usr/local/lib/libmkl_rt.so.[0-9]",
    "/usr/lib/libmkl_rt.so.[0-9]",
    "/opt/*/.venv/lib/libmkl_rt.so.[0-9]",
    "/opt/conda/lib/libmkl_rt.so.[0-9]",
    "~/.pyenv/versions/*/lib/libmkl_rt.so.[0-9]",
    NULL,
};
#define OPENBLAS_PACKAGE "scipy_openblas32/lib/libscipy_openblas.so"
static const char *const openblas_places[] = {
    "$VIRTUAL_ENV/lib/python3*/site-packages/" OPENBLAS_PACKAGE,
    "~/.local/lib/python3*/site-packages/" OPENBLAS_PACKAGE,
    "/usr/local/lib/python3*/site-packages/" OPENBLAS_PACKAGE,
    "/usr/local/lib/python3*/dist-packages/" OPENBLAS_PACKAGE,
    "/usr/lib/python3/dist-packages/" OPENBLAS_PACKAGE,
    "/opt/*/.venv/lib/python3*/site-packages/" OPENBLAS_PACKAGE,
    "~/.pyenv/versions/*/lib/python3*/site-packages/" OPENBLAS_PACKAGE,
    NULL,
};

/* Expands a leading ~ or $VIRTUAL_ENV; false when the variable is unset. */
static bool expand_place(const char *place, char *out, size_t capacity)
{
    const char *prefix = "";
    const char *rest = place;
    if (place[0] == '~') {
        prefix = getenv("HOME");
        rest = place + 1;
    } else if (strncmp(place, "$VIRTUAL_ENV", 12) == 0) {
        prefix = getenv("VIRTUAL_ENV");
        rest = place + 12;
    }
    if (prefix == NULL || (place[0] != '/' && prefix[0] == '\0')) {
        return false;
    }
    return (size_t)snprintf(out, capacity, "%s%s", prefix, rest) < capacity;
}

/* The first existing file of the places, newest soname last in glob's
 * order, so the last match of a pattern wins. */
static bool find_in_places(const char *const *places, char *path,
                           size_t capacity)
{
    for (size_t p = 0; places[p] != NULL; ++p) {
        char pattern[512];
        if (!expand_place(places[p], pattern, sizeof(pattern))) {
            continue;
        }
        glob_t matches;
        if (glob(pattern, 0, NULL, &matches) == 0 && matches.gl_pathc > 0) {
            snprintf(path, capacity, "%s",
                     matches.gl_pathv[matches.gl_pathc - 1]);
            globfree(&matches);
            return true;
        }
        globfree(&matches);
    }
    return false;
}

/* The file to load: the variable's (a file, or a folder holding one of
 * the names), else the first place that has it. False, with the reason,
 * when there is none. */
static bool choose_path(bench_blas_library *library,
                        const char *const *file_names,
                        const char *const *places)
{
    const char *given = getenv(library->variable);
    if (given != NULL && given[0] != '\0') {
        struct stat status;
        if (stat(given, &status) == 0 && S_ISDIR(status.st_mode)) {
            for (size_t i = 0; file_names[i] != NULL; ++i) {
                snprintf(library->path, sizeof(library->path), "%s/%s", given,
                         file_names[i]);
                if (access(library->path, F_OK) == 0) {
                    return true;
                }
            }
            snprintf(library->reason, sizeof(library->reason),
                     "%s=%s: no %s in that folder", library->variable, given,
                     file_names[0]);
            return false;
        }
        snprintf(library->path, sizeof(library->path), "%s", given);
        if (stat(given, &status) != 0) {
            snprintf(library->reason, sizeof(library->reason),
                     "%s=%s: no such file", library->variable, given);
            return false;
        }
        return true;
    }
    if (find_in_places(places, library->path, sizeof(library->path))) {
        return true;
    }
    snprintf(library->reason, sizeof(library->reason),
             "not in the usual pip places; set %s (scripts/"
             "prepare-references.sh fetches it)",
             library->variable);
    return false;
}

static void *open_library(bench_blas_library *library)
{
    /* RTLD_LOCAL: MKL exports the plain cblas_* names, which must not
     * replace Debian's OpenBLAS for the references that call it. */
    void *handle = dlopen(library->path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        snprintf(library->reason, sizeof(library->reason), "%s", dlerror());
    }
    return handle;
}

/* The version number after `marker` in text ("Version 2026.2-Product"
 * gives 2026.2), up to the first character that is no digit or dot. */
static void version_after(const char *text, const char *marker, char *out,
                          size_t capacity)
{
    const char *at = strstr(text, marker);
    if (at == NULL) {
        snprintf(out, capacity, "unknown");
        return;
    }
    at += strlen(marker);
    size_t length = strspn(at, "0123456789.");
    snprintf(out, capacity, "%.*s", (int)length, at);
}

static void trim_right(char *text)
{
    size_t length = strlen(text);
    while (length > 0 && (text[length - 1] == ' ' || text[length - 1] == '\n'))
        text[--length] = '\0';
}

static void (*mkl_set_num_threads_fn)(int);

static void mkl_threads(int threads)
{
    mkl_set_num_threads_fn(threads > 0 ? threads : 1);
}

/* Casts a dlsym result to a function pointer (POSIX allows it). */
#define SYMBOL(handle, name, type) ((type)(uintptr_t)dlsym(handle, name))

/* One tiny sgemm in a child process: MKL ends the process ("FATAL ERROR:
 * Cannot load libmkl_avx512.so") when the CPU layer this processor needs
 * is missing, as in an archive prepared for another machine. False, with
 * MKL's message as the reason, when the child did not come back well. */
static bool mkl_runs_here(bench_blas_library *library)
{
    int output[2];
    if (pipe(output) != 0) {
        return true; /* cannot check: try it */
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        close(output[0]);
        close(output[1]);
        return true;
    }
    if (child == 0) {
        dup2(output[1], STDOUT_FILENO);
        dup2(output[1], STDERR_FILENO);
        close(output[0]);
        void *handle = dlopen(library->path, RTLD_NOW | RTLD_LOCAL);
        int (*set_layer)(int) = handle ? (int (*)(int))(uintptr_t)dlsym(
                                             handle, "MKL_Set_Threading_Layer")
                                       : NULL;
        bench_sgemm_fn sgemm =
            handle ? (bench_sgemm_fn)(uintptr_t)dlsym(handle, "cblas_sgemm")
                   : NULL;
        if (sgemm == NULL || set_layer == NULL) {
            _exit(2);
        }
        if (getenv("MKL_THREADING_LAYER") == NULL) {
            set_layer(MKL_THREADING_GNU);
        }
        float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {0};
        sgemm(BENCH_CBLAS_ROW_MAJOR, BENCH_CBLAS_NO_TRANS, BENCH_CBLAS_NO_TRANS,
              2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
        _exit(c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4 ? 0 : 3);
    }
    close(output[1]);
    char message[256] = "";
    size_t used = 0;
    ssize_t got;
    while ((got = read(output[0], message + used, sizeof(message) - 1 - used)) >
           0) {
        used += (size_t)got;
        if (used == sizeof(message) - 1) {
            break;
        }
    }
    message[used] = '\0';
    close(output[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return true;
    }
    for (char *c = message; *c; ++c) {
        if (*c == '\n') {
            *c = ' ';
        }
    }
    trim_right(message);
    snprintf(library->reason, sizeof(library->reason),
             "%s does not run here: %s", library->path,
             message[0] ? message : "a test sgemm failed");
    return false;
}

static void load_mkl(bench_blas_library *library)
{
    static const char *const names[] = {"libmkl_rt.so.3", "libmkl_rt.so.2",
                                        "libmkl_rt.so", NULL};
    if (!choose_path(library, names, mkl_places) || !mkl_runs_here(library)) {
        return;
    }
    void *handle = open_library(library);
    if (handle == NULL) {
        return;
    }
    int (*set_layer)(int) =
        SYMBOL(handle, "MKL_Set_Threading_Layer", int (*)(int));
    int (*set_interface)(int) =
        SYMBOL(handle, "MKL_Set_Interface_Layer", int (*)(int));
    void (*set_dynamic)(int) = SYMBOL(handle, "MKL_Set_Dynamic", void (*)(int));
    void (*version)(char *, int) =
        SYMBOL(handle, "MKL_Get_Version_String", void (*)(char *, int));
    mkl_set_num_threads_fn =
        SYMBOL(handle, "MKL_Set_Num_Threads", void (*)(int));
    library->sgemm = SYMBOL(handle, "cblas_sgemm", bench_sgemm_fn);
    library->dgemm = SYMBOL(handle, "cblas_dgemm", bench_dgemm_fn);
    library->bf16gemm =
        SYMBOL(handle, "cblas_gemm_bf16bf16f32", bench_hgemm_fn);
    library->f16gemm = SYMBOL(handle, "cblas_gemm_f16f16f32", bench_hgemm_fn);
    if (library->sgemm == NULL || mkl_set_num_threads_fn == NULL ||
        set_layer == NULL || version == NULL) {
        snprintf(library->reason, sizeof(library->reason),
                 "%s: not MKL's runtime library (no cblas_sgemm or "
                 "MKL_Set_Num_Threads)",
                 library->path);
        return; /* the handle stays open: dlclose of MKL is not safe */
    }
    /* Before any other MKL call, and only where the user chose none. */
    if (getenv("MKL_THREADING_LAYER") == NULL) {
        set_layer(MKL_THREADING_GNU);
    }
    if (set_interface != NULL && getenv("MKL_INTERFACE_LAYER") == NULL) {
        set_interface(MKL_INTERFACE_LP64);
    }
    if (set_dynamic != NULL) {
        set_dynamic(0); /* exactly the threads asked for */
    }
    version(library->detail, (int)sizeof(library->detail));
    library->detail[sizeof(library->detail) - 1] = '\0';
    trim_right(library->detail);
    version_after(library->detail, "Version ", library->version,
                  sizeof(library->version));
    library->set_threads = mkl_threads;
    library->found = true;
}

static void (*scipy_set_num_threads_fn)(int);

static void scipy_threads(int threads)
{
    scipy_set_num_threads_fn(threads > 0 ? threads : 1);
}

static void load_scipy_openblas(bench_blas_library *library)
{
    static const char *const names[] = {"libscipy_openblas.so", NULL};
    if (!choose_path(library, names, openblas_places)) {
        return;
    }
    void *handle = open_library(library);
    if (handle == NULL) {
        return;
    }
    const char *(*config)(void) =
        SYMBOL(handle, "scipy_openblas_get_config", const char *(*)(void));
    scipy_set_num_threads_fn =
        SYMBOL(handle, "scipy_openblas_set_num_threads", void (*)(int));
    library->sgemm = SYMBOL(handle, "scipy_cblas_sgemm", bench_sgemm_fn);
    library->dgemm = SYMBOL(handle, "scipy_cblas_dgemm", bench_dgemm_fn);
    library->bf16gemm = SYMBOL(handle, "scipy_cblas_sbgemm", bench_hgemm_fn);
    if (library->sgemm == NULL || scipy_set_num_threads_fn == NULL ||
        config == NULL) {
        snprintf(library->reason, sizeof(library->reason),
                 "%s: not scipy-openblas32 (no scipy_cblas_sgemm)",
                 library->path);
        return;
    }
    snprintf(library->detail, sizeof(library->detail), "%s", config());
    trim_right(library->detail);
    version_after(library->detail, "OpenBLAS ", library->version,
                  sizeof(library->version));
    library->set_threads = scipy_threads;
    library->found = true;
}

static bench_blas_library libraries[] = {
    {.label = "mkl", .variable = "LOCUS_BENCH_MKL"},
    {.label = "openblas", .variable = "LOCUS_BENCH_OPENBLAS"},
    {.label = "debian openblas", .variable = NULL},
};
#define LIBRARY_COUNT (sizeof(libraries) / sizeof(libraries[0]))

static bool loaded = false;

const bench_blas_library *bench_blas_libraries_used(size_t *count)
{
    *count = loaded ? LIBRARY_COUNT : 0;
    return libraries;
}

const bench_blas_library *bench_blas_libraries(size_t *count)
{
    if (!loaded) {
        loaded = true;
        load_mkl(&libraries[0]);
        load_scipy_openblas(&libraries[1]);
        bench_openblas_describe(&libraries[2]);
    }
    *count = LIBRARY_COUNT;
    return libraries;
}
