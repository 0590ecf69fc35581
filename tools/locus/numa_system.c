/* `locus numa`: what the kernel says about this machine's NUMA state, read
 * from /sys and /proc. Every reader tolerates a missing file (an older
 * kernel, a container without /sys): the figure is then reported absent. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format.h"
#include "numa.h"

const char *const numastat_names[NUMASTAT_FIELDS] = {
    "numa_hit",       "numa_miss",  "numa_foreign",
    "interleave_hit", "local_node", "other_node"};

/* The first line of a small file, newline removed; false when unreadable. */
static bool read_line(const char *path, char *text, size_t capacity)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    bool ok = fgets(text, (int)capacity, file) != NULL;
    fclose(file);
    if (ok)
        text[strcspn(text, "\n")] = '\0';
    return ok;
}

static long read_long(const char *path)
{
    char text[64];
    if (!read_line(path, text, sizeof text))
        return -1;
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    return errno || end == text ? -1 : value;
}

void numa_read_hmat(int node, numa_hmat *hmat)
{
    memset(hmat, 0, sizeof *hmat);
    char base[128];
    snprintf(base, sizeof base,
             "/sys/devices/system/node/node%d/access0/initiators", node);
    static const char *const names[] = {"read_bandwidth", "write_bandwidth",
                                        "read_latency", "write_latency"};
    long *fields[] = {&hmat->read_bandwidth_mbps, &hmat->write_bandwidth_mbps,
                      &hmat->read_latency_ns, &hmat->write_latency_ns};
    for (size_t i = 0; i < 4; i++) {
        char path[192];
        snprintf(path, sizeof path, "%s/%s", base, names[i]);
        *fields[i] = read_long(path);
        hmat->present |= *fields[i] >= 0;
    }
    /* The initiators are links named nodeN in the same directory. */
    DIR *dir = opendir(base);
    if (!dir)
        return;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        int initiator;
        if (sscanf(entry->d_name, "node%d", &initiator) == 1 &&
            initiator >= 0 && initiator < LOCUS_MAX_NUMA_NODES)
            hmat->initiators |= UINT64_C(1) << initiator;
    }
    closedir(dir);
}

bool numa_read_numastat(int node, uint64_t *values)
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/numastat",
             node);
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    char name[64];
    unsigned long long value;
    int found = 0;
    while (fscanf(file, "%63s %llu", name, &value) == 2)
        for (int i = 0; i < NUMASTAT_FIELDS; i++)
            if (strcmp(name, numastat_names[i]) == 0) {
                values[i] = value;
                found++;
            }
    fclose(file);
    return found > 0;
}

int numa_read_balancing(void)
{
    long value = read_long("/proc/sys/kernel/numa_balancing");
    return value < 0 ? -1 : (int)value;
}

bool numa_read_migrated(uint64_t *pages)
{
    FILE *file = fopen("/proc/vmstat", "r");
    if (!file)
        return false;
    char name[64];
    unsigned long long value;
    bool found = false;
    while (fscanf(file, "%63s %llu", name, &value) == 2)
        if (strcmp(name, "numa_pages_migrated") == 0) {
            *pages = value;
            found = true;
        }
    fclose(file);
    return found;
}

static void count_cpu(long cpu, void *state)
{
    (void)cpu;
    ++*(int *)state;
}

static int count_list(const char *list)
{
    int count = 0;
    if (list[0] != '\0')
        cpu_list_for_each(list, count_cpu, &count);
    return count;
}

/* A "Name:\tvalue" line of /proc/<pid>/status. */
static bool status_field(const char *path, const char *name, char *value,
                         size_t capacity)
{
    FILE *file = fopen(path, "r");
    if (!file)
        return false;
    char line[4096];
    size_t length = strlen(name);
    bool found = false;
    while (!found && fgets(line, sizeof line, file))
        if (strncmp(line, name, length) == 0 && line[length] == ':') {
            const char *text = line + length + 1;
            while (*text == ' ' || *text == '\t')
                text++;
            snprintf(value, capacity, "%s", text);
            value[strcspn(value, "\n")] = '\0';
            found = true;
        }
    fclose(file);
    return found;
}

void numa_read_cpusets(numa_view *view)
{
    status_field("/proc/self/status", "Cpus_allowed_list", view->cpus_allowed,
                 sizeof view->cpus_allowed);
    status_field("/proc/self/status", "Mems_allowed_list", view->mems_allowed,
                 sizeof view->mems_allowed);
    read_line("/sys/devices/system/cpu/online", view->cpus_online,
              sizeof view->cpus_online);
    read_line("/sys/devices/system/node/online", view->nodes_online,
              sizeof view->nodes_online);
    view->cpus_allowed_count = count_list(view->cpus_allowed);
    view->cpus_online_count = count_list(view->cpus_online);
}

