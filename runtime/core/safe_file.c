#include "safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int locus__open_regular(const char *path, int flags, mode_t mode,
                        const char **why)
{
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);
    if (fd < 0) {
        /* A FIFO opened for writing without a reader, or a device. */
        *why = errno == ENXIO ? "not a regular file" : strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        *why = "not a regular file";
        return -1;
    }
    int status_flags = fcntl(fd, F_GETFL);
    if (status_flags < 0 ||
        fcntl(fd, F_SETFL, status_flags & ~O_NONBLOCK) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    return fd;
}

FILE *locus__fopen_regular_read(const char *path, int extra_flags,
                                const char **why)
{
    int fd = locus__open_regular(path, O_RDONLY | extra_flags, 0, why);
    if (fd < 0)
        return NULL;
    FILE *file = fdopen(fd, "rb");
    if (file == NULL) {
        *why = strerror(errno);
        close(fd);
    }
    return file;
}
