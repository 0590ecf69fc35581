#!/usr/bin/env python3
"""Machine-readable output of the `locus` command (docs/JSON.md), read the
way a script would read it: with Python's json module.

    json_documents.py LOCUS DOCS_JSON_MD CASE

Every --json document must open with the common header: schema_version
(the one docs/JSON.md names as current), command, locus_version (the one
`locus --version` prints), host (this machine's name) and timestamp (ISO
8601 UTC, between the moments before and after the run). Then per case:
`numa` gives bandwidth and latency with their repeats, median, min and max;
`bench` gives the slowest run beside the best and the median, and its text
shows the median and the spread; LOCUS_RECORD lines carry timestamp, pid
and the MPI rank.
"""
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)
    return condition


def run(locus, args, env_extra=None, env_drop=()):
    env = dict(os.environ)
    for name in env_drop:
        env.pop(name, None)
    env.update(env_extra or {})
    process = subprocess.Popen([locus] + args, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, text=True)
    out, err = process.communicate(timeout=300)
    if process.returncode != 0:
        failures.append('locus %s: exit status %d\n%s' %
                        (' '.join(args), process.returncode, err))
    return out, err, process.pid


def parse_utc(text, fraction):
    """Seconds since the epoch of '2026-12-03T10:11:12Z' (fraction: with
    '.123456' before the Z); None when text is not that form."""
    pattern = (r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d' +
               (r'\.\d{6}' if fraction else '') + 'Z')
    if not isinstance(text, str) or not re.fullmatch(pattern, text):
        return None
    form = '%Y-%m-%dT%H:%M:%S' + ('.%f' if fraction else '') + 'Z'
    moment = datetime.datetime.strptime(text, form)
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


class Checker:
    def __init__(self, locus, docs):
        self.locus = locus
        with open(docs, encoding='utf-8') as file:
            found = re.search(r'current `schema_version` is \*\*(\d+)\*\*',
                              file.read())
        self.schema_version = int(found.group(1)) if found else None
        expect(found, '%s does not name the current schema_version' % docs)
        version_text, _, _ = run(locus, ['--version'])
        self.version_text = version_text

    def document(self, args, command, env_extra=None):
        """Runs `locus ARGS`, checks the header; the document or None."""
        before = time.time()
        out, _, _ = run(self.locus, args, env_extra)
        after = time.time()
        what = 'locus ' + ' '.join(args)
        try:
            document = json.loads(out)
        except ValueError as error:
            expect(False, '%s: not JSON (%s): %.300s' % (what, error, out))
            return None
        if not expect(isinstance(document, dict), what + ': not an object'):
            return None
        header = list(document)[:5]
        expect(header == ['schema_version', 'command', 'locus_version',
                          'host', 'timestamp'],
               '%s: the document opens with %s' % (what, header))
        version = document.get('schema_version')
        expect(type(version) is int and version == self.schema_version,
               '%s: schema_version %r, docs/JSON.md says %r' %
               (what, version, self.schema_version))
        expect(document.get('command') == command,
               '%s: command %r, expected %r' %
               (what, document.get('command'), command))
        locus_version = document.get('locus_version')
        expect(isinstance(locus_version, str) and
               re.fullmatch(r'\d+\.\d+\.\d+', locus_version) and
               locus_version in self.version_text,
               '%s: locus_version %r is not the one `locus --version` '
               'prints: %r' % (what, locus_version, self.version_text))
        expect(document.get('host') == socket.gethostname(),
               '%s: host %r, this machine is %r' %
               (what, document.get('host'), socket.gethostname()))
        stamp = document.get('timestamp')
        moment = parse_utc(stamp, fraction=False)
        # The stamp is taken to the second, truncated: allow that second.
        expect(moment is not None and before - 1 <= moment <= after,
               '%s: timestamp %r is not ISO 8601 UTC between %s and %s' %
               (what, stamp, before, after))
        return document


def check_matrix(what, matrix, nodes):
    return expect(isinstance(matrix, list) and len(matrix) == nodes and
                  all(isinstance(row, list) and len(row) == nodes
                      for row in matrix),
                  '%s is not a %d x %d matrix: %r' % (what, nodes, nodes,
                                                      matrix))


