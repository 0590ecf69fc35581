#!/usr/bin/env python3
"""The `locus` pictures as a user gets them (docs/PICTURES.md).

usage: svg_test.py --locus LOCUS --views SVG_VIEWS --out DIR [--render] CASE

numa   `locus numa --svg` under LOCUS_TOPOLOGY: synthetic and XML machines
       of 1, 2, 4 and 8 nodes, the real machine measured, and the measured
       maps svg_views draws from made-up figures (1-8 nodes, holes, one
       value, hostile names)
bench  `locus bench gemm|reduce|conv --svg` on the cpu, each point checked
       against the same run's --json, and svg_views' roofline panels
files  --svg to paths that cannot be written: the errno reason, links and
       FIFOs refused, nothing run

Every picture is checked by svg_check.py. With --render each is also drawn
to PNG by rsvg-convert next to it under DIR and the PNG checked; without
rsvg-convert (Debian: librsvg2-bin) that step alone skips (exit 77)."""

import argparse
import errno
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svg_check  # noqa: E402

problems = []
pictures = 0


def run(arguments, env=None, timeout=120):
    environment = dict(os.environ)
    environment.update(env or {})
    return subprocess.run(arguments, env=environment, capture_output=True,
                          text=True, timeout=timeout)


def fail(message):
    problems.append(message)


def check(path, render, kind=None, **expect):
    """The common checks, then the picture's own, then the render."""
    global pictures
    pictures += 1
    picture = svg_check.Picture(path)
    if kind == "numa":
        svg_check.check_heat_maps(picture, **expect)
    elif kind == "bench":
        svg_check.check_roofline(picture, **expect)
    if render and picture.root is not None:
        png = path[:-4] + ".png"
        result = run(["rsvg-convert", path, "-o", png])
        if result.returncode != 0:
            picture.problem("rsvg-convert failed: %s" % result.stderr.strip())
        else:
            svg_check.check_render(picture, png)
    problems.extend(picture.problems)


def hwloc_xml(nodes, cores=2):
    """An hwloc 2 XML machine: nodes packages of one NUMA node and `cores`
    cores each, distances 10 local, 16 within a group of four nodes, 32
    across; returns (xml, distance matrix)."""
    def mask(bits):
        return "0x%x" % sum(1 << b for b in bits)

    def sets(cpus, nodeset):
        return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                'complete_nodeset="%s"' % (cpus, cpus, nodeset, nodeset))
    cpus, numa = mask(range(nodes * cores)), mask(range(nodes))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
           '<topology version="2.0">',
           '<object type="Machine" os_index="0" %s allowed_cpuset="%s" '
           'allowed_nodeset="%s" gp_index="1">' % (sets(cpus, numa), cpus,
                                                   numa)]
    gp = 2
    for n in range(nodes):
        here, node = mask(range(n * cores, (n + 1) * cores)), mask([n])
        out.append('<object type="Package" os_index="%d" %s gp_index="%d">'
                   % (n, sets(here, node), gp))
        out.append('<object type="NUMANode" os_index="%d" %s gp_index="%d" '
                   'local_memory="1073741824"><page_type size="4096" '
                   'count="262144"/></object>' % (n, sets(here, node), gp + 1))
        gp += 2
        for c in range(n * cores, (n + 1) * cores):
            out.append('<object type="Core" os_index="%d" %s gp_index="%d">'
                       '<object type="PU" os_index="%d" %s gp_index="%d"/>'
                       '</object>' % (c, sets(mask([c]), node), gp, c,
                                      sets(mask([c]), node), gp + 1))
            gp += 2
        out.append('</object>')
    out.append('</object>')
    matrix = [[10 if i == j else 16 if i // 4 == j // 4 else 32
               for j in range(nodes)] for i in range(nodes)]
    values = " ".join(str(v) for row in matrix for v in row) + " "
    out.append('<distances2 type="NUMANode" nbobjs="%d" kind="5" '
               'name="NUMALatency" indexing="os">' % nodes)
    out.append('<indexes length="%d">%s </indexes>'
               % (2 * nodes, " ".join(str(i) for i in range(nodes))))
    out.append('<u64values length="%d">%s</u64values>' % (len(values), values))
    out.append('</distances2></topology>')
    return "\n".join(out) + "\n", matrix


