#!/usr/bin/env python3
"""lit.py - runs the golden tests of tests/lit (Python standard library only).

A test is one file: the input (a module, a schedule, ...) with RUN lines and
CHECK lines in its comments, as LLVM's lit and FileCheck have them:

    // RUN: autopart apply %s --mesh batch=2 --schedule 'tile %%arg0 0 batch; propagate' | filecheck %s
    // CHECK: func.func @main
    // CHECK-NEXT: stablehlo.add

`lit.py [--bin DIR] [--root DIR] FILE...` runs each file's RUN lines in
order with bash (-e -o pipefail), each from the file's directory, with on
PATH: autopart and autopartd (--bin), modelgen, and `filecheck` and `not`
(this script).  A test passes when every RUN line exits 0.  Substitutions:
%s the file, %S its directory, %t a scratch path of this test (%t.mlir,
%t.txt, ... may be used too), %root the source tree, %% a percent sign.
A RUN line ending in a backslash continues on the next RUN line.

`filecheck CHECKFILE [--check-prefix P] [--match-full-lines]
[--strict-whitespace]` reads its input from stdin and checks it against
the P lines of CHECKFILE (P defaults to CHECK):

  P: TEXT         TEXT occurs at or after the end of the previous match
  P-NEXT: TEXT    ... on the line after the previous match's line
  P-SAME: TEXT    ... on the previous match's line, after it
  P-EMPTY:        the line after the previous match's line is empty
  P-NOT: TEXT     TEXT does not occur between the previous match and the
                  next positive one (or the end)
  P-LABEL: TEXT   as P:

TEXT is literal but for {{REGEX}} (Python syntax).  Unless
--strict-whitespace, runs of blanks in TEXT and in the input match as one
and the ends of TEXT are trimmed; with it, TEXT is everything after the
colon and one space (indentation is checked) and blanks match exactly.
--match-full-lines: TEXT must be the whole line.

`not CMD ARGS...` succeeds when CMD exits with a status from 1 to 125
(fails on success and on a crash: a signal, or 126/127 from the shell).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

DIRECTIVES = ("NEXT", "SAME", "EMPTY", "NOT", "LABEL")


class CheckError(Exception):
    pass


def parse_checks(text, prefix, strict):
    """The checks of a file: (kind, pattern, line number)."""
    checks = []
    pat = re.compile(r"(?<![A-Za-z0-9_-])" + re.escape(prefix) + r"(?:-(NEXT|SAME|EMPTY|NOT|LABEL))?:(.*)$")
    for no, line in enumerate(text.split("\n"), 1):
        m = pat.search(line)
        if not m:
            continue
        kind = m.group(1) or "CHECK"
        body = m.group(2)
        if strict:
            body = body[1:] if body.startswith(" ") else body
            body = body.rstrip("\n\r")
        else:
            body = body.strip()
        if kind == "EMPTY" and body.strip():
            raise CheckError(f"{no}: {prefix}-EMPTY takes no text")
        if kind not in ("EMPTY",) and not body.strip():
            raise CheckError(f"{no}: {prefix}{'-' + kind if kind != 'CHECK' else ''}: has no text")
        checks.append(("CHECK" if kind == "LABEL" else kind, body, no))
    return checks


def compile_pattern(body, strict, full):
    out = []
    pos = 0
    while pos < len(body):
        i = body.find("{{", pos)
        if i < 0:
            lit, pos_next, regex = body[pos:], len(body), None
        else:
            j = body.find("}}", i + 2)
            if j < 0:
                raise CheckError(f"unterminated {{{{ in '{body}'")
            lit, regex, pos_next = body[pos:i], body[i + 2:j], j + 2
        if strict:
            out.append(re.escape(lit))
        else:
            out.append(r"[ \t]+".join(re.escape(p) for p in re.split(r"[ \t]+", lit)))
        if regex is not None:
            out.append("(?:" + regex + ")")
        pos = pos_next
    rx = "".join(out)
    if full:
        rx = ("^" if strict else r"^[ \t]*") + rx + ("$" if strict else r"[ \t]*$")
    return re.compile(rx)


def filecheck(check_path, prefix, full, strict, data):
    with open(check_path, encoding="utf-8", errors="replace") as f:
        checks = parse_checks(f.read(), prefix, strict)
    if not any(k != "NOT" for k, _, _ in checks):
        raise CheckError(f"{check_path}: no {prefix}: lines")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    line, col = 0, 0          # where the next match may start
    last_line = -1            # the line of the previous positive match
    pending_not = []

    def where(no):
        return f"{check_path}:{no}"

    def check_nots(end_line, end_col):
        """The pending NOT patterns must not occur from (line, col) to
        (end_line, end_col)."""
        for body, no, rx in pending_not:
            for k in range(line, end_line + 1):
                lo = col if k == line else 0
                hi = end_col if k == end_line else len(lines[k])
                if lo <= hi and rx.search(lines[k][:hi], lo):
                    raise CheckError(f"{where(no)}: {prefix}-NOT: '{body}' found on line {k + 1} of the input:\n"
                                     f"  {lines[k]}")
        pending_not.clear()

    for kind, body, no in checks:
        if kind == "NOT":
            pending_not.append((body, no, compile_pattern(body, strict, False)))
            continue
        rx = None if kind == "EMPTY" else compile_pattern(body, strict, full)
        found = None
        if kind == "CHECK":
            for k in range(line, len(lines)):
                m = rx.search(lines[k], col if k == line else 0)
                if m:
                    found = (k, m.start(), m.end())
                    break
        elif kind in ("NEXT", "EMPTY"):
            k = last_line + 1
            if k < len(lines):
                if kind == "EMPTY":
                    found = (k, 0, 0) if lines[k].strip() == "" else None
                else:
                    m = rx.search(lines[k])
                    found = (k, m.start(), m.end()) if m else None
        elif kind == "SAME":
            if 0 <= last_line < len(lines):
                m = rx.search(lines[last_line], col)
                found = (last_line, m.start(), m.end()) if m else None
        if not found:
            near = lines[last_line + 1] if kind in ("NEXT", "EMPTY") and last_line + 1 < len(lines) else None
            what = {"CHECK": "not found after", "NEXT": "not on the line after", "SAME": "not on the line of",
                    "EMPTY": "no empty line after"}[kind]
            msg = f"{where(no)}: {prefix}{'' if kind == 'CHECK' else '-' + kind}: '{body}': {what} "
            msg += f"input line {last_line + 1}" if last_line >= 0 else "the start"
            if near is not None:
                msg += f"; that line is:\n  {near}"
            elif last_line + 1 < len(lines):
                msg += f"; the input from there:\n" + "\n".join("  " + s for s in lines[last_line + 1:last_line + 9])
            raise CheckError(msg)
        check_nots(found[0], found[1])
        last_line, line, col = found[0], found[0], found[2]
    if lines:
        check_nots(len(lines) - 1, len(lines[-1]))


def run_file(path, bindir, root, keep):
    path = os.path.abspath(path)
    with open(path, encoding="utf-8", errors="replace") as f:  # inputs may hold bad bytes on purpose
        text = f.read()
    runs, cur = [], None
    for no, line in enumerate(text.split("\n"), 1):
        m = re.search(r"(?<![A-Za-z0-9_-])RUN:(.*)$", line)
        if not m:
            if cur is not None:
                raise CheckError(f"{path}:{no}: a RUN line ends in a backslash but this line is no RUN line")
            continue
        body = m.group(1).strip()
        if cur is not None:
            cur[1] += " " + body
        else:
            cur = [no, body]
        if cur[1].endswith("\\"):
            cur[1] = cur[1][:-1].rstrip()
        else:
            runs.append(tuple(cur))
            cur = None
    if not runs:
        raise CheckError(f"{path}: no RUN: line")
    scratch = tempfile.mkdtemp(prefix="autopart-lit-")
    shim = os.path.join(scratch, "bin")
    os.mkdir(shim)
    me = os.path.abspath(__file__)
    for tool in ("filecheck", "not"):
        p = os.path.join(shim, tool)
        with open(p, "w") as f:
            f.write(f'#!/bin/sh\nexec "{sys.executable}" "{me}" {tool} "$@"\n')
        os.chmod(p, 0o755)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([shim, bindir, os.path.join(root, "tests", "models"), env.get("PATH", "")])
    tmp = os.path.join(scratch, os.path.basename(path) + ".tmp")
    subst = {"s": path, "S": os.path.dirname(path), "t": tmp, "root": root, "%": "%"}
    ok = True
    for no, cmd in runs:
        line = re.sub(r"%(root|[sSt%])", lambda m: subst[m.group(1)], cmd)
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", line], cwd=os.path.dirname(path), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.stderr.write(f"{path}:{no}: RUN failed (exit status {proc.returncode}):\n  {line}\n")
            if proc.stdout:
                sys.stderr.write("--- stdout\n" + proc.stdout[-4000:] + ("" if proc.stdout.endswith("\n") else "\n"))
            if proc.stderr:
                sys.stderr.write("--- stderr\n" + proc.stderr[-4000:] + ("" if proc.stderr.endswith("\n") else "\n"))
            ok = False
            break
    if keep:
        sys.stderr.write(f"{path}: scratch files in {scratch}\n")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return ok


def main(argv):
    if len(argv) > 1 and argv[1] == "not":
        if len(argv) < 3:
            sys.stderr.write("not: no command\n")
            return 2
        rc = subprocess.run(argv[2:]).returncode
        if rc == 0:
            sys.stderr.write(f"not: '{' '.join(argv[2:])}' succeeded\n")
            return 1
        if rc < 0 or rc >= 126:
            sys.stderr.write(f"not: '{' '.join(argv[2:])}' crashed or could not run (status {rc})\n")
            return 1
        return 0
    if len(argv) > 1 and argv[1] == "filecheck":
        args, prefix, full, strict = argv[2:], "CHECK", False, False
        files = []
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--check-prefix" and i + 1 < len(args):
                prefix = args[i + 1]
                i += 1
            elif a.startswith("--check-prefix="):
                prefix = a.split("=", 1)[1]
            elif a == "--match-full-lines":
                full = True
            elif a == "--strict-whitespace":
                strict = True
            elif a.startswith("-"):
                sys.stderr.write(f"filecheck: unknown option {a}\n")
                return 2
            else:
                files.append(a)
            i += 1
        if len(files) != 1:
            sys.stderr.write("usage: filecheck CHECKFILE [--check-prefix P] [--match-full-lines] "
                             "[--strict-whitespace] < INPUT\n")
            return 2
        try:
            data = sys.stdin.buffer.read().decode("utf-8", errors="replace")
            filecheck(files[0], prefix, full, strict, data)
        except CheckError as e:
            sys.stderr.write(f"{e}\n")
            return 1
        return 0
    args = argv[1:]
    bindir, root, keep = os.getcwd(), os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), False
    files = []
    i = 0
    while i < len(args):
        if args[i] == "--bin" and i + 1 < len(args):
            bindir = os.path.abspath(args[i + 1])
            i += 1
        elif args[i] == "--root" and i + 1 < len(args):
            root = os.path.abspath(args[i + 1])
            i += 1
        elif args[i] == "--keep":
            keep = True
        else:
            files.append(args[i])
        i += 1
    if not files:
        sys.stderr.write(__doc__)
        return 2
    failed = 0
    for f in files:
        try:
            if not run_file(f, bindir, root, keep):
                failed += 1
        except (CheckError, OSError) as e:
            sys.stderr.write(f"{e}\n")
            failed += 1
    if len(files) > 1:
        sys.stderr.write(f"lit: {len(files) - failed} of {len(files)} passed\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