def check_spread(what, figure, nodes, repeats):
    if not expect(isinstance(figure, dict), what + ' is not an object'):
        return
    expect(figure.get('repeats') == repeats,
           '%s: repeats %r, asked %d' % (what, figure.get('repeats'), repeats))
    expect(figure.get('statistic') == 'median',
           '%s: statistic %r' % (what, figure.get('statistic')))
    matrices = [figure.get(key) for key in ('min', 'matrix', 'max')]
    if not all(check_matrix('%s.%s' % (what, key), matrix, nodes)
               for key, matrix in zip(('min', 'matrix', 'max'), matrices)):
        return
    measured = 0
    for i in range(nodes):
        for j in range(nodes):
            cell = [matrix[i][j] for matrix in matrices]
            if cell == [None, None, None]:
                continue  # a pair that failed, said in measure_error
            measured += 1
            expect(all(isinstance(v, (int, float)) and v > 0 for v in cell)
                   and cell[0] <= cell[1] <= cell[2],
                   '%s[%d][%d]: min, median, max %r' % (what, i, j, cell))
    expect(measured > 0, what + ': no pair measured')


def case_info(checker):
    document = checker.document(['info', '--json'], 'info')
    if document:
        # The older key stays for the scripts that read it.
        expect(document.get('version') == document.get('locus_version'),
               'info: version and locus_version differ')


def case_numa(checker):
    document = checker.document(['numa', '--json', '--repeat', '3', '--bytes',
                                 '4M', '--latency-bytes', '4M'], 'numa')
    if document:
        nodes = len(document.get('nodes', []))
        check_spread('bandwidth', document.get('bandwidth'), nodes, 3)
        check_spread('latency', document.get('latency'), nodes, 3)


def case_numa_synthetic(checker):
    document = checker.document(
        ['numa', '--json'], 'numa',
        {'LOCUS_TOPOLOGY': 'synthetic:node:2 core:1 pu:1'})
    if document:
        expect(document.get('bandwidth') is None and
               document.get('latency') is None,
               'numa on a synthetic topology measured something')


def case_numa_text(checker):
    out, _, _ = run(checker.locus, ['numa', '--repeat', '2', '--bytes', '4M',
                                    '--latency-bytes', '4M'])
    expect('the median of 2 runs' in out,
           'numa: the text does not say how many runs a cell is the '
           'median of:\n' + out)
    for title in ('measured read bandwidth', 'measured latency'):
        lines = out[out.find(title):].splitlines()
        if not expect(len(lines) > 3, 'numa: no "%s" table' % title):
            continue
        header, rule, first_row = lines[1], lines[2], lines[3]
        expect(re.search(r'\d \(\d+%\)$', first_row),
               'numa: "%s" row has no spread: %r' % (title, first_row))
        # The rule spans the figures, right-aligned under their headers.
        expect(len(rule) >= len(header) and len(rule) >= len(first_row),
               'numa: the rule under "%s" is shorter than its table:\n%s' %
               (title, '\n'.join(lines[1:4])))


def case_bench(checker):
    document = checker.document(['bench', 'gemm', '--json', '--size', '16,24',
                                 '--repeat', '3', '--device', 'cpu'], 'bench')
    results = document.get('results') if document else None
    if expect(isinstance(results, list) and len(results) == 2,
              'bench: not 2 results'):
        for result in results:
            times = [result.get(key) for key in
                     ('seconds', 'seconds_median', 'seconds_max')]
            expect(all(isinstance(t, (int, float)) and t > 0 for t in times)
                   and times[0] <= times[1] <= times[2],
                   'bench: best, median, slowest %r' % times)
    out, _, _ = run(checker.locus, ['bench', 'reduce', '--size', '1000,2000',
                                    '--repeat', '3', '--device', 'cpu'])
    # The results table: from its header to the first blank line (the
    # references' table follows).
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith('op ')), len(lines))
    header = lines[start] if start < len(lines) else ''
    expect('median' in header.split() and 'spread' in header.split(),
           'bench: no median and spread columns: %r' % header)
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        rows.append(line)
    expect(len(rows) >= 2 and all(re.search(r' \d+% ', row) for row in rows),
           'bench: rows without a spread:\n' + out)
    expect('spread: (slowest - fastest) / median' in out,
           'bench: the notes do not say what spread is:\n' + out)