def numa_json_and_svg(args, path, env, extra=()):
    result = run([args.locus, "numa", "--json", "--svg", path] + list(extra),
                 env=env)
    if result.returncode != 0:
        fail("locus numa --svg %s exited %d: %s" % (path, result.returncode,
                                                    result.stderr.strip()))
        return None
    try:
        return json.loads(result.stdout)
    except ValueError as error:
        fail("locus numa --json is no JSON (%s)" % error)
        return None


def cells(matrix):
    """A JSON matrix as the flat list of cell values (None: not there)."""
    flat = []
    for row in matrix:
        for v in row:
            flat.append(v if isinstance(v, (int, float)) and v else None)
    return flat


def case_numa(args, out):
    for nodes in (1, 2, 4, 8):
        topology = "synthetic:node:%d core:2 pu:1" % nodes
        path = os.path.join(out, "numa-synthetic-%d.svg" % nodes)
        report = numa_json_and_svg(args, path, {"LOCUS_TOPOLOGY": topology})
        if report is not None:
            check(path, args.render, "numa", nodes=nodes, panels=1,
                  values=[cells(report["distances"])])
        xml, matrix = hwloc_xml(nodes)
        topology = os.path.join(out, "topology-%d.xml" % nodes)
        with open(topology, "w") as f:
            f.write(xml)
        path = os.path.join(out, "numa-xml-%d.svg" % nodes)
        if numa_json_and_svg(args, path, {"LOCUS_TOPOLOGY": topology}):
            check(path, args.render, "numa", nodes=nodes, panels=1,
                  values=[cells(matrix)])
    # This machine, measured: the case the two-panel layout is for.
    path = os.path.join(out, "numa-this-machine.svg")
    report = numa_json_and_svg(args, path, {"LOCUS_TOPOLOGY": ""},
                               ["--bytes", "4M", "--latency-bytes", "4M"])
    if report is not None:
        nodes = len(report["nodes"])
        measured = report.get("bandwidth") and report.get("latency")
        values = None
        if measured:
            try:
                values = [cells(report["bandwidth"]["matrix"]),
                          cells(report["latency"]["matrix"])]
            except (KeyError, TypeError):
                values = None  # a layout this test does not know: shades only
        check(path, args.render, "numa", nodes=nodes,
              panels=2 if measured else 1, values=values)
    for kind, path, *figures in views(args, out, "numa"):
        if kind == "numa":
            check(path, args.render, "numa", nodes=int(figures[0]),
                  panels=int(figures[1]))


def views(args, out, kind):
    """svg_views' pictures: (kind, path, figures...) per line."""
    result = run([args.views, out, kind])
    if result.returncode != 0:
        fail("svg_views exited %d: %s" % (result.returncode,
                                          result.stderr.strip()))
    return [line.split() for line in result.stdout.splitlines() if line]


def case_bench(args, out):
    env = {"XDG_CACHE_HOME": os.path.join(out, "cache")}
    runs = [("gemm", ["--size", "24,64,96x80x72"]),
            ("reduce", ["--size", "4K,256K"]),
            ("conv", ["--size", "1,3,16,16,4,3,3", "--size",
                      "1,8,12,12,8,1,1"])]
    for op, sizes in runs:
        path = os.path.join(out, "bench-%s.svg" % op)
        result = run([args.locus, "bench", op, "--device", "cpu", "--repeat",
                      "2", "--json", "--svg", path] + sizes, env=env,
                     timeout=300)
        if result.returncode != 0:
            fail("locus bench %s --svg exited %d: %s"
                 % (op, result.returncode, result.stderr.strip()))
            continue
        expected = {}
        for r in json.loads(result.stdout)["results"]:
            references = [x for x in r.get("references") or []
                          if x.get("gflops")]
            expected.setdefault(r["device"], []).append(
                (r["shape"], r["gflops"], r["flops"] / r["bytes"],
                 len(references)))
        check(path, args.render, "bench", expected=expected)
    for kind, path, *figures in views(args, out, "bench"):
        if kind == "bench":
            check(path, args.render, "bench")


