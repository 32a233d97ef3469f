#!/usr/bin/python3
"""Writes one corpus of short documents from Debian packages as TSV for
COPY (one document a line, its text with tabs, newlines and backslashes
turned into spaces), for bench/run-document-bench:

  document_corpus.py gcide     the entries of dict-gcide (the Collaborative
                               International Dictionary of English, ~200k)
  document_corpus.py wordnet   the glosses of wordnet-base's synsets (~117k)
  document_corpus.py packages  the long descriptions of this machine's
                               package index (its Translation-en lists, in
                               APT_LISTS or /var/lib/apt/lists), one a package
  document_corpus.py FILE      a corpus written before (.xz allowed), as it is
"""
import glob
import gzip
import lzma
import os
import re
import subprocess
import sys

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n


def clean(text):
    return re.sub(r"[\t\n\r\\]+", " ", text).strip()


def gcide():
    data = gzip.open("/usr/share/dictd/gcide.dict.dz").read()
    seen = set()
    with open("/usr/share/dictd/gcide.index", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0].startswith("00-database"):
                continue
            off, length = b64(parts[1]), b64(parts[2])
            if off in seen:
                continue
            seen.add(off)
            text = data[off:off + length].decode("utf-8", "replace")
            # the editors' marks carry no words
            text = re.sub(r"\[1913 Webster\]|\[PJC\]|\[WordNet 1\.5\]", " ", text)
            yield clean(text)


def wordnet():
    for pos in ("noun", "verb", "adj", "adv"):
        with open("/usr/share/wordnet/data." + pos, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:
                    continue
                yield clean(line.split(" | ", 1)[1])


def packages():
    # The long descriptions are in the Translation-en lists, which apt does
    # not fetch where Acquire::Languages is "none" (Debian's images); they can
    # be fetched beside the system's lists, as APT_LISTS says.
    lists = os.environ.get("APT_LISTS", "/var/lib/apt/lists")
    paths = sorted(glob.glob(lists + "/*_i18n_Translation-en*"))
    if not paths:
        sys.exit("document_corpus.py: no Translation-en lists in %s; fetch them with\n"
                 "  mkdir -p DIR/partial && apt-get -o Acquire::Languages=en "
                 "-o Dir::State::Lists=DIR update\nand set APT_LISTS=DIR" % lists)
    seen = set()
    for path in paths:
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path], check=True,
                              capture_output=True).stdout.decode("utf-8", "replace")
        for stanza in text.split("\n\n"):
            m = re.search(r"^Package: (\S+)", stanza, re.M)
            d = re.search(r"^Description-en: (.*(?:\n .*)*)", stanza, re.M)
            if not m or not d or m.group(1) in seen:
                continue
            seen.add(m.group(1))
            body = re.sub(r"\n \.?", " ", d.group(1))
            yield clean(body)


def written(path):
    # a corpus written before (a host without the packages), .xz or not:
    # already one document a line
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            yield line.rstrip("\n")


def main():
    name = sys.argv[1]
    corpora = {"gcide": gcide, "wordnet": wordnet, "packages": packages}
    corpus = corpora[name]() if name in corpora else written(name)
    out = sys.stdout
    for body in corpus:
        if body:
            out.write(body + "\n")


if __name__ == "__main__":
    main()