/* The OS node of an OS cpu, from the kernel's nodeN links; -1 unknown. */
static int node_of_cpu(int cpu)
{
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d", cpu);
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    int node = -1;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;)
        if (sscanf(entry->d_name, "node%d", &node) == 1)
            break;
    closedir(dir);
    return node;
}

/* The cpu a thread last ran on: field 39 of /proc/<pid>/task/<tid>/stat,
 * counted after the command name, which may hold spaces and parentheses. */
static int last_cpu(int pid, const char *tid)
{
    char path[320], line[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%s/stat", pid, tid);
    if (!read_line(path, line, sizeof line))
        return -1;
    char *field = strrchr(line, ')');
    if (!field)
        return -1;
    int index = 2; /* the field after ")" is number 3 */
    for (char *cursor = field + 1; *cursor; cursor++) {
        if (*cursor != ' ')
            continue;
        if (++index == 39)
            return atoi(cursor + 1);
    }
    return -1;
}

static void read_threads(int pid, numa_process *process)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *dir = opendir(path);
    if (!dir)
        return;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        if (!isdigit((unsigned char)entry->d_name[0]))
            continue;
        process->thread_count++;
        int node = node_of_cpu(last_cpu(pid, entry->d_name));
        if (node >= 0 && node < LOCUS_MAX_NUMA_NODES)
            process->threads_by_node[node]++;
    }
    closedir(dir);
}

/* One numa_maps line: "N1=12" page counts, "kernelpagesize_kB=4", and
 * "anon=" or "file=" for what backs the mapping. */
static void add_mapping(char *line, numa_process *process)
{
    unsigned long long page_kb = 4;
    char *found = strstr(line, "kernelpagesize_kB=");
    if (found)
        page_kb = strtoull(found + strlen("kernelpagesize_kB="), NULL, 10);
    bool anon = strstr(line, " anon=") != NULL;
    bool file = strstr(line, " file=") != NULL;
    for (char *token = strtok(line, " \n"); token;
         token = strtok(NULL, " \n")) {
        int node;
        unsigned long long pages;
        if (sscanf(token, "N%d=%llu", &node, &pages) != 2 || node < 0 ||
            node >= LOCUS_MAX_NUMA_NODES)
            continue;
        uint64_t bytes = (uint64_t)pages * page_kb * 1024;
        process->bytes_by_node[node] += bytes;
        if (anon)
            process->anon_bytes_by_node[node] += bytes;
        else if (file)
            process->file_bytes_by_node[node] += bytes;
    }
}

/* The LOCUS_RECORD of process pid, from its environment; a relative path
 * is the process's, so it is taken from its working directory. */
static bool record_path_of(int pid, char *path, size_t capacity)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/environ", pid);
    FILE *file = fopen(name, "r");
    if (!file)
        return false;
    char entry[4096];
    size_t used = 0;
    bool found = false;
    int c;
    while (!found && (c = fgetc(file)) != EOF) {
        if (c != '\0' && used + 1 < sizeof entry) {
            entry[used++] = (char)c;
            continue;
        }
        entry[used] = '\0';
        used = 0;
        if (strncmp(entry, "LOCUS_RECORD=", 13) == 0 && entry[13]) {
            if (entry[13] == '/')
                snprintf(path, capacity, "%.200s", entry + 13);
            else
                snprintf(path, capacity, "/proc/%d/cwd/%.200s", pid,
                         entry + 13);
            found = true;
        }
    }
    fclose(file);
    return found;
}

static uint64_t json_number(const char *line, const char *key, bool *found)
{
    const char *at = strstr(line, key);
    *found = at != NULL;
    return at ? strtoull(at + strlen(key), NULL, 10) : 0;
}

/* Where a buffer's pages are now, asked of the process itself:
 * move_pages(2) with no targets, at most 1024 pages spread evenly. */
