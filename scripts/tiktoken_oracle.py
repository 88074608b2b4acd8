#!/usr/bin/env python3
"""Counts the tokenizer corpus with OpenAI's tiktoken: the oracle ctxd's counts are checked against.

tiktoken downloads its encodings; here the machine is offline, so the encoding files are taken
from the bpe-openai crate's data directory and placed in tiktoken's cache, where tiktoken checks
them against the SHA-256 it pins for OpenAI's published files before using them.

    scripts/tiktoken_oracle.py BPE_OPENAI_DATA_DIR --write   # regenerate tests/data/tiktoken_counts.json
    scripts/tiktoken_oracle.py BPE_OPENAI_DATA_DIR --check   # fail if the committed counts differ
    scripts/tiktoken_oracle.py BPE_OPENAI_DATA_DIR --throughput FILE  # tokens/s on FILE's text
"""
import gzip, hashlib, json, os, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENCODINGS = ["o200k_base", "cl100k_base"]


def load(data_dir):
    cache = tempfile.mkdtemp(prefix="tiktoken-cache-")
    for name in ENCODINGS:
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        key = hashlib.sha1(url.encode()).hexdigest()
        with gzip.open(Path(data_dir) / f"{name}.tiktoken.gz", "rb") as src:
            (Path(cache) / key).write_bytes(src.read())
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    import tiktoken
    return {name: tiktoken.get_encoding(name) for name in ENCODINGS}


def expand(entry):
    return entry["text"] if "text" in entry else entry["repeat"] * entry["times"]


def counts(encodings):
    corpus = json.loads((ROOT / "tests/data/tokenizer_corpus.json").read_text(encoding="utf-8"))
    return {e["name"]: {n: len(enc.encode_ordinary(expand(e))) for n, enc in encodings.items()} for e in corpus}


def main():
    data_dir, mode = sys.argv[1], sys.argv[2]
    encodings = load(data_dir)
    target = ROOT / "tests/data/tiktoken_counts.json"
    if mode == "--write":
        target.write_text(json.dumps(counts(encodings), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    elif mode == "--check":
        expected = json.loads(target.read_text(encoding="utf-8"))
        actual = counts(encodings)
        if actual != expected:
            print("tiktoken disagrees with tests/data/tiktoken_counts.json", file=sys.stderr)
            sys.exit(1)
        print(f"tiktoken oracle: {len(actual)} corpus entries match the committed counts")
    elif mode == "--throughput":
        text = Path(sys.argv[3]).read_text(encoding="utf-8")
        for name, enc in encodings.items():
            start, rounds, tokens = time.perf_counter(), 0, 0
            while time.perf_counter() - start < 2.0:
                tokens = len(enc.encode_ordinary(text))
                rounds += 1
            elapsed = time.perf_counter() - start
            print(json.dumps({"encoding": name, "tokens": tokens, "bytes_per_sec": len(text.encode()) * rounds / elapsed}))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