def expect_refused(args, arguments, path, reason, env=None):
    """locus ... --svg path exits 1 at once, naming the path and reason."""
    started = time.monotonic()
    try:
        result = run([args.locus] + arguments, env=env, timeout=30)
    except subprocess.TimeoutExpired:
        fail("%s hung on %s" % (" ".join(arguments), path))
        return None
    took = time.monotonic() - started
    if result.returncode != 1:
        fail("%s: exit %d, expected 1" % (" ".join(arguments),
                                          result.returncode))
    if path not in result.stderr or reason not in result.stderr:
        fail("%s: stderr does not name %r and %r: %r"
             % (" ".join(arguments), path, reason, result.stderr))
    return result, took


def case_files(args, out):
    scratch = os.path.join(out, "files")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    synthetic = {"LOCUS_TOPOLOGY": "synthetic:node:2 core:1 pu:1"}
    plain = os.path.join(scratch, "plain")
    with open(plain, "w") as f:
        f.write("a regular file\n")
    target = os.path.join(scratch, "target")
    with open(target, "w") as f:
        f.write("must stay\n")
    link = os.path.join(scratch, "link.svg")
    os.symlink(target, link)
    fifo = os.path.join(scratch, "fifo.svg")
    os.mkfifo(fifo)
    refusals = [
        (os.path.join(scratch, "no-such-folder", "x.svg"),
         os.strerror(errno.ENOENT)),
        (scratch, os.strerror(errno.EISDIR)),
        (os.path.join(plain, "x.svg"), os.strerror(errno.ENOTDIR)),
        (link, "symbolic link"),
        (fifo, "not a regular file"),  # nobody reads it: open's ENXIO
        ("/dev/null", "not a regular file"),
    ]
    for path, reason in refusals:
        expect_refused(args, ["numa", "--svg", path], path, reason, synthetic)
        result = expect_refused(args, ["bench", "reduce", "--device", "cpu",
                                       "--size", "4K", "--json", "--svg",
                                       path], path, reason)
        # Refused before any run: no JSON document, no results.
        if result and result[0].stdout.strip():
            fail("bench ran although --svg %s was refused: %r"
                 % (path, result[0].stdout[:200]))
    # A FIFO that has a reader opens at once: refused all the same.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        expect_refused(args, ["numa", "--svg", fifo], fifo,
                       "not a regular file", synthetic)
    finally:
        os.close(reader)
    with open(target) as f:
        if f.read() != "must stay\n":
            fail("the link's target was written through")
    # An existing file is replaced whole, not written over in part.
    long_file = os.path.join(scratch, "long.svg")
    with open(long_file, "w") as f:
        f.write("x" * 1000000)
    result = run([args.locus, "numa", "--svg", long_file], env=synthetic)
    if result.returncode != 0:
        fail("numa --svg over an existing file exited %d: %s"
             % (result.returncode, result.stderr))
    else:
        check(long_file, False)
    for command in (["numa"], ["bench", "reduce"]):
        result = run([args.locus] + command + ["--svg", ""], env=synthetic)
        if result.returncode != 2 or "--svg" not in result.stderr:
            fail("%s --svg '': exit %d, expected 2 naming --svg: %r"
                 % (" ".join(command), result.returncode, result.stderr))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--locus", required=True)
    parser.add_argument("--views", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--render", action="store_true")
    parser.add_argument("case", choices=["numa", "bench", "files"])
    args = parser.parse_args()
    if args.render and not shutil.which("rsvg-convert"):
        print("rsvg-convert not found (Debian: librsvg2-bin): the render "
              "step is skipped")
        return 77
    out = os.path.join(args.out, args.case + ("-render" if args.render
                                              else ""))
    os.makedirs(out, exist_ok=True)
    {"numa": case_numa, "bench": case_bench, "files": case_files}[args.case](
        args, out)
    for problem in problems:
        print("FAIL", problem)
    print("%d pictures checked in %s, %d problems"
          % (pictures, out, len(problems)))
    return 1 if problems or not pictures else 0


if __name__ == "__main__":
    sys.exit(main())
