"""The man pages say what `locus ... --help` says: each page the build wrote
(man/meson.build, from man/help2roff.py) is rendered with groff as `man`
would show it, and its text, less what a man page adds (the NAME and SEE
ALSO sections, the SYNOPSIS and DESCRIPTION headings), must be the words
of the --help text it came from, in order (compared without case and
without the ':' or ',' that end a heading). The NAME's summary must be the
command's line in `locus --help` (or its note in `locus bench --help`),
and every command and bench subcommand the tool lists must have a page.

usage: test_man_pages.py GROFF LOCUS MAN_DIR PAGE..."""
import re
import subprocess
import sys

ADDED_HEADINGS = {"SYNOPSIS", "DESCRIPTION"}
DROPPED_SECTIONS = {"NAME", "SEE ALSO"}


def run(command):
    return subprocess.run(command, capture_output=True, text=True,
                          check=True).stdout


def words(text):
    return [w.lower().rstrip(":,") for w in text.split() if w.rstrip(":,")]


def help_of(locus, page):
    rest = page[len("locus-"):] if page != "locus" else ""
    if rest.startswith("bench-"):
        rest = "bench " + rest[len("bench-"):]
    return run([locus, *rest.split(), "--help"])


def rendered_sections(groff, path):
    """[(heading, [lines])] of the page as groff's text renders it: a
    heading at column 0, the text indented; no hyphenation (.nh), no bold
    or underline (-P-cbou); the running head and foot dropped."""
    text = run([groff, "-man", "-Tascii", "-P-cbou", "-rcR=1", "-rLL=200n",
                path])
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    sections = []
    for line in lines[1:-1]:
        if not line.startswith(" "):
            sections.append((line, []))
        elif sections:
            sections[-1][1].append(line)
        else:
            raise AssertionError(f"{path}: text before the first heading")
    return sections


def main():
    groff, locus, man_dir, *pages = sys.argv[1:]
    failures = []
    main_help = run([locus, "--help"])
    bench_help = " ".join(run([locus, "bench", "--help"]).split())
    listed = main_help.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    commands = re.findall(r"^  (\S+)  ", listed, re.M)
    # "locus bench reduce|gemm|conv" are bench's own ops, not commands.
    subcommands = [s for s in re.findall(r"locus bench (\S+) \[options\]",
                                         bench_help) if "|" not in s]
    wanted = {"locus"} | {f"locus-{c}" for c in commands if c != "help"}
    wanted |= {f"locus-bench-{s}" for s in subcommands}
    for page in sorted(wanted - set(pages)):
        failures.append(f"{page}: no man page (add it to man/meson.build)")

    for page in pages:
        path = f"{man_dir}/{page}.1"
        sections = rendered_sections(groff, path)
        headings = [h for h, _ in sections]
        if headings[:2] != ["NAME", "SYNOPSIS"] or headings[-1] != "SEE ALSO":
            failures.append(f"{page}: sections {headings}")
            continue
        name = " ".join(" ".join(sections[0][1]).split())
        prefix = f"{page} - "
        summary = name[len(prefix):] if name.startswith(prefix) else None
        source = bench_help if page.startswith("locus-bench-") else main_help
        if page == "locus":
            pass  # the tool's own line, which no --help prints
        elif summary is None or " ".join(words(summary)) not in " ".join(
                words(source)):
            failures.append(f"{page}: NAME {name!r} is not its summary in "
                            "the tool's --help")
        page_words = []
        for heading, body in sections:
            if heading in DROPPED_SECTIONS:
                continue
            if heading not in ADDED_HEADINGS:
                page_words += words(heading)
            page_words += words("\n".join(body))
        help_words = words(help_of(locus, page))
        if help_words[:1] == ["usage"]:
            help_words = help_words[1:]
        if page_words != help_words:
            at = next((i for i, (a, b) in enumerate(zip(page_words,
                      help_words)) if a != b), min(len(page_words),
                                                   len(help_words)))
            failures.append(
                f"{page}: the page and --help differ at word {at}: page "
                f"{page_words[max(0, at - 5):at + 5]}, --help "
                f"{help_words[max(0, at - 5):at + 5]}")
        else:
            print(f"{page}: {len(page_words)} words, as --help")
    for failure in failures:
        print("FAIL:", failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
