"""Writes the first ```c block of README.md to a C file, so that the test
suite compiles exactly what the README shows."""
import sys

readme, output = sys.argv[1], sys.argv[2]
lines = open(readme, encoding="utf-8").read().splitlines()
start = lines.index("```c") + 1
end = lines.index("```", start)
with open(output, "w", encoding="utf-8") as out:
    out.write("\n".join(lines[start:end]) + "\n")