def case_bench_sched(checker):
    document = checker.document(['bench', 'sched', '--json', '--op', 'reduce',
                                 '--size', '1000', '--repeat', '2'],
                                'bench sched')
    expect(document is None or isinstance(document.get('results'), list),
           'bench sched: no results')


def case_bench_split(checker):
    document = checker.document(['bench', 'split', '--json', '--size',
                                 '16x16x16', '--repeat', '2'], 'bench split')
    expect(document is None or 'seed' in document, 'bench split: no seed')


def case_calibrate(checker):
    with tempfile.TemporaryDirectory() as cache:
        document = checker.document(['calibrate', '--json', '--device', 'cpu'],
                                    'calibrate', {'XDG_CACHE_HOME': cache})
    devices = document.get('devices') if document else None
    expect(isinstance(devices, list) and len(devices) == 1,
           'calibrate: not one device')


# Every launcher variable the record line reads, cleared before each run.
LAUNCHER_VARIABLES = (
    'OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_LOCAL_RANK',
    'OMPI_COMM_WORLD_LOCAL_SIZE', 'MV2_COMM_WORLD_RANK',
    'MV2_COMM_WORLD_LOCAL_RANK', 'MV2_COMM_WORLD_LOCAL_SIZE', 'PMI_RANK',
    'PMIX_RANK', 'MPI_LOCALRANKID', 'MPI_LOCALNRANKS', 'SLURM_PROCID',
    'SLURM_LOCALID', 'SLURM_NODEID', 'SLURM_STEP_TASKS_PER_NODE')


def case_record(checker):
    launchers = [
        ({}, None, None),
        ({'OMPI_COMM_WORLD_RANK': '3'}, 3, None),
        ({'PMI_RANK': '6', 'MPI_LOCALRANKID': '0', 'MPI_LOCALNRANKS': '1'},
         6, 0),
    ]
    for variables, rank, local_rank in launchers:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, 'record.jsonl')
            variables = dict(variables, LOCUS_RECORD=path)
            before = time.time()
            _, _, pid = run(checker.locus,
                            ['bench', 'reduce', '--size', '1000', '--repeat',
                             '2', '--device', 'cpu'],
                            variables, LAUNCHER_VARIABLES)
            after = time.time()
            what = 'record with %s' % variables
            try:
                with open(path, encoding='utf-8') as file:
                    lines = file.read().splitlines()
            except OSError as error:
                expect(False, '%s: %s' % (what, error))
                continue
        expect(len(lines) >= 3, '%s: %d lines, a warm-up and 2 runs at '
               'least' % (what, len(lines)))
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError as error:
                expect(False, '%s: %r is not JSON: %s' % (what, line, error))
                continue
            expect(list(entry)[:4] == ['timestamp', 'pid', 'rank',
                                       'local_rank'],
                   '%s: the line opens with %s' % (what, list(entry)[:4]))
            moment = parse_utc(entry.get('timestamp'), fraction=True)
            expect(moment is not None and before - 1 <= moment <= after + 1,
                   '%s: timestamp %r' % (what, entry.get('timestamp')))
            expect(entry.get('pid') == pid,
                   '%s: pid %r, the process was %d' %
                   (what, entry.get('pid'), pid))
            expect(entry.get('rank') == rank and
                   entry.get('local_rank') == local_rank,
                   '%s: rank %r local_rank %r, expected %r %r' %
                   (what, entry.get('rank'), entry.get('local_rank'), rank,
                    local_rank))
            expect(entry.get('op') == 'reduce', '%s: op %r' %
                   (what, entry.get('op')))


CASES = {
    'info': case_info,
    'numa': case_numa,
    'numa-synthetic': case_numa_synthetic,
    'numa-text': case_numa_text,
    'bench': case_bench,
    'bench-sched': case_bench_sched,
    'bench-split': case_bench_split,
    'calibrate': case_calibrate,
    'record': case_record,
}


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in CASES:
        sys.exit('usage: json_documents.py LOCUS DOCS_JSON_MD %s' %
                 '|'.join(CASES))
    CASES[sys.argv[3]](Checker(sys.argv[1], sys.argv[2]))
    for failure in failures:
        print('FAIL:', failure)
    print('%s: %s' % (sys.argv[3], 'FAIL' if failures else 'ok'))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
