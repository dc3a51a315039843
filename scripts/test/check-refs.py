#!/usr/bin/python3
"""Check the statements of the documents that a change elsewhere can make
false without anyone noticing: cross-references, counts and citations.

- README.sorted-checkpoint: the number of patches it names in words is the
  number in patches/, its list of patches has every one of them, and its
  "sections 1-N" is its last numbered section.
- A section named in quotes after README.md ('README.md, "Which PostgreSQL
  release"') is a heading of README.md; "bench-results/README.md, section
  N" and "bench-results section N" are numbered sections there.
- A title quoted after "see" in the buffer manager's code ('see "Writes in
  flight"', '"Writing neighbours" in README'), in the work tree if there is
  one, titles a comment or a section of storage/buffer.
- Every bench-results/FILE a document names exists, and every file in
  bench-results/ is named by a document (else it belongs to git history).
- The cover letter is at most 200 lines; bench-results/ holds at most 40
  files and its README.md at most 400 lines.

Prints every failure and exits 1 if there is one.  No argument; run from
anywhere (`make check-refs`; .ci/run runs it).
"""
import glob
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def read(rel):
    with open(os.path.join(TOP, rel), encoding="utf-8") as f:
        return f.read()


def fail(msg):
    failures.append(msg)


def documents():
    """The repository's own text files that state things (not work/)."""
    names = ["README.md", "README.sorted-checkpoint", "DEBIAN.md", "UPSTREAM",
             "Makefile", "bench-results/README.md"]
    names += sorted(os.path.relpath(p, TOP) for p in
                    glob.glob(os.path.join(TOP, "scripts", "**", "*"), recursive=True)
                    if os.path.isfile(p))
    names += sorted(os.path.relpath(p, TOP) for p in
                    glob.glob(os.path.join(TOP, "patches", "*")))
    out = {}
    for n in names:
        try:
            out[n] = read(n)
        except (FileNotFoundError, UnicodeDecodeError):
            pass
    return out


WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven",
         "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen",
         "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
         "twenty-one", "twenty-two", "twenty-three", "twenty-four"]


def check_dba_readme(patch_numbers):
    text = read("README.sorted-checkpoint")
    m = re.search(r"plus the ([a-z-]+) patches in patches/", text)
    if not m:
        fail("README.sorted-checkpoint: no \"plus the N patches in patches/\"")
    elif m.group(1) not in WORDS or WORDS.index(m.group(1)) != len(patch_numbers):
        fail(f"README.sorted-checkpoint: \"{m.group(1)} patches\", patches/ has "
             f"{len(patch_numbers)}")
    listed = set(re.findall(r"^  (\d{4})  ", text, re.M))
    for n in patch_numbers:
        if n not in listed:
            fail(f"README.sorted-checkpoint: patch {n} is not in \"The patches\"")
    sections = [int(s) for s in
                re.findall(r"^(\d+)\. .*\n-{3,}$", text, re.M)]
    m = re.search(r"sections 1-(\d+)", text)
    if sections and m and int(m.group(1)) != max(sections):
        fail(f"README.sorted-checkpoint: \"sections 1-{m.group(1)}\", the last is "
             f"{max(sections)}")


def check_section_refs(docs):
    headings = set(re.findall(r"^#+ (.+?)\s*$", read("README.md"), re.M))
    bench = read("bench-results/README.md")
    bench_sections = set(re.findall(r"^(\d+)\. .*\n-{3,}$", bench, re.M))
    for name, text in docs.items():
        flat = re.sub(r"\s*\n\s*#?\s*", " ", text)
        for title in re.findall(r'(?<!bench-results/)README\.md,? \(?(?:section )?"([^"]+)"', flat):
            if title not in headings:
                fail(f"{name}: README.md has no section \"{title}\"")
        for n in re.findall(r"bench-results(?:/README\.md,?)? sections? (\d+)", flat):
            if n not in bench_sections:
                fail(f"{name}: bench-results/README.md has no section {n}")


