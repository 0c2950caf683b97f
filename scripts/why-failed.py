#!/usr/bin/env python3
"""Prints, after a failing ctest run, why each failed test failed: its GoogleTest failure lines (file:line,
the expectation and its values), taken from build/Testing/Temporary/LastTest.log, a few lines each and
at most 60 in all. A CI log that keeps only the end of the output then still says what went wrong."""
import re
import sys

LOG = sys.argv[1] if len(sys.argv) > 1 else "Testing/Temporary/LastTest.log"
MAX_LINES, PER_TEST, WIDTH = 60, 14, 400


def sections(text):
    """(test name, output, passed) for every test the log records."""
    for m in re.finditer(r"^\d+/\d+ Test: (.*?)\n.*?^Output:\n-+\n(.*?)^<end of output>\n(.*?)^-{10,}\n(Test \w+)",
                         text, re.S | re.M):
        yield m.group(1), m.group(2), m.group(4) != "Test Failed"


def failure_lines(output):
    """The lines of a gtest failure ('file:line: Failure' and what follows it, up to the next test
    marker) or of a Python unittest one ('FAIL:'/'ERROR:' and the exception's own lines); or, for a
    test that died, its last lines."""
    lines = output.splitlines()
    picked = []
    for i, line in enumerate(lines):
        if line.endswith(": Failure") or "Failure" in line and re.search(r":\d+: ", line):
            for extra in lines[i:i + 6]:
                if extra.startswith("[ "):
                    break
                picked.append(extra)
        elif line.startswith(("FAIL: ", "ERROR: ")):
            picked.append(line)
        elif re.match(r"^\w+(Error|Exception)\b", line) or line.startswith('  File "') and i + 1 < len(lines) \
                and re.match(r"^\w+(Error|Exception)\b", lines[i + 2] if i + 2 < len(lines) else ""):
            picked += lines[i:i + 2] if line.startswith('  File "') else lines[i:i + 3]
    return picked or lines[-6:]


def main():
    try:
        text = open(LOG, errors="replace").read()
    except OSError as exc:
        print(f"why-failed: cannot read {LOG}: {exc}")
        return
    out = []
    for name, output, passed in sections(text):
        if passed:
            continue
        out.append(f"== {name}")
        out += ["   " + l[:WIDTH] for l in failure_lines(output)[:PER_TEST]]
    if out:
        print("\nWhy each failed test failed (from LastTest.log):")
        print("\n".join(out[:MAX_LINES]))


if __name__ == "__main__":
    main()
