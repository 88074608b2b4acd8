#!/usr/bin/env python3
"""Counts the tokenizer corpus with OpenAI's tiktoken: the oracle ctxd's counts are checked against.

tiktoken downloads its encodings; here the machine is offline, so the encoding files are taken
from the bpe-openai crate's data directory and placed in tiktoken's cache, where tiktoken checks
them against the SHA-256 it pins for OpenAI's published files before using them.

    scripts/tiktoken_oracle.py BPE_OPENAI_DATA_DIR --write   # regenerate tests/data/tiktoken_counts.json
    scripts/tiktoken_oracle.py BPE_OPENAI_DATA_DIR --check   # fail if the committed counts differ
    scripts/tiktoken_oracle.py BPE_OPENAI_DATA_DIR --throughput FILE  # bytes/s on FILE's text
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
        # Median of five 1-second rounds per encoding, like the Rust bench.
        path = Path(sys.argv[3])
        text = path.read_text(encoding="utf-8")
        for name, enc in encodings.items():
            rates, tokens = [], 0
            for _ in range(5):
                start, rounds = time.perf_counter(), 0
                while time.perf_counter() - start < 1.0:
                    tokens = len(enc.encode_ordinary(text))
                    rounds += 1
                rates.append(len(text.encode()) * rounds / (time.perf_counter() - start))
            rates.sort()
            print(json.dumps({"text": path.stem, "encoding": name, "tokens": tokens, "bytes_per_sec": rates[2]}))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