def check_code_titles():
    tree = os.path.join(TOP, "work", "postgresql")
    bufdir = os.path.join(tree, "src", "backend", "storage", "buffer")
    if not os.path.isdir(bufdir):
        print("check-refs: no work tree, the code's references are not checked")
        return
    sources = sorted(glob.glob(os.path.join(bufdir, "*.c")) +
                     [os.path.join(bufdir, "README"),
                      os.path.join(tree, "src", "include", "storage", "buf_internals.h")])
    titles = set()
    texts = {}
    for p in sources:
        with open(p, encoding="utf-8") as f:
            texts[p] = f.read()
        for line in texts[p].splitlines():
            t = re.sub(r"^\s*(/\*|\*)?\s*", "", line).strip()
            if t:
                titles.add(t)
    for p, text in texts.items():
        flat = re.sub(r"\s*\n\s*\*?\s*", " ", text)
        for title in re.findall(r'(?:see|See) "([^"]+)"', flat) + \
                re.findall(r'"([A-Z][^"]+)" in (?:README|bufwrite\.c|buffer/README)', flat):
            if not any(t == title or t.startswith(title + " (") for t in titles):
                fail(f"{os.path.relpath(p, TOP)}: no section or comment titled \"{title}\"")


def check_bench_files(docs):
    files = sorted(os.path.basename(p) for p in
                   glob.glob(os.path.join(TOP, "bench-results", "*")) if os.path.isfile(p))
    all_text = "\n".join(docs.values())
    for name, text in docs.items():
        for ref in set(re.findall(r"bench-results/([A-Za-z0-9_.-]+\.(?:txt|csv|png|sql)(?:\.gz)?)", text)):
            if ref not in files:
                fail(f"{name}: bench-results/{ref} does not exist")
    # "NAME.txt, .csv and -sample-checkpoints.csv" names NAME.csv and
    # PREFIX-sample-checkpoints.csv for a PREFIX of NAME
    short = []
    for n, text in docs.items():
        flat = re.sub(r"\s+", " ", text)
        tail_re = r"(?:\.(?:txt|csv|png)|-[A-Za-z0-9_-]*\.(?:txt|csv|png))(?:\.gz)?"
        for m in re.finditer(r"([A-Za-z0-9_-]+)\.(?:txt|csv|png)((?:[ ,]+(?:and |or )?"
                             + tail_re + r")+)", flat):
            stem = m.group(1)
            for tail in re.findall(tail_re, m.group(2)):
                short.append((n, stem, tail))
    for f in files:
        if f == "README.md":
            continue
        cited = any(f in text for n, text in docs.items()
                    if n != "bench-results/" + f)
        cited = cited or any(
            n != "bench-results/" + f and
            (f == stem + tail if tail.startswith(".") else
             f.endswith(tail) and stem.startswith(f[:-len(tail)]))
            for n, stem, tail in short)
        if not cited:
            fail(f"bench-results/{f}: no document names it (git history is its place)")
    if len(files) > 40:
        fail(f"bench-results/: {len(files)} files, at most 40")
    n = len(read("bench-results/README.md").splitlines())
    if n > 400:
        fail(f"bench-results/README.md: {n} lines, at most 400")


def check_cover_letter():
    letters = glob.glob(os.path.join(TOP, "patches", "*-0000-cover-letter.txt"))
    for p in letters:
        with open(p, encoding="utf-8") as f:
            n = len(f.read().splitlines())
        if n > 200:
            fail(f"{os.path.relpath(p, TOP)}: {n} lines, at most 200")


def main():
    docs = documents()
    patch_numbers = sorted(re.match(r"v\d+-(\d{4})-", os.path.basename(p)).group(1)
                           for p in glob.glob(os.path.join(TOP, "patches", "v*-*.patch")))
    check_dba_readme(patch_numbers)
    check_section_refs(docs)
    check_code_titles()
    check_bench_files(docs)
    check_cover_letter()
    for f in failures:
        print("check-refs:", f)
    if failures:
        sys.exit(1)
    print("check-refs: cross-references, counts and citations hold")


if __name__ == "__main__":
    main()
