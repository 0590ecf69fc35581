/* The calibration cache: one text file per host, device and kind of
 * measurement under $XDG_CACHE_HOME/locus/, its key, and the lock that
 * has processes starting together measure once. Nothing in a planted
 * link or FIFO is followed or waited on (docs/SCHEDULER.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibration_parts.h"
#include "safe_file.h"
#include "status.h"

#define MAX_FILE_BYTES 8192

static const char *const kind_names[] = {
    [LOCUS__MEASURE_FULL] = "full",
    [LOCUS__MEASURE_PROBE] = "probe",
};

/* What the figures depend on: this host, the device and its driver, the
 * workers the CPU device has, the kernels it may use, the library, and
 * whether they are a probe or the full calibration. A change in any of
 * them is a new key, so a stale file is never read. Nothing that drifts
 * while the device stays the same: no memory size, which for a device
 * computing on host memory (the CPU backend's, PoCL's) is the machine's,
 * changed by a VM's balloon from one process to the next (PoCL's gave 8
 * cache files in 15 minutes), and for a GPU is its model's, which its
 * name already says. */
bool locus__calibration_key(locus_context *context, const locus_device *device,
                            locus__measure_kind kind, char *key, size_t size)
{
    char host[256] = "unknown";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    int written =
        snprintf(key, size,
                 "locus=%s host=%s topology=%s device=%s name=%s vendor=%s "
                 "version=%s units=%d workers=%d isa=%s measure=%s",
                 locus_version_string(), host, context->topology.source,
                 device->info.selector, device->info.name, device->info.vendor,
                 device->info.version, device->info.compute_units,
                 locus__pool_size(context->pool),
                 locus__isa_name(context->config.cpu_isa), kind_names[kind]);
    if (written < 0 || (size_t)written >= size)
        return false;
    for (char *c = key; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return true;
}

/* Why the last cache_dir() of this thread failed, for the warning and
 * for `locus calibrate`'s exit status. */
static _Thread_local char cache_dir_failure[300];

/* $XDG_CACHE_HOME/locus, else ~/.cache/locus; made when missing. */
static bool cache_dir(char *dir, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int written;
    if (xdg && xdg[0] == '/')
        written = snprintf(dir, size, "%s/locus", xdg);
    else if (home && home[0] == '/')
        written = snprintf(dir, size, "%s/.cache/locus", home);
    else {
        snprintf(cache_dir_failure, sizeof cache_dir_failure,
                 "no cache directory: neither XDG_CACHE_HOME nor HOME is an "
                 "absolute path");
        return false;
    }
    if (written < 0 || (size_t)written >= size) {
        snprintf(cache_dir_failure, sizeof cache_dir_failure,
                 "the cache directory's path is too long");
        return false;
    }
    /* Each level in turn, as mkdir -p does. */
    for (char *slash = strchr(dir + 1, '/');; slash = strchr(slash + 1, '/')) {
        if (slash)
            *slash = '\0';
        bool made = mkdir(dir, 0755) == 0 || errno == EEXIST;
        if (!made)
            snprintf(cache_dir_failure, sizeof cache_dir_failure,
                     "cannot make the cache directory %.200s: %s", dir,
                     strerror(errno));
        if (slash)
            *slash = '/';
        if (!made)
            return false;
        if (!slash)
            return true;
    }
}

static bool cache_paths(const char *key, char *path, char *lock_path,
                        size_t size)
{
    char dir[3072];
    if (!cache_dir(dir, sizeof dir))
        return false;
    unsigned long long hash =
        (unsigned long long)locus__calibration_hash(key, strlen(key));
    int a = snprintf(path, size, "%s/calibration-%016llx.txt", dir, hash);
    int b = snprintf(lock_path, size, "%s/calibration-%016llx.lock", dir, hash);
    return a > 0 && (size_t)a < size && b > 0 && (size_t)b < size;
}

static bool read_cache(locus_context *context, const char *path,
                       const char *key, locus__rates *rates)
{
    const char *why = "";
    FILE *file = locus__fopen_regular_read(path, O_NOFOLLOW, &why);
    if (!file) {
        if (errno != ENOENT)
            locus__log(context, LOCUS_LOG_WARN,
                       "calibration cache %s not read: %s", path, why);
        return false;
    }
    char text[MAX_FILE_BYTES + 1];
    size_t length = fread(text, 1, sizeof text, file);
    bool read_error = ferror(file) != 0;
    fclose(file);
    locus_status status =
        read_error || length > MAX_FILE_BYTES
            ? locus__fail(LOCUS_ERROR_INVALID_ARGUMENT,
                          "calibration file is unreadable or too long")
            : locus__calibration_parse(text, length, key, rates);
    if (status != LOCUS_SUCCESS)
        locus__log(context, LOCUS_LOG_WARN, "%s: %s; measuring again", path,
                   locus_last_error());
    return status == LOCUS_SUCCESS;
}

/* Written to a file of its own and renamed over the old one, so that
 * another process (an MPI rank) reads the old file or the new one, never a
 * half-written one. The temporary is made by mkstemp (O_EXCL, a name no
 * one can plant a link at beforehand) in the cache directory; rename()
 * replaces a link at `path` itself rather than following it. Mode 0644,
 * as the file had before: the figures are not secret; the threat is a
 * cache directory others can write, where a planted link redirected the
 * write (docs/SCHEDULER.md). */
static bool write_cache(locus_context *context, const char *path,
                        const char *key, const locus__rates *rates)
{
    char text[MAX_FILE_BYTES];
    size_t length = locus__calibration_format(rates, key, text, sizeof text);
    char temporary[4200];
    int written = snprintf(temporary, sizeof temporary, "%s.tmp-XXXXXX", path);
    if (length >= sizeof text || written <= 0 ||
        (size_t)written >= sizeof temporary) {
        locus__log(context, LOCUS_LOG_WARN,
                   "could not write the calibration cache %s: path or "
                   "contents too long",
                   path);
        return false;
    }
    const char *failed = "mkstemp";
    int fd = mkstemp(temporary);
    bool ok = fd >= 0;
    if (ok) {
        failed = "write";
        ok =
            fchmod(fd, 0644) == 0 && write(fd, text, length) == (ssize_t)length;
    }
    if (fd >= 0 && close(fd) != 0 && ok) {
        failed = "close";
        ok = false;
    }
    if (ok && rename(temporary, path) != 0) {
        failed = "rename";
        ok = false;
    }
    if (!ok) {
        int saved = errno;
        if (fd >= 0)
            unlink(temporary);
        locus__log(context, LOCUS_LOG_WARN,
                   "could not write the calibration cache %s: %s: %s", path,
                   failed, strerror(saved));
    }
    return ok;
}

/* How long a process waits for another's calibration lock before it goes
 * on without: a probe takes a tenth of a second and the CPU's full
 * calibration about half of one, so a holder past this is stopped
 * (SIGSTOP), stuck, or building a device's kernels, and waiting longer
 * would hang the op that needs the figures. */
#define LOCK_WAIT_SECONDS 2.0
#define LOCK_POLL_MICROSECONDS 10000

/* The lock file, opened without following a link planted at its path, and
 * held with a bounded wait; -1 where it cannot be had (the reason logged). */
static int take_lock(locus_context *context, const char *lock_path)
{
    const char *why = "";
    int lock = locus__open_regular(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW,
                                   0644, &why);
    if (lock < 0) {
        locus__log(context, LOCUS_LOG_WARN,
                   "calibration lock %s not taken: %s; calibrating "
                   "without it",
                   lock_path, why);
        return -1;
    }
    for (int tries = 0;; tries++) {
        if (flock(lock, LOCK_EX | LOCK_NB) == 0)
            return lock;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            locus__log(context, LOCUS_LOG_WARN,
                       "calibration lock %s: %s; calibrating without it",
                       lock_path, strerror(errno));
            close(lock);
            return -1;
        }
        if (tries * (LOCK_POLL_MICROSECONDS * 1e-6) >= LOCK_WAIT_SECONDS)
            break;
        usleep(LOCK_POLL_MICROSECONDS);
    }
    locus__log(context, LOCUS_LOG_WARN,
               "calibration lock %s still held by another process after "
               "%.0f s (stopped or stuck?); using the cached or nominal "
               "figures",
               lock_path, LOCK_WAIT_SECONDS);
    close(lock);
    return -2;
}

