#!/usr/bin/env python3
"""Holds the recall evaluation's figures (run.py --json) to their floors, as the CI's embeddings
tier runs it:

    floors.py LEXICAL.json HYBRID.json

- ctxd lexical finds an evidence message in its top 5 at least as often as textbook BM25
  (BM25Okapi over lowercase words), overall and in every question category, and at least as
  often as BM25 with stemming and stop words whose query leaves out the participants' names;
- ctxd with embeddings at least as often as ctxd lexical, overall and in every category, and
  its BuildContext packs carry an evidence message at least as often;
- what a model reads (Recall III): the share of the answer's words in ctxd's lexical pack is
  at least the naive pack's (the same history with textbook BM25's top messages whole in the
  same recall budget), overall and in every category; with embeddings, at least lexical's.

A category of n questions may fall short by one question (1/n): the quick set has few.
"""
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    lexical, hybrid = load(sys.argv[1]), load(sys.argv[2])
    counts = lexical["questions_by_category"]
    failures = []

    def at_least(what, value, floor, slack=0.0):
        ok = value + slack + 1e-9 >= floor
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {value:.3f} (floor {floor:.3f})")
        if not ok:
            failures.append(what)

    ours, textbook, stemmed = (lexical["retrievers"][k] for k in ("ctxd", "bm25", "bm25_norm"))
    n = lexical["questions"]
    at_least("lexical any@5 against textbook BM25", ours["any@5"], textbook["any@5"])
    at_least("lexical any@5 against stemmed BM25 without names", ours["any@5"], stemmed["any@5"], 1 / n)
    for category, value in ours["by_category"].items():
        at_least(f"lexical any@5, {category}, against textbook BM25", value,
                 textbook["by_category"][category], 1 / max(counts.get(category, 1), 1))
    semantic = hybrid["retrievers"]["ctxd"]
    at_least("hybrid any@5 against lexical", semantic["any@5"], ours["any@5"])
    for category, value in semantic["by_category"].items():
        at_least(f"hybrid any@5, {category}, against lexical", value, ours["by_category"][category],
                 1 / max(counts.get(category, 1), 1))
    at_least("hybrid evidence in pack against lexical", hybrid["ctxd_pack"]["any"], lexical["ctxd_pack"]["any"])
    words, words_hybrid = lexical["answer_words"], hybrid["answer_words"]
    at_least("lexical answer words against the naive pack", words["ctxd"]["mean"], words["naive"]["mean"])
    for category, value in words["ctxd"]["by_category"].items():
        at_least(f"lexical answer words, {category}, against the naive pack", value,
                 words["naive"]["by_category"][category], 1 / max(counts.get(category, 1), 1))
    at_least("hybrid answer words against lexical", words_hybrid["ctxd"]["mean"], words["ctxd"]["mean"])
    if failures:
        sys.exit(f"{len(failures)} floor(s) not met")


if __name__ == "__main__":
    main()
