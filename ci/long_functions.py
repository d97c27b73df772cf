#!/usr/bin/env python3
"""Prints every non-test function in src/ longer than a limit (by
default 100 lines), longest first, as `LINES FILE:LINE NAME`. It reports; it never
fails a build (tests/it/function_sizes.rs is the check that does).

A function runs from its `fn` line to the first line that is its
indentation followed by `}` (a declaration without a body has none, a body
on one line is one line). Not counted: `tests.rs` files and a
`#[cfg(test)]` module written inline (`#[cfg(test)]` then `mod name {` up
to its closing `}` at column 0), as in ci/sizes.sh.
Usage: ci/long_functions.py [limit]   (run from anywhere)
"""
import os
import re
import sys

FN = re.compile(r'^(\s*)(pub(\([\w:]+\))? )?(const )?(async )?(unsafe )?fn (\w+)')
TEST_MOD = re.compile(r'^(pub(\(\w+\))? )?mod \w+ *\{')


def length(lines, i, indent):
    """Lines of the function whose `fn` is on line `i`: 0 for a declaration
    without a body (`fn f();` in a trait) and 1 for a body on one line."""
    j = i
    while j < len(lines):
        line = lines[j].rstrip()
        if line.endswith('{'):
            break
        if line.endswith(';') and '{' not in line:
            return 0
        if line.endswith('}') and '{' in line:
            return j - i + 1
        j += 1
    while j < len(lines) and lines[j].rstrip() != indent + '}':
        j += 1
    return j - i + 1


def long_functions(root, limit):
    out = []
    for base, _, files in os.walk(os.path.join(root, 'src')):
        for name in files:
            if not name.endswith('.rs') or name == 'tests.rs':
                continue
            path = os.path.join(base, name)
            with open(path, encoding='utf-8') as f:
                lines = f.read().split('\n')
            pending = False
            i = 0
            while i < len(lines):
                line = lines[i]
                if line.startswith('#[cfg(test)]'):
                    pending = True
                    i += 1
                    continue
                if pending and TEST_MOD.match(line):
                    j = i + 1
                    while j < len(lines) and not lines[j].startswith('}'):
                        j += 1
                    i = j + 1
                    pending = False
                    continue
                pending = False
                m = FN.match(line)
                if m:
                    n = length(lines, i, m.group(1))
                    if n > limit:
                        out.append((n, os.path.relpath(path, root), i + 1, m.group(7)))
                i += 1
    return sorted(out, reverse=True)


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = long_functions(root, limit)
    for n, path, line, name in found:
        print(f'{n:6d}  {path}:{line} {name}')
    print(f'{len(found)} non-test functions over {limit} lines')


if __name__ == '__main__':
    main()
