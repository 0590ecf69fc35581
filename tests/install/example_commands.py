"""Prints the commands an example's top comment gives, one a line: the
comment lines that start with "$ " after the " * " of the comment (a
line ending in a backslash goes on at the next comment line). The
install-examples test runs each, so the comment a user reads is what the
test suite runs. Exits 1 when the example has no top comment or no
command in it."""
import re
import sys

path = sys.argv[1]
text = open(path, encoding="utf-8").read()
if not text.startswith("/*") or "*/" not in text:
    sys.exit(f"{path}: no comment at the top")
comment = text[2 : text.index("*/")].splitlines()
body = [re.sub(r"^ ?\* ?", "", line, count=1) for line in comment]
commands = []
i = 0
while i < len(body):
    match = re.match(r"^\s*\$ (.*)$", body[i])
    i += 1
    if not match:
        continue
    command = match.group(1).rstrip()
    while command.endswith("\\") and i < len(body):
        command = command[:-1].rstrip() + " " + body[i].strip()
        i += 1
    commands.append(command)
if not commands:
    sys.exit(f"{path}: no '$ ' command in the top comment")
print("\n".join(commands))