/* The file's key and paths; false (the reason in cache_dir_failure, or
 * none for a key too long) when there are none. */
static bool paths_of(locus_context *context, const locus_device *device,
                     locus__measure_kind kind, char *key, char *path,
                     char *lock_path, size_t size, bool *have_key)
{
    *have_key = locus__calibration_key(context, device, kind, key,
                                       LOCUS__CALIBRATION_KEY_MAX);
    return *have_key && cache_paths(key, path, lock_path, size);
}

bool locus__cache_read(locus_context *context, const locus_device *device,
                       locus__measure_kind kind, locus__rates *rates)
{
    char key[LOCUS__CALIBRATION_KEY_MAX], path[4096], lock_path[4096];
    bool have_key;
    return paths_of(context, device, kind, key, path, lock_path, sizeof path,
                    &have_key) &&
           read_cache(context, path, key, rates);
}

const char *locus__cache_failure(void)
{
    return cache_dir_failure;
}

void locus__cache_failure_clear(void)
{
    cache_dir_failure[0] = '\0';
}

locus__rates_source
locus__cache_look_up_or_measure(locus_context *context, locus_device *device,
                                locus__measure_kind kind, bool remeasure,
                                locus__rates *rates, bool *kept)
{
    *kept = false;
    const bool full = kind == LOCUS__MEASURE_FULL;
    const locus__rates_source read_source =
        full ? LOCUS__RATES_CACHED : LOCUS__RATES_PROBED;
    char key[LOCUS__CALIBRATION_KEY_MAX], path[4096], lock_path[4096];
    bool have_key;
    bool have_paths = paths_of(context, device, kind, key, path, lock_path,
                               sizeof path, &have_key);
    if (have_paths && !remeasure && read_cache(context, path, key, rates))
        return read_source;
    int lock = have_paths ? take_lock(context, lock_path) : -1;
    locus__rates_source source = LOCUS__RATES_NONE;
    if (lock >= 0 && !remeasure && read_cache(context, path, key, rates))
        source = read_source;
    if (lock == -2) {
        /* Another process is (or was) measuring this device and does not
         * let go: measuring beside it would disturb both, so what it may
         * have cached, else the nominal figures, stand for this process. */
        if (!remeasure && read_cache(context, path, key, rates)) {
            source = read_source;
        } else {
            locus__nominal_rates(device, rates);
            source = LOCUS__RATES_NOMINAL;
        }
    }
    if (source == LOCUS__RATES_NONE) {
        if (locus__measure_now(context, device, kind, rates) == LOCUS_SUCCESS) {
            source = full ? LOCUS__RATES_MEASURED : LOCUS__RATES_PROBED;
            if (have_paths)
                *kept = write_cache(context, path, key, rates);
            else
                locus__log(
                    context, LOCUS_LOG_INFO, "%s: the %s of %s is not kept",
                    have_key ? cache_dir_failure : "no calibration key",
                    full ? "calibration" : "probe", device->info.selector);
        } else {
            locus__log(context, LOCUS_LOG_WARN,
                       "%s %s failed (%s); using nominal figures",
                       full ? "calibrating" : "probing", device->info.selector,
                       locus_last_error());
            locus__nominal_rates(device, rates);
            source = LOCUS__RATES_NOMINAL;
        }
    }
    if (lock >= 0)
        close(lock); /* releases the flock */
    return source;
}
