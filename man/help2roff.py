"""Writes a man page for `locus` or one of its commands from the text the
command prints for --help, so that the page cannot drift from the tool:
meson runs it on the built `locus` at every build (man/meson.build), and
the man-pages test (tests/install/test_man_pages.py) checks that each page
reads, word for word, as the --help it came from.

usage: help2roff.py LOCUS VERSION PAGE OUTPUT [SEE_ALSO...]
  PAGE: locus, or locus-COMMAND[-SUBCOMMAND] (locus-bench-sched);
  SEE_ALSO: the other pages, listed at the end (PAGE itself is left out).

The --help text has a small grammar, which every command's usage keeps:
  - the first block (up to a blank line) is the usage: "usage: " then the
    command lines, continued by indented lines (the SYNOPSIS);
  - a line at column 0 ending in ':' heads the indented lines after it
    (options:, commands:, checking:): OPTIONS and COMMANDS become sections,
    "Exit status..." the EXIT STATUS section, others subsections;
  - an indented line whose text has a gap of two spaces starts an entry:
    the term before the gap, its description after it and on the lines
    indented deeper below; an indented line with no gap is prose;
  - other lines at column 0 are paragraphs, blank lines between them; one
    that starts "Exit status:" opens the EXIT STATUS section.
The page's NAME is the command's summary line in `locus --help` (for a
bench subcommand, the note beside it in `locus bench --help`)."""
import re
import subprocess
import sys

SUBCOMMAND_NOTE = re.compile(r"locus bench (\S+) \[options\]\s+\(([^;)]*)")


