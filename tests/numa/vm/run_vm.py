#!/usr/bin/env python3
"""Runs Locus's NUMA checks on a real two-node (or, with --nodes 4,
four-node) Linux kernel, in a virtual machine: qemu-system-x86_64 under
software emulation (-accel tcg; no KVM needed), 1 GiB and 4 cpus split
evenly over the nodes, distance 21 between any two and HMAT attributes,
Debian's kernel (linux-image-amd64, fetched with `apt-get download` and
cached in the build directory), and an initramfs holding busybox, the test
programs and the shared libraries ldd names for them.

Inside, /init runs each test program and `locus numa --json`, writing what
they print to a second serial port, which lands in a file here; this script
then checks the summary lines and the JSON.

Exit status: 0 every check passed, 1 something failed, 77 (skipped) only
when qemu-system-x86_64 or the kernel cannot be obtained.
"""
import argparse
import gzip
import io
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import time

SKIP = 77

# The machine: 4 cpus and 1 GiB split evenly over two or four nodes,
# distance 21 between any two, and HMAT figures the kernel publishes under
# /sys/devices/system/node/nodeN/access0/initiators.
def qemu_numa(nodes):
    per_node = 1024 // nodes
    cpus = 4 // nodes
    options = ["-machine", "q35,hmat=on", "-m", "1G", "-smp", "4"]
    for n in range(nodes):
        first = n * cpus
        options += [
            "-object", "memory-backend-ram,id=m%d,size=%dM" % (n, per_node),
            "-numa", "node,nodeid=%d,cpus=%d-%d,memdev=m%d,initiator=%d"
            % (n, first, first + cpus - 1, n, n),
        ]
    for src in range(nodes):
        for dst in range(src + 1, nodes):
            options += ["-numa", "dist,src=%d,dst=%d,val=21" % (src, dst)]
    for i in range(nodes):
        for t in range(nodes):
            local = i == t
            options += [
                "-numa", "hmat-lb,initiator=%d,target=%d,hierarchy=memory,"
                "data-type=access-latency,latency=%d"
                % (i, t, 80 if local else 140),
                "-numa", "hmat-lb,initiator=%d,target=%d,hierarchy=memory,"
                "data-type=access-bandwidth,bandwidth=%s"
                % (i, t, "20G" if local else "10G"),
            ]
    return options


HMAT_LOCAL_LATENCY_NS = 80
HMAT_LOCAL_BANDWIDTH_MBPS = 20480


def say(message):
    print("numa-vm: " + message, flush=True)


def skip(message):
    say("SKIP: " + message)
    sys.exit(SKIP)


def fail(message):
    say("FAIL: " + message)
    sys.exit(1)


def apt_download(package, directory):
    """The .deb of a package, downloaded into directory, or None."""
    if not shutil.which("apt-get"):
        return None
    before = set(os.listdir(directory))
    result = subprocess.run(["apt-get", "download", package], cwd=directory,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    new = [f for f in set(os.listdir(directory)) - before if f.endswith(".deb")]
    if result.returncode != 0 or not new:
        say("apt-get download %s failed: %s" % (package, result.stdout.strip()))
        return None
    return os.path.join(directory, new[0])


def extract_from_deb(deb, pattern, destination):
    """Extracts the first member of the .deb matching pattern (a regular
    expression over its path) to destination; True when one was found.
    dpkg-deb streams the data archive, so the kernel's 400 MiB of modules
    are read past, never written."""
    process = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb],
                               stdout=subprocess.PIPE)
    found = False
    with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
        for member in archive:
            if member.isfile() and re.fullmatch(pattern, member.name):
                with archive.extractfile(member) as source, \
                        open(destination + ".part", "wb") as target:
                    shutil.copyfileobj(source, target)
                os.replace(destination + ".part", destination)
                found = True
                break
    process.stdout.close()
    process.kill()
    process.wait()
    return found


