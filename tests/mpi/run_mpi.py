#!/usr/bin/env python3
"""Runs a Locus program under mpirun and checks what every rank reported.

  run_mpi.py --mpirun PATH --np N example [--device SEL] -- PROGRAM ARGS...
      PROGRAM is an MPI example (examples/mpi): the job must exit 0, and
      print exactly one line per rank, "rank R/N: ... on DEVICE ...: ok",
      with every rank present once; with --device, every rank's ops must
      have run on that device (the selector from its locus_record).

  run_mpi.py --mpirun PATH --np N info --locus LOCUS [--topology T]
             [--bind none|core]
      runs `locus info --json` as N ranks (each writing its own file) and
      checks the "mpi" object: local ranks 0..N-1 of N, read from the
      launcher's variables. Ranks the launcher left unbound (--bind none)
      must have split the cpus between them without overlap; ranks it
      bound (--bind core) must have kept its binding and said so. With
      --topology (a synthetic description of 2 nodes x 2 cores, no SMT:
      nothing is bound there) and N = 2, rank r must get exactly node r's
      cores.

Open MPI's mpirun gets --oversubscribe (more ranks than cores is fine for a
test) and --bind-to for --bind; other launchers get only -np, and then
either outcome of the binding is accepted.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77
LINE = re.compile(r"^rank (\d+)/(\d+): .* on (\S+) \(.*: (ok|FAILED.*)$")


def launcher_args(mpirun, np, bind=None):
    args = [mpirun, "-np", str(np)]
    try:
        version = subprocess.run([mpirun, "--version"], capture_output=True,
                                 text=True, timeout=60)
        text = version.stdout + version.stderr
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"cannot run {mpirun} --version: {error}")
        sys.exit(1)
    if "Open MPI" in text or "OpenRTE" in text or "Open RTE" in text:
        args.append("--oversubscribe")
        if bind:
            args += ["--bind-to", bind]
    return args


def run(command, timeout):
    print("running:", " ".join(command), flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        print(f"timed out after {timeout} s")
        for stream in (expired.stdout, expired.stderr):
            if stream:
                print(stream if isinstance(stream, str) else stream.decode())
        sys.exit(1)
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    return done


def check_example(options):
    done = run(launcher_args(options.mpirun, options.np) + options.program,
               options.timeout)
    failures = []
    if done.returncode != 0:
        failures.append(f"the job exited with {done.returncode}")
    seen = {}
    for line in done.stdout.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        rank, size, device, verdict = match.groups()
        rank, size = int(rank), int(size)
        if size != options.np:
            failures.append(f"rank {rank} reports {size} ranks")
        if rank in seen:
            failures.append(f"rank {rank} reported twice")
        seen[rank] = device
        if verdict != "ok":
            failures.append(f"rank {rank}: {verdict}")
        if options.device and device != options.device:
            failures.append(f"rank {rank} ran on {device}, not "
                            f"{options.device}")
    missing = sorted(set(range(options.np)) - set(seen))
    if missing:
        failures.append(f"no result line from ranks {missing}")
    return failures


def cpu_set(text):
    cpus = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def check_info(options):
    failures = []
    if options.bind == "none" and len(os.sched_getaffinity(0)) < options.np:
        print(f"fewer cpus than {options.np} ranks: nothing to split")
        sys.exit(SKIP)
    with tempfile.TemporaryDirectory() as folder:
        env_topology = []
        if options.topology:
            env_topology = ["env", "LOCUS_TOPOLOGY=" + options.topology]
        # Each rank writes its own file: JSON from two ranks on one stream
        # would interleave.
        script = ('rank="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID}}}"'
                  '; exec "$@" info --json > "$0/info.$rank.json"')
        args = launcher_args(options.mpirun, options.np, options.bind)
        options.bind = options.bind if "--bind-to" in args else None
        done = run(args + ["sh", "-c", script, folder] + env_topology +
                   [options.locus], options.timeout)
        if done.returncode != 0:
            return [f"the job exited with {done.returncode}"]
        views = []
        for rank in range(options.np):
            path = os.path.join(folder, f"info.{rank}.json")
            try:
                with open(path) as stream:
                    views.append(json.load(stream))
            except (OSError, ValueError) as error:
                return [f"rank {rank}: no readable locus info: {error}"]
    maps = [view.get("mpi") for view in views]
    for rank, mpi in enumerate(maps):
        print(f"rank {rank}: mpi = {json.dumps(mpi)}")
        if not isinstance(mpi, dict):
            failures.append(f"rank {rank}: \"mpi\" is {mpi!r}, not an object")
    if failures:
        return failures
    ranks = sorted(mpi["local_rank"] for mpi in maps)
    if ranks != list(range(options.np)):
        failures.append(f"local ranks are {ranks}")
    for rank, mpi in enumerate(maps):
        if mpi["local_size"] != options.np:
            failures.append(f"rank {rank}: local_size {mpi['local_size']}")
        if set(mpi["cpus"]) != cpu_set(mpi["cpu_list"]):
            failures.append(f"rank {rank}: cpus {mpi['cpus']} disagree with "
                            f"cpu_list {mpi['cpu_list']}")
    narrowed = [mpi["narrowed"] for mpi in maps]
    if options.topology:
        if not all(narrowed):
            failures.append("a synthetic topology binds nothing, so every "
                            "rank must have been narrowed")
        by_rank = {mpi["local_rank"]: mpi for mpi in maps}
        for rank in range(options.np):
            node = views[0]["nodes"][rank]
            mpi = by_rank.get(rank)
            if mpi and (set(mpi["cpus"]) != set(node["cpus"]) or
                        mpi["nodes"] != [node["id"]]):
                failures.append(f"local rank {rank} got cpus {mpi['cpus']} "
                                f"on nodes {mpi['nodes']}, not node "
                                f"{node['id']}'s cpus {node['cpus']}")
        return failures
    if options.bind == "none" and not all(narrowed):
        failures.append(f"unbound ranks, yet narrowed: {narrowed}")
    if options.bind == "core" and any(narrowed):
        failures.append(f"ranks bound by the launcher, yet narrowed: "
                        f"{narrowed}")
    if all(narrowed):
        sets = [set(mpi["cpus"]) for mpi in maps]
        total = sum(len(s) for s in sets)
        if len(set().union(*sets)) != total:
            failures.append(f"the ranks' cpus overlap: {sets}")
    elif any(narrowed):
        failures.append(f"only some ranks were narrowed: {narrowed}")
    else:
        # The launcher bound the ranks itself: its choice stands.
        for rank, mpi in enumerate(maps):
            if "bound" not in mpi["reason"]:
                failures.append(f"rank {rank} not narrowed: {mpi['reason']}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=240)
    modes = parser.add_subparsers(dest="mode", required=True)
    example = modes.add_parser("example")
    example.add_argument("--device")
    example.add_argument("program", nargs=argparse.REMAINDER)
    info = modes.add_parser("info")
    info.add_argument("--locus", required=True)
    info.add_argument("--topology")
    info.add_argument("--bind", choices=("none", "core"))
    options = parser.parse_args()
    if options.mode == "example":
        if options.program and options.program[0] == "--":
            options.program = options.program[1:]
        failures = check_example(options)
    else:
        failures = check_info(options)
    for failure in failures:
        print("FAIL:", failure)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