def run_help(locus, words):
    result = subprocess.run([locus, *words], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0 or not result.stdout.startswith("usage: "):
        sys.exit(f"help2roff: `locus {' '.join(words)}` exited "
                 f"{result.returncode} without a usage: {result.stderr}")
    return result.stdout


def command_words(page):
    """locus-bench-first-op -> ['bench', 'first-op']."""
    if page == "locus":
        return []
    rest = page[len("locus-"):]
    if rest.startswith("bench-"):
        return ["bench", rest[len("bench-"):]]
    return [rest]


def help_words(words):
    """The arguments that print the --help of the command words."""
    return [*words, "--help"] if words else ["--help"]


def main_summaries(main_help):
    """{command: summary} from the commands block of `locus --help`."""
    summaries = {}
    inside = False
    for line in main_help.splitlines():
        if line == "commands:":
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            name, _, summary = line.strip().partition(" ")
            summaries[name] = summary.strip()
        elif inside:
            break
    return summaries


def summary_of(locus, words):
    if not words:
        # The tool's own line: its --help starts with the usage.
        return "shows the machine as Locus sees it and benchmarks its kernels"
    if len(words) == 1:
        summaries = main_summaries(run_help(locus, ["--help"]))
        if words[0] not in summaries:
            sys.exit(f"help2roff: `locus --help` lists no {words[0]}")
        return summaries[words[0]]
    bench = " ".join(run_help(locus, ["bench", "--help"]).split())
    for name, note in SUBCOMMAND_NOTE.findall(bench):
        if name == words[1]:
            return note.strip()
    sys.exit(f"help2roff: `locus bench --help` has no note for {words[1]}")


def escape(text):
    """Roff for text: backslashes, hyphen-minus (so that options copy as
    typed), quotes, and a control character at a line's start."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = text.replace("'", "\\(aq").replace("`", "\\(ga")
    text = text.replace("^", "\\(ha").replace("~", "\\(ti")
    return "\\&" + text if text[:1] in (".", "'") else text


def term_roff(term):
    """An entry's term: options bold and their values italic; other terms
    (commands, codes) bold."""
    if not term.startswith("-"):
        return "\\fB" + escape(term) + "\\fR"
    parts = []
    for token in term.split(" "):
        style = "B" if token.startswith("-") else "I"
        parts.append(f"\\f{style}{escape(token)}\\fR")
    return " ".join(parts)


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def blocks_of(text):
    block = []
    for line in text.rstrip("\n").splitlines():
        if line.strip():
            block.append(line.rstrip())
        elif block:
            yield block
            block = []
    if block:
        yield block


def entries_roff(lines, out):
    """Indented lines: entries (a term, two spaces, its text, deeper lines
    continuing it) or prose."""
    i = 0
    while i < len(lines):
        base = indent_of(lines[i])
        text = lines[i].strip()
        i += 1
        gap = re.search(r"\S(  +)\S", text)
        continued = []
        # An entry goes on at deeper lines; prose also at lines of its own
        # indent that start no entry.
        while i < len(lines) and (
                indent_of(lines[i]) > base or
                (not gap and indent_of(lines[i]) == base and
                 not re.search(r"\S(  +)\S", lines[i]))):
            continued.append(lines[i].strip())
            i += 1
        if gap:
            term = text[: gap.start(1)]
            first = text[gap.end(1) :]
            out.append(".TP")
            out.append(term_roff(term))
            out.extend(escape(line) for line in [first, *continued])
        else:
            out.append(".IP")
            out.extend(escape(line) for line in [text, *continued])


def section_for(heading):
    lower = heading.lower()
    if lower in ("options", "commands"):
        return heading.upper(), ""
    if lower.startswith("exit status"):
        # "Exit status, every command alike": the rest leads the section.
        rest = heading[len("exit status"):].lstrip(" ,")
        return "EXIT STATUS", rest[:1].upper() + rest[1:]
    return None, heading


def page_roff(page, version, summary, help_text, see_also):
    out = [
        f'.TH {page.upper()} 1 "" "Locus {version}" "Locus Manual"',
        ".\\\" Generated by man/help2roff.py from `"
        + " ".join(["locus", *help_words(command_words(page))])
        + "`; edit the --help text, not this page.",
        ".nh",
        ".ad l",
        ".SH NAME",
        f"{escape(page)} \\- {escape(summary)}",
        ".SH SYNOPSIS",
        ".nf",
    ]
    blocks = list(blocks_of(help_text))
    usage = blocks[0]
    out.append(escape(usage[0][len("usage: "):]))
    out.extend(escape(line[len("usage: "):]) for line in usage[1:])
    out.append(".fi")
    in_description = False
    for block in blocks[1:]:
        first = block[0]
        if indent_of(first) > 0:
            entries_roff(block, out)
            continue
        if first.endswith(":") and len(block) > 1 and indent_of(block[1]) > 0:
            section, lead = section_for(first[:-1])
            if section is not None:
                out.append(f'.SH "{section}"')
                if lead:
                    out.append(".PP")
                    out.append(escape(lead + ":"))
            else:
                out.append(f'.SS "{escape(lead[:1].upper() + lead[1:])}"')
            entries_roff(block[1:], out)
            continue
        if first.startswith("Exit status:"):
            out.append('.SH "EXIT STATUS"')
            block = [first[len("Exit status:"):].strip(), *block[1:]]
        elif not in_description and not out[-1].startswith(".SH"):
            out.append(".SH DESCRIPTION")
            in_description = True
        out.append(".PP")
        out.extend(escape(line) for line in block)
    out.append(".SH \"SEE ALSO\"")
    out.append(",\n".join(f"\\fB{escape(p)}\\fR(1)" for p in see_also))
    return "\n".join(out) + "\n"


def main():
    locus, version, page, output = sys.argv[1:5]
    see_also = [p for p in sys.argv[5:] if p != page]
    words = command_words(page)
    help_text = run_help(locus, help_words(words))
    roff = page_roff(page, version, summary_of(locus, words), help_text,
                     see_also)
    with open(output, "w", encoding="utf-8") as out:
        out.write(roff)


if __name__ == "__main__":
    main()