static bool query_buffer(int pid, struct numa_buffer_view *buffer)
{
    long page_size = sysconf(_SC_PAGESIZE);
    uint64_t page = page_size > 0 ? (uint64_t)page_size : 4096;
    uint64_t first = buffer->address & ~(page - 1);
    uint64_t total = (buffer->address + buffer->bytes - 1 - first) / page + 1;
    enum { SAMPLES = 1024 };
    void *pages[SAMPLES];
    int status[SAMPLES];
    size_t count = total < SAMPLES ? (size_t)total : SAMPLES;
    for (size_t i = 0; i < count; i++)
        pages[i] =
            (void *)(uintptr_t)(first + (count == total
                                             ? i
                                             : i * (total - 1) / (count - 1)) *
                                            page);
    if (syscall(SYS_move_pages, pid, (unsigned long)count, pages, NULL, status,
                0) != 0)
        return false;
    memset(buffer->bytes_by_node, 0, sizeof buffer->bytes_by_node);
    for (size_t i = 0; i < count; i++)
        if (status[i] >= 0 && status[i] < LOCUS_MAX_NUMA_NODES)
            buffer->bytes_by_node[status[i]] += buffer->bytes / count;
    return true;
}

/* The buffers the process's "migrate" lines name, each by its last line. */
static void read_buffers(int pid, numa_process *process)
{
    if (!record_path_of(pid, process->record_path, sizeof process->record_path))
        return;
    FILE *file = fopen(process->record_path, "r");
    if (!file)
        return;
    char own[32], line[4096];
    snprintf(own, sizeof own, "\"pid\":%d,", pid);
    while (fgets(line, sizeof line, file)) {
        if (!strstr(line, own) || !strstr(line, "\"op\":\"migrate\""))
            continue;
        bool has_id, has_address, has_bytes, has_node;
        struct numa_buffer_view seen = {0};
        seen.id = json_number(line, "\"buffer_id\":", &has_id);
        seen.address = json_number(line, "\"buffer_address\":", &has_address);
        seen.bytes = json_number(line, "\"bytes\":", &has_bytes);
        const char *at = strstr(line, "\"migrate_node\":");
        has_node = at != NULL;
        int node = has_node ? atoi(at + strlen("\"migrate_node\":")) : -1;
        if (!has_id || !has_address || !has_bytes || seen.bytes == 0)
            continue;
        if (node >= 0 && node < LOCUS_MAX_NUMA_NODES)
            seen.bytes_by_node[node] = seen.bytes;
        size_t slot = 0;
        while (slot < process->buffer_count &&
               process->buffers[slot].id != seen.id)
            slot++;
        if (slot == sizeof process->buffers / sizeof process->buffers[0])
            continue; /* the first ones are shown */
        process->buffers[slot] = seen;
        if (slot == process->buffer_count)
            process->buffer_count++;
    }
    fclose(file);
    for (size_t i = 0; i < process->buffer_count; i++)
        process->buffers[i].queried = query_buffer(pid, &process->buffers[i]);
}

void numa_read_process(int pid, numa_process *process)
{
    memset(process, 0, sizeof *process);
    process->pid = pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    if (!read_line(path, process->command, sizeof process->command)) {
        snprintf(process->error, sizeof process->error,
                 "no process %d (/proc/%d/comm: %s)", pid, pid,
                 strerror(errno));
        return;
    }
    snprintf(path, sizeof path, "/proc/%d/numa_maps", pid);
    FILE *file = fopen(path, "r");
    if (!file) {
        snprintf(process->error, sizeof process->error,
                 "cannot read /proc/%d/numa_maps: %s", pid, strerror(errno));
        return;
    }
    char line[8192];
    while (fgets(line, sizeof line, file))
        add_mapping(line, process);
    fclose(file);
    read_threads(pid, process);
    read_buffers(pid, process);
    process->ok = true;
}

/* The same probe the runtime makes: perf's node-loads event on this
 * thread, user space only. */
bool numa_counters_available(char *why, size_t capacity)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HW_CACHE;
    attr.config = (uint64_t)PERF_COUNT_HW_CACHE_NODE |
                  (uint64_t)PERF_COUNT_HW_CACHE_OP_READ << 8 |
                  (uint64_t)PERF_COUNT_HW_CACHE_RESULT_MISS << 16;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd >= 0) {
        close(fd);
        snprintf(why, capacity, "perf node-loads/node-load-misses");
        return true;
    }
    int error = errno;
    snprintf(why, capacity, "%s",
             error == ENOENT || error == EOPNOTSUPP || error == EINVAL
                 ? "the processor or kernel has no node read events "
                   "(perf's node-loads), e.g. in a VM without a virtual PMU"
             : error == EACCES || error == EPERM
                 ? "perf_event_paranoid or a security policy forbids "
                   "counting"
                 : strerror(error));
    return false;
}
