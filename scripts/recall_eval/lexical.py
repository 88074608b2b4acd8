"""Lexical retrievers for the recall development set (stdlib only): textbook BM25, BM25 with
stop words, a light stemmer and names removed from the query, and an approximation of
PostgreSQL's ts_rank(document, query, 1), the ranking ctxd's SearchMessages uses.

Each retriever is built over one conversation's messages and returns message indexes, best
first, leaving out messages that share no word with the query.
"""
import math
import re
from collections import Counter

WORD = re.compile(r"\w+")            # textbook: lower-cased word tokens
LETTERS_DIGITS = re.compile(r"[^\W_]+")  # ctxd: maximal runs of letters and digits

# The Snowball English stop words (PostgreSQL's english.stop).
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
her hers herself it its itself they them their theirs themselves what which who whom this that
these those am is are was were be been being have has had having do does did doing a an the and
but if or because as until while of at by for with about against between into through during
before after above below to from up down in out on off over under again further then once here
there when where why how all any both each few more most other some such no nor not only own
same so than too very s t can will just don should now
""".split())


def stem(word):
    """A light suffix stemmer: plurals, -ing, -ed, -ly and a final -e ("races", "raced",
    "racing" and "race" all become "rac"). Not Snowball: a baseline anyone can reimplement."""
    w = word
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, min_len in (("ing", 6), ("ed", 5), ("ly", 6)):
        if len(w) >= min_len and w.endswith(suffix):
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    if len(w) > 4 and w.endswith("e"):
        w = w[:-1]
    return w


def textbook_tokens(text):
    return WORD.findall(text.lower())


def normalized_tokens(text, drop=frozenset()):
    """Letters-and-digits words, lower-cased, stop words (and `drop`) removed, stemmed."""
    return [stem(w) for w in LETTERS_DIGITS.findall(text.lower())
            if w not in STOP_WORDS and w not in drop]


class BM25Okapi:
    """BM25 as rank_bm25's BM25Okapi computes it (k1 = 1.5, b = 0.75; a negative idf, a term
    in more than half the documents, is replaced by 0.25 x the mean idf)."""

    def __init__(self, docs, k1=1.5, b=0.75, epsilon=0.25):
        self.k1, self.b = k1, b
        self.tfs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]
        n = len(docs)
        self.avgdl = sum(self.lens) / max(n, 1)
        df = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        idf = {t: math.log(n - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
        floor = epsilon * (sum(idf.values()) / max(len(idf), 1))
        self.idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}

    def rank(self, query_tokens):
        scores = []
        for i, tf in enumerate(self.tfs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avgdl)
            for q in query_tokens:
                f = tf.get(q)
                if f:
                    s += self.idf[q] * f * (self.k1 + 1) / (f + norm)
            if s > 0:
                scores.append((s, i))
        scores.sort(key=lambda p: (-p[0], -p[1]))   # equal scores: newest first
        return [i for _, i in scores]


class TsRankLike:
    """PostgreSQL's ts_rank(document, query, 1) over an OR query (calc_rank_or): per query
    word found, its occurrences weighted 0.1 x (1, 1/4, 1/9, ...) / (pi^2 / 6), the mean over
    the query's distinct words, divided by log2(1 + the document's word count). Stemming here
    is the light stemmer, not Snowball: an approximation for when no server is running."""

    def __init__(self, docs):
        self.tfs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]

    def rank(self, query_tokens):
        words = list(dict.fromkeys(query_tokens))[:32]
        if not words:
            return []
        scores = []
        for i, tf in enumerate(self.tfs):
            res, hit = 0.0, False
            for w in words:
                n = tf.get(w, 0)
                if n:
                    hit = True
                    res += sum(0.1 / (j * j) for j in range(1, n + 1)) / 1.64493406685
            if hit:
                res /= len(words)
                res /= math.log2(self.lens[i] + 1)
                scores.append((res, i))
        scores.sort(key=lambda p: (-p[0], -p[1]))
        return [i for _, i in scores]


class Retrievers:
    """The baselines over one conversation."""

    def __init__(self, texts, participants):
        self.names = frozenset(n.lower() for n in participants)
        self.textbook = BM25Okapi([textbook_tokens(t) for t in texts])
        norm_docs = [normalized_tokens(t) for t in texts]
        self.normalized = BM25Okapi(norm_docs)
        self.tsrank = TsRankLike(norm_docs)

    def search(self, name, query):
        if name == "bm25":
            return self.textbook.rank(textbook_tokens(query))
        if name == "bm25_norm":
            return self.normalized.rank(normalized_tokens(query, drop=self.names))
        if name == "tsrank_py":
            return self.tsrank.rank(normalized_tokens(query))
        raise ValueError(name)


BASELINES = [
    ("bm25", "BM25Okapi (textbook)"),
    ("bm25_norm", "BM25 + stop words/stem, no names"),
    ("tsrank_py", "ts_rank-like (Python approx.)"),
]