def obtain_kernel(cache):
    given = os.environ.get("LOCUS_VM_KERNEL")
    if given:
        if not os.path.isfile(given):
            skip("LOCUS_VM_KERNEL=%s is no file" % given)
        return given
    kernel = os.path.join(cache, "vmlinuz")
    if os.path.isfile(kernel):
        return kernel
    if not shutil.which("apt-cache") or not shutil.which("dpkg-deb"):
        skip("no kernel cached at %s and no apt-cache/dpkg-deb to fetch "
             "Debian's linux-image-amd64" % kernel)
    depends = subprocess.run(["apt-cache", "depends", "linux-image-amd64"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
    match = re.search(r"Depends: (linux-image-[0-9][^\s]*-amd64)", depends)
    if not match:
        skip("apt-cache knows no linux-image-amd64 (run apt-get update, or set "
             "LOCUS_VM_KERNEL to a bzImage)")
    say("fetching %s (once; cached in %s)" % (match.group(1), cache))
    deb = apt_download(match.group(1), cache)
    if not deb:
        skip("the kernel package %s could not be downloaded" % match.group(1))
    try:
        if not extract_from_deb(deb, r"\./boot/vmlinuz-.*", kernel):
            skip("%s holds no boot/vmlinuz" % deb)
    finally:
        os.unlink(deb)
    return kernel


def is_static(path):
    result = subprocess.run(["ldd", path], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return result.returncode != 0 or "not a dynamic" in result.stdout


def obtain_busybox(cache):
    for candidate in ("/bin/busybox", "/usr/bin/busybox",
                      os.path.join(cache, "busybox")):
        if os.path.isfile(candidate):
            return candidate
    deb = apt_download("busybox-static", cache)
    target = os.path.join(cache, "busybox")
    if not deb or not extract_from_deb(deb, r"\./(usr/)?bin/busybox", target):
        fail("no busybox: apt-get install busybox-static")
    os.unlink(deb)
    os.chmod(target, 0o755)
    return target


def shared_libraries(path):
    """Every file the dynamic loader opens for path: ldd's resolved paths
    and the loader itself."""
    if is_static(path):
        return []
    output = subprocess.run(["ldd", path], stdout=subprocess.PIPE,
                            text=True, check=True).stdout
    libraries = []
    for line in output.splitlines():
        match = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if match:
            libraries.append(match.group(1))
        elif "not found" in line:
            fail("%s: %s" % (path, line.strip()))
    return libraries


class Cpio:
    """A newc cpio archive (what the kernel unpacks as initramfs), written
    here so that no cpio program is needed."""

    def __init__(self):
        self.data = io.BytesIO()
        self.inode = 1
        self.seen = set()

    def _entry(self, name, mode, body=b""):
        name_bytes = name.encode() + b"\0"
        header = "070701" + "".join("%08x" % v for v in (
            self.inode, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0,
            len(name_bytes), 0))
        self.inode += 1
        self.data.write(header.encode() + name_bytes)
        self.data.write(b"\0" * (-(110 + len(name_bytes)) % 4))
        self.data.write(body)
        self.data.write(b"\0" * (-len(body) % 4))

    def directory(self, path):
        path = path.strip("/")
        parts = path.split("/") if path else []
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in self.seen:
                self.seen.add(sub)
                self._entry(sub, stat.S_IFDIR | 0o755)

    def file(self, path, body, mode=0o755):
        path = path.strip("/")
        if path in self.seen:
            return
        self.directory(os.path.dirname(path))
        self.seen.add(path)
        self._entry(path, stat.S_IFREG | mode, body)

    def copy(self, source, path=None):
        with open(source, "rb") as f:
            self.file(path or os.path.abspath(source), f.read())

    def finish(self):
        self._entry("TRAILER!!!", 0)
        return self.data.getvalue()


INIT = r"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# /tmp stays on the initramfs (already writable): a tmpfs there would hide
# the test programs of a checkout that lives under /tmp.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp LOCUS_LOG=warn
{
echo "LOCUS-VM-BEGIN nodes=$(cat /sys/devices/system/node/online) cpus=$(cat /sys/devices/system/cpu/online)"
%(tests)s
echo "== locus numa"
LOCUS_BACKENDS=cpu %(locus)s numa --bytes 4M 2>/tmp/numa.err
echo "LOCUS-VM-EXIT locus-numa=$?"
cat /tmp/numa.err
LOCUS_BACKENDS=cpu %(locus)s numa --json --bytes 4M >/tmp/numa.json 2>/tmp/numa.err
echo "LOCUS-VM-EXIT locus-numa-json=$?"
echo "LOCUS-VM-JSON-BEGIN"
cat /tmp/numa.json
echo "LOCUS-VM-JSON-END"
cat /tmp/numa.err
echo "== locus numa --pid 1"
LOCUS_BACKENDS=cpu %(locus)s numa --no-measure --pid 1 >/tmp/pid.txt 2>&1
echo "LOCUS-VM-EXIT locus-numa-pid=$?"
sed -n '/^process/,/^$/p' /tmp/pid.txt
%(remote)s
echo "LOCUS-VM-END"
} >/dev/ttyS1 2>&1
poweroff -f
"""

REMOTE = """echo "== locus numa --pid (memory deliberately remote)"
LOCUS_RECORD=/tmp/remote.jsonl LOCUS_BACKENDS=cpu %(program)s /tmp/remote.ready &
REMOTE_PID=$!
for i in $(seq 1 100); do [ -e /tmp/remote.ready ] && break; sleep 0.2; done
LOCUS_BACKENDS=cpu %(locus)s numa --no-measure --pid $REMOTE_PID
LOCUS_BACKENDS=cpu %(locus)s numa --no-measure --json --pid $REMOTE_PID >/tmp/remote.json
echo "LOCUS-VM-EXIT locus-numa-pid-remote=$?"
echo "LOCUS-VM-REMOTE-BEGIN"
cat /tmp/remote.json
echo "LOCUS-VM-REMOTE-END"
kill $REMOTE_PID
"""

TEST = """echo "== %(name)s"
%(command)s
echo "LOCUS-VM-EXIT %(name)s=$?"
"""


def build_initramfs(busybox, locus, tests, extra_files, remote=None):
    archive = Cpio()
    for directory in ("proc", "sys", "dev", "tmp", "bin", "sbin"):
        archive.directory(directory)
    archive.copy(busybox, "/bin/busybox")
    programs = [locus] + [t[1][0] for t in tests] + extra_files + \
        ([remote] if remote else [])
    for program in programs:
        archive.copy(program)
        for library in shared_libraries(program):
            archive.copy(library, library)
    steps = "".join(TEST % {"name": name,
                            "command": " ".join(os.path.abspath(a) if os.path.exists(a) else a
                                                for a in command)}
                    for name, command in tests)
    remote_steps = REMOTE % {"program": os.path.abspath(remote),
                             "locus": os.path.abspath(locus)} if remote else ""
    archive.file("/init", (INIT % {"tests": steps, "remote": remote_steps,
                                   "locus": os.path.abspath(locus)}).encode())
    return gzip.compress(archive.finish(), compresslevel=1)


def check_numa_json(text, nodes_wanted):
    problems = []
    try:
        report = json.loads(text)
    except ValueError as error:
        return ["locus numa --json is not JSON: %s" % error]
    nodes = report.get("nodes", [])
    ids = list(range(nodes_wanted))
    if [n.get("id") for n in nodes] != ids:
        problems.append("nodes are %s, not %s" % ([n.get("id") for n in nodes],
                                                  ids))
    distances = [[10 if i == j else 21 for j in ids] for i in ids]
    if report.get("distances") != distances:
        problems.append("distances are %s, not %s" % (report.get("distances"),
                                                      distances)
                        % report.get("distances"))
    for node in nodes:
        hmat = node.get("hmat") or {}
        if hmat.get("read_latency_ns") != HMAT_LOCAL_LATENCY_NS or \
                hmat.get("read_bandwidth_mbps") != HMAT_LOCAL_BANDWIDTH_MBPS:
            problems.append("node %s: hmat %s, expected read latency %d ns, "
                            "read bandwidth %d MB/s" % (
                                node.get("id"), hmat, HMAT_LOCAL_LATENCY_NS,
                                HMAT_LOCAL_BANDWIDTH_MBPS))
    for name in ("bandwidth", "latency"):
        matrix = (report.get(name) or {}).get("matrix")
        if not (isinstance(matrix, list) and len(matrix) == nodes_wanted and
                all(isinstance(row, list) and len(row) == nodes_wanted and
                    all(isinstance(v, (int, float)) and v > 0 for v in row)
                    for row in matrix)):
            problems.append("%s.matrix is %s, not %d x %d positive numbers"
                            % (name, matrix, nodes_wanted, nodes_wanted))
    if not report.get("topology", {}).get("this_system"):
        problems.append("topology.this_system is not true in the VM")
    return problems


REMOTE_BYTES = 32 << 20


def check_remote(text, last):
    """`locus numa --pid` on a process with 32 MiB on the last node and its only
    thread on node 0: the finding names its fix, and the buffer shows on
    the last node from the process's records."""
    block = re.search(r"LOCUS-VM-REMOTE-BEGIN\n(.*)LOCUS-VM-REMOTE-END", text,
                      re.S)
    if not block:
        return ["no locus numa --pid output for the remote process"]
    try:
        report = json.loads(block.group(1))
    except ValueError as error:
        return ["locus numa --pid --json is not JSON: %s" % error]
    problems = []
    apart = [f for f in report.get("findings", [])
             if f.get("kind") == "threads-memory-apart"]
    if not apart or not (apart[0].get("fix") or "").startswith(
            "numactl --cpunodebind=%d --membind=%d " % (last, last)):
        problems.append("remote process: no threads-memory-apart finding "
                        "with fix 'numactl --cpunodebind=%d --membind=%d "
                        "...': %s" % (last, last, report.get("findings")))
    buffers = (report.get("process") or {}).get("buffers") or []
    if not any(b.get("bytes") == REMOTE_BYTES and
               b.get("source") == "move_pages" and
               b.get("by_node") == [{"node": last, "bytes": REMOTE_BYTES}]
               for b in buffers):
        problems.append("remote process: buffers %s, expected 32 MiB on node "
                        "%d by move_pages" % (buffers, last))
    return problems


# Under software emulation the kernel reaches /init in 10-35 s on a 2-core
# machine. Once in a CI replica it never did: the boot CPU stalled in the
# kernel before /init (soft lockups from 23 s to the 540 s limit), and the
# same kernel and initramfs booted at once when run again. A boot that has
# not reached /init's first line by then is killed and tried once more.
BOOT_STALL_SECONDS = 150


def boot(command, results, console, deadline, attempt):
    """Runs the VM until it powers off or the deadline passes. False only
    when it stalled before /init began (LOCUS-VM-BEGIN) and was killed."""
    for path in (results, console):
        if os.path.exists(path):
            os.unlink(path)
    say("booting (attempt %d): %s" % (attempt, " ".join(command)))
    started = time.monotonic()
    vm = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    stalled = False
    while vm.poll() is None:
        now = time.monotonic()
        began = os.path.exists(results) and \
            "LOCUS-VM-BEGIN" in open(results, errors="replace").read()
        if now > deadline:
            say("the VM did not power off within the time left")
            break
        if not began and now - started > BOOT_STALL_SECONDS and attempt == 1:
            stalled = True
            tail = open(console, errors="replace").read()[-1500:] \
                if os.path.exists(console) else ""
            say("the kernel did not reach /init within %d s; console "
                "(last lines):\n%s\nnuma-vm: booting once more"
                % (BOOT_STALL_SECONDS, tail))
            break
        time.sleep(1)
    if vm.poll() is None:
        vm.kill()
        vm.wait()
    say("the VM ran %.1f s" % (time.monotonic() - started))
    return not stalled


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", required=True,
                        help="where the kernel and the initramfs are kept")
    parser.add_argument("--locus", required=True, help="the locus program")
    parser.add_argument("--checks", required=True,
                        help="test_numa_vm_checks")
    parser.add_argument("--fake-device", help="the fake device module (.so)")
    parser.add_argument("--test", action="append", default=[],
                        help="another test program to run inside")
    parser.add_argument("--remote-process",
                        help="numa_remote_process, for locus numa --pid")
    parser.add_argument("--timeout", type=float, default=540)
    parser.add_argument("--nodes", type=int, choices=(2, 4), default=2,
                        help="NUMA nodes of the VM")
    args = parser.parse_args()

    if platform.machine() != "x86_64":
        skip("the test programs are built for %s, the VM is x86_64"
             % platform.machine())
    qemu = os.environ.get("LOCUS_VM_QEMU") or shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 not found (apt-get install qemu-system-x86)")
    os.makedirs(args.cache, exist_ok=True)
    kernel = obtain_kernel(args.cache)
    busybox = obtain_busybox(args.cache)

    tests = []
    checks = [args.checks]
    extra = []
    if args.fake_device:
        checks.append(os.path.dirname(os.path.abspath(args.fake_device)))
        extra.append(args.fake_device)
    tests.append(("checks", checks))
    for path in args.test:
        tests.append((os.path.basename(path), [path]))
    # The kernel and busybox are shared by the VMs of every node count;
    # what each boots and prints is its own.
    run = "" if args.nodes == 2 else "-%dnodes" % args.nodes
    initramfs = os.path.join(args.cache, "initramfs%s.cpio.gz" % run)
    with open(initramfs, "wb") as f:
        f.write(build_initramfs(busybox, args.locus, tests, extra,
                                args.remote_process))

    results = os.path.join(args.cache, "results%s.txt" % run)
    console = os.path.join(args.cache, "console%s.txt" % run)
    command = [qemu, "-accel", "tcg"] + qemu_numa(args.nodes) + [
        "-kernel", kernel, "-initrd", initramfs,
        "-append", "console=ttyS0 panic=-1",
        "-display", "none", "-no-reboot", "-monitor", "none",
        "-serial", "file:" + console, "-serial", "file:" + results,
    ]
    deadline = time.monotonic() + args.timeout
    for attempt in (1, 2):
        if boot(command, results, console, deadline, attempt):
            break
    text = open(results, errors="replace").read() if os.path.exists(results) else ""
    print(text, flush=True)

    problems = []
    if "LOCUS-VM-END" not in text:
        tail = open(console, errors="replace").read()[-3000:] \
            if os.path.exists(console) else ""
        print("console (last lines):\n" + tail)
        problems.append("the VM never reached the end of /init")
    for name, code in re.findall(r"LOCUS-VM-EXIT (\S+)=(\d+)", text):
        if code != "0":
            problems.append("%s exited with %s" % (name, code))
    summary = re.search(r"LOCUS-NUMA-CHECKS nodes=(\d+) pass=(\d+) fail=(\d+) "
                        r"na=(\d+)", text)
    if not summary:
        problems.append("no LOCUS-NUMA-CHECKS line")
    elif summary.group(1) != str(args.nodes) or summary.group(3) != "0" or \
            summary.group(4) != "0":
        problems.append("checks: " + summary.group(0) +
                        " (want nodes=%d, fail=0, na=0)" % args.nodes)
    migrate = re.search(r"LOCUS-NUMA-MIGRATE nodes=(\d+) pass=(\d+) "
                        r"fail=(\d+) na=(\d+)", text)
    if any(t[0] == "test_numa_migrate" for t in tests):
        if not migrate:
            problems.append("no LOCUS-NUMA-MIGRATE line")
        elif migrate.group(1) != str(args.nodes) or migrate.group(3) != "0" or \
                migrate.group(4) != "0":
            problems.append("migrate checks: " + migrate.group(0) +
                            " (want nodes=%d, fail=0, na=0)" % args.nodes)
    block = re.search(r"LOCUS-VM-JSON-BEGIN\n(.*)LOCUS-VM-JSON-END", text, re.S)
    if not block:
        problems.append("no locus numa --json output")
    else:
        problems += check_numa_json(block.group(1), args.nodes)
    if args.remote_process:
        problems += check_remote(text, args.nodes - 1)
    passed = int(summary.group(2)) if summary else 0
    if problems:
        for problem in problems:
            say("FAIL: " + problem)
        print("LOCUS-NUMA-VM: FAIL checks_passed=%d problems=%d"
              % (passed, len(problems)))
        return 1
    print("LOCUS-NUMA-VM: PASS nodes=%d checks_passed=%d"
          % (args.nodes, passed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
