#!/usr/bin/env python3
"""Measures recall on the development set: ctxd's SearchMessages and BuildContext recall over
HTTP/JSON, and lexical baselines computed here over the same texts (stdlib only).

    python3 scripts/recall_eval/run.py --url http://127.0.0.1:50051          # all conversations
    python3 scripts/recall_eval/run.py --url http://127.0.0.1:50051 --quick  # 2 conversations (CI)
    python3 scripts/recall_eval/run.py                                       # baselines only
    python3 scripts/recall_eval/run.py --url ... --api-key KEY --json out.json

Each conversation is appended to a new conversation (`<run prefix>/<id>`, so re-runs against
the same server never collide) in batches, with an idempotency key and the expected last
sequence, so a retried batch is never stored twice; message index i is sequence i + 1, which
the append answers confirm. Then, for every question:

- SearchMessages with the question as the query (page_size 10): is any evidence message in the
  top 5, all of them in the top 5, any in the top 10;
- BuildContext with a 2,000-token budget, the question as a pending user message and
  `recall: {max_tokens: 800}`: is an evidence message in the pack, verbatim in the history or
  quoted by the recalled turn (CONTEXT_SOURCE_RECALL, whose excerpts are headed
  `[message <sequence>, <role>]`).

The same three figures are computed for the baselines of lexical.py. HTTP 429 and 503 (and
connection failures) are retried with exponential backoff. Exit status 1 on an error, with the
method and the server's message.
"""
import argparse
import http.client
import json
import os
import random
import re
import statistics
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lexical  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CATEGORIES = ["single-hop", "multi-hop", "temporal", "preference", "update"]
ROLES = {"user": "ROLE_USER", "assistant": "ROLE_ASSISTANT", "system": "ROLE_SYSTEM"}
RECALLED = re.compile(r"\[message (\d+), [^\]]*\]\n")
RETRY_STATUS = {429, 502, 503, 504}


class CtxdError(Exception):
    pass


class Client:
    """ctxd's Connect protocol (POST /ctxd.v1.ContextService/<Method>, proto3 JSON)."""

    def __init__(self, url, api_key=None, tenant=None, timeout=60.0, retries=6):
        self.url = url.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        if tenant:
            self.headers["x-tenant-id"] = tenant
        self.timeout, self.retries = timeout, retries
        self.retried = 0

    def _backoff(self, attempt, retry_after=None):
        self.retried += 1
        delay = min(0.25 * 2 ** attempt, 10.0) * (0.5 + random.random())
        if retry_after:
            try:
                delay = max(delay, float(retry_after))
            except ValueError:
                pass
        time.sleep(delay)

    def health(self):
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=self.timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as e:
            raise CtxdError(f"cannot reach ctxd at {self.url}: {getattr(e, 'reason', e)} "
                            f"(is the server running, and is this its gRPC/HTTP port?)") from None

    def call(self, method, body):
        data = json.dumps(body).encode()
        url = f"{self.url}/ctxd.v1.ContextService/{method}"
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(url, data=data, headers=self.headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    raw = r.read()
                    return json.loads(raw) if raw else {}
            except urllib.error.HTTPError as e:
                raw = e.read().decode(errors="replace")
                if e.code in RETRY_STATUS and attempt < self.retries:
                    self._backoff(attempt, e.headers.get("Retry-After"))
                    continue
                try:
                    err = json.loads(raw)
                    detail = f"{err.get('code', '?')}: {err.get('message', raw)}"
                except ValueError:
                    detail = raw[:500] or e.reason
                hint = ""
                if e.code == 401:
                    hint = " (the server wants an API key: --api-key)"
                elif e.code == 404 and not raw:
                    hint = " (no such route: is --url the ctxd gRPC/HTTP port?)"
                raise CtxdError(f"{method} failed: HTTP {e.code} {detail}{hint}") from None
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as e:
                if attempt < self.retries:
                    self._backoff(attempt)
                    continue
                raise CtxdError(f"{method} failed after {attempt + 1} attempts: "
                                f"{getattr(e, 'reason', e)}") from None
        raise AssertionError("unreachable")


def hit_figures(ranked, evidence):
    ev = set(evidence)
    top5, top10 = set(ranked[:5]), set(ranked[:10])
    return {"any@5": bool(ev & top5), "all@5": ev <= top5, "any@10": bool(ev & top10)}


def squash(text):
    return " ".join(text.split())


def excerpt_matches(excerpt, content):
    """Whether a snippet or recalled excerpt (with `…` where text was cut) comes from `content`."""
    content = squash(content)
    return all(squash(part) in content for part in excerpt.split("…") if part.strip())


def pct(values):
    return sum(values) / len(values) if values else float("nan")


def quantile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def message_of(m):
    """A set message as AppendMessage takes it: the speaker in `name` when the set keeps it
    there, and its time as `occurred_at` (history imported with its times)."""
    out = {"role": ROLES[m["role"]], "content": m["content"]}
    if m.get("name"):
        out["name"] = m["name"]
    if m.get("time"):
        out["occurredAt"] = m["time"]
    return out


def approx_tokens(text):
    """Tokens of a message of `text` (about 4 bytes a token, plus the message's framing)."""
    return len(text.encode()) // 4 + 4


def answer_share(answer, names, texts):
    """The share of the answer's content words (stop words and names out, lightly stemmed)
    present anywhere in `texts`: what a model reading the pack has of the answer."""
    wanted = set(lexical.normalized_tokens(answer, names))
    if not wanted:
        return 1.0
    present = set()
    for t in texts:
        present.update(lexical.normalized_tokens(t))
    return len(wanted & present) / len(wanted)


def append_conversation(client, conv_id, messages, batch_size, created):
    for start in range(0, len(messages), batch_size):
        batch = messages[start:start + batch_size]
        res = client.call("AppendMessage", {
            "conversationId": conv_id,
            "idempotencyKey": f"recall-eval-{start}",
            "expectedLastSequence": start,
            "messages": [message_of(m) for m in batch],
        })
        if start == 0:
            created.append(conv_id)   # exists now: delete it at the end
        first, last = int(res.get("firstSequence", 0)), int(res.get("lastSequence", 0))
        if (first, last) != (start + 1, start + len(batch)):
            raise CtxdError(f"AppendMessage to {conv_id}: messages {start}..{start + len(batch) - 1} "
                            f"got sequences {first}..{last}, expected {start + 1}..{start + len(batch)}")


def evaluate_ctxd(client, conv, conv_id, args, timings, checks):
    """Per question: search figures and what the pack carries."""
    msgs = conv["messages"]
    names = frozenset(n.lower() for n in conv["participants"])
    textbook = lexical.Retrievers([m["content"] for m in msgs], conv["participants"])
    out = []
    for q in conv["questions"]:
        t0 = time.perf_counter()
        res = client.call("SearchMessages", {"conversationId": conv_id, "query": q["question"],
                                             "pageSize": 10})
        timings["search"].append(time.perf_counter() - t0)
        ranked = []
        for h in res.get("hits", []):
            i = int(h["sequence"]) - 1
            ranked.append(i)
            checks["snippets"] += 1
            if not (0 <= i < len(msgs) and excerpt_matches(h.get("snippet", ""), msgs[i]["content"])):
                checks["snippet_mismatch"] += 1
        search = hit_figures(ranked, q["evidence"])

        t0 = time.perf_counter()
        pack = client.call("BuildContext", {
            "conversationId": conv_id,
            "budget": {"maxTokens": args.budget},
            "pendingMessages": [{"role": "ROLE_USER", "content": q["question"]}],
            "recall": {"maxTokens": args.recall_tokens, "maxItems": args.recall_items},
        })
        timings["build"].append(time.perf_counter() - t0)
        history, recalled, texts = set(), set(), []
        for m in pack.get("messages", []):
            source = m.get("source")
            texts.append(m.get("content", ""))
            if source == "CONTEXT_SOURCE_HISTORY" and "sequence" in m:
                history.add(int(m["sequence"]) - 1)
            elif source == "CONTEXT_SOURCE_RECALL":
                parts = RECALLED.split(m.get("content", ""))
                # parts: [header, seq, excerpt, seq, excerpt, ...]
                for seq, excerpt in zip(parts[1::2], parts[2::2]):
                    i = int(seq) - 1
                    recalled.add(i)
                    checks["excerpts"] += 1
                    if not (0 <= i < len(msgs) and excerpt_matches(excerpt.strip(), msgs[i]["content"])):
                        checks["excerpt_mismatch"] += 1
        # What a model reads: ctxd's pack; the same history with textbook BM25's top messages
        # whole in the recall budget (the naive pack); the same history with the evidence whole
        # (the ceiling).
        history_texts = [m.get("content", "") for m in pack.get("messages", [])
                         if m.get("source") != "CONTEXT_SOURCE_RECALL"]
        naive, room = [], args.recall_tokens
        for i in textbook.search("bm25", q["question"])[:30]:
            if i in history or msgs[i]["role"] == "system":
                continue
            cost = approx_tokens(msgs[i]["content"])
            if cost > room:
                continue
            naive.append(msgs[i]["content"])
            room -= cost
        ceiling = [msgs[i]["content"] for i in q["evidence"]]
        words = {"ctxd": answer_share(q["answer"], names, texts),
                 "naive": answer_share(q["answer"], names, history_texts + naive),
                 "ceiling": answer_share(q["answer"], names, history_texts + ceiling)}
        ev = set(q["evidence"])
        by_text = {i for i in ev if any(msgs[i]["content"] in t for t in texts)}
        carried = (history | recalled | by_text) & ev
        stats = pack.get("stats", {})
        out.append({
            "search": search, "ranked": ranked[:10], "answer_words": words,
            "pack": {"any": bool(carried), "all": carried == ev, "via_recall": bool(recalled & ev),
                     "in_history": bool(history & ev),
                     "messages_recalled": int(stats.get("messagesRecalled", 0)),
                     "recall_tokens": int(stats.get("recallTokens", 0)),
                     "total_tokens": int(stats.get("totalTokens", 0))},
        })
    return out


def metric(text, name):
    """The value of the metric line `name value` in Prometheus text (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def wait_for_embeddings(metrics_url, timeout):
    """Polls ctxd's metrics until its embedding backlog is done: nothing queued, no worker busy,
    and the count of embedded messages above 0 and steady for two polls (a conversation waits a
    moment before it is queued, so an idle server right after the appends has not started). An
    error when nothing at all was embedded in 120 s: a hybrid run that would be lexical in truth."""
    deadline, steady, last = time.monotonic() + timeout, 0, None
    t0 = time.perf_counter()
    while time.monotonic() < deadline:
        with urllib.request.urlopen(metrics_url, timeout=10) as r:
            text = r.read().decode()
        queued = metric(text, "ctxd_embedding_queue_conversations")
        busy = metric(text, "ctxd_embedding_workers_busy")
        done = metric(text, "ctxd_embedded_messages_total")
        if done == 0 and time.perf_counter() - t0 > 120:
            sys.exit("error: ctxd embedded nothing in 120 s: is CTXD_EMBEDDINGS_URL right (it ends in "
                     "/v1)? See ctxd's log")
        steady = steady + 1 if (queued == 0 and busy == 0 and done == last and done > 0) else 0
        if steady >= 2:
            print(f"  embeddings done: {int(done)} messages in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)
            return
        last = done
        time.sleep(1.0)
    sys.exit(f"error: the embedding backlog was not done within {timeout:.0f} s")


def summarize(rows, key):
    """Overall and per-category rates of the hit figures of `rows` (question, figures)."""
    res = {f: pct([r[key][f] for _, r in rows]) for f in ("any@5", "all@5", "any@10")}
    res["by_category"] = {c: pct([r[key]["any@5"] for q, r in rows if q["category"] == c])
                          for c in CATEGORIES}
    res["by_overlap"] = {
        "no_shared_word": pct([r[key]["any@5"] for q, r in rows if q.get("shared_words", 0) == 0]),
        "shared_words": pct([r[key]["any@5"] for q, r in rows if q.get("shared_words", 0) > 0])}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(HERE, "devset.jsonl"), help="the set (JSON lines)")
    ap.add_argument("--url", help="ctxd's gRPC/HTTP base URL, e.g. http://127.0.0.1:50051 "
                    "(without it, only the baselines run)")
    ap.add_argument("--api-key", default=os.environ.get("CTXD_API_KEY"),
                    help="sent as 'Authorization: Bearer KEY' (default: $CTXD_API_KEY)")
    ap.add_argument("--tenant", help="x-tenant-id header (auth off only)")
    ap.add_argument("--limit-conversations", type=int, metavar="N", help="only the first N conversations")
    ap.add_argument("--quick", action="store_true", help="2 conversations (CI)")
    ap.add_argument("--json", metavar="FILE", help="write the figures (and per-question results) here")
    ap.add_argument("--budget", type=int, default=2000, help="BuildContext budget.max_tokens")
    ap.add_argument("--recall-tokens", type=int, default=800, help="BuildContext recall.max_tokens")
    ap.add_argument("--recall-items", type=int, default=0,
                    help="BuildContext recall.max_items (0 = the server's default, 40)")
    ap.add_argument("--batch-size", type=int, default=100, help="messages per AppendMessage (max 100 by default)")
    ap.add_argument("--run-prefix", help="conversation id prefix (default: recall-eval-<time>-<pid>)")
    ap.add_argument("--keep", action="store_true", help="keep the conversations (default: delete them)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP request")
    ap.add_argument("--wait-embeddings", metavar="METRICS_URL",
                    help="before searching, wait until ctxd's embedding backlog is done, as its metrics "
                         "(e.g. http://127.0.0.1:9090/metrics) say: no conversation queued, no worker busy")
    ap.add_argument("--embeddings-timeout", type=float, default=3600.0,
                    help="seconds --wait-embeddings waits at most")
    ap.add_argument("--label", default="ctxd SearchMessages", help="the ctxd row's name in the table")
    ap.add_argument("--retries", type=int, default=6, help="retries of a 429/503 or a failed connection")
    args = ap.parse_args()

    try:
        with open(args.data, encoding="utf-8") as f:
            convs = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"error: cannot read {args.data}: {e} (generate it with generate.py)")
    limit = 2 if args.quick else args.limit_conversations
    if limit is not None:
        convs = convs[:limit]
    questions = [(c, q) for c in convs for q in c["questions"]]
    if not questions:
        sys.exit("error: no questions in the selected conversations")

    t_start = time.perf_counter()
    results = {name: [] for name, _ in lexical.BASELINES}
    for c in convs:
        r = lexical.Retrievers([m["content"] for m in c["messages"]], c["participants"])
        for q in c["questions"]:
            for name, _ in lexical.BASELINES:
                ranked = r.search(name, q["question"])
                results[name].append((q, {"search": hit_figures(ranked, q["evidence"]),
                                          "ranked": ranked[:10]}))
    t_baselines = time.perf_counter() - t_start

    ctxd_rows, timings, checks = [], {"append": [], "search": [], "build": []}, None
    client = None
    if args.url:
        client = Client(args.url, args.api_key, args.tenant, args.timeout, args.retries)
        try:
            for attempt in range(args.retries + 1):
                status, body = client.health()
                if status not in RETRY_STATUS or attempt == args.retries:
                    break
                client._backoff(attempt)   # 503: the server is starting or draining
        except CtxdError as e:
            sys.exit(f"error: {e}")
        if status != 200:
            sys.exit(f"error: {client.url}/healthz answered HTTP {status} {body.strip()[:200]!r} "
                     f"(--url should be the server's base URL, e.g. http://127.0.0.1:50051)")
        prefix = args.run_prefix or f"recall-eval-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        checks = {"snippets": 0, "snippet_mismatch": 0, "excerpts": 0, "excerpt_mismatch": 0}
        created = []
        try:
            for c in convs:
                conv_id = f"{prefix}/{c['id']}"
                t0 = time.perf_counter()
                append_conversation(client, conv_id, c["messages"], args.batch_size, created)
                timings["append"].append(time.perf_counter() - t0)
            if args.wait_embeddings:
                wait_for_embeddings(args.wait_embeddings, args.embeddings_timeout)
            for c in convs:
                conv_id = f"{prefix}/{c['id']}"
                rows = evaluate_ctxd(client, c, conv_id, args, timings, checks)
                ctxd_rows.extend(zip(c["questions"], rows))
                print(f"  {c['id']}: {len(c['messages'])} messages, {len(c['questions'])} questions",
                      file=sys.stderr)
        except CtxdError as e:
            sys.exit(f"error: {e}")
        finally:
            if not args.keep:
                for conv_id in created:
                    try:
                        client.call("DeleteConversation", {"conversationId": conv_id})
                    except CtxdError as e:
                        print(f"warning: could not delete {conv_id}: {e}", file=sys.stderr)
        if checks["snippet_mismatch"] or checks["excerpt_mismatch"]:
            sys.exit(f"error: sequence mapping check failed: {checks} (message index i should be "
                     f"sequence i + 1 of a conversation appended in order from empty)")
    t_total = time.perf_counter() - t_start

    # ---- figures
    n_cat = {c: sum(q["category"] == c for _, q in questions) for c in CATEGORIES}
    figures = {}
    if ctxd_rows:
        figures["ctxd"] = {"label": args.label, **summarize(ctxd_rows, "search")}
    for name, label in lexical.BASELINES:
        figures[name] = {"label": label, **summarize(results[name], "search")}
    pack = None
    if ctxd_rows:
        p = [r["pack"] for _, r in ctxd_rows]
        pack = {"any": pct([x["any"] for x in p]), "all": pct([x["all"] for x in p]),
                "via_recall": pct([x["via_recall"] for x in p]),
                "in_history": pct([x["in_history"] for x in p]),
                "by_category": {c: pct([r["pack"]["any"] for q, r in ctxd_rows if q["category"] == c])
                                for c in CATEGORIES},
                "by_overlap": {
                    "no_shared_word": pct([r["pack"]["any"] for q, r in ctxd_rows
                                           if q.get("shared_words", 0) == 0]),
                    "shared_words": pct([r["pack"]["any"] for q, r in ctxd_rows
                                         if q.get("shared_words", 0) > 0])},
                "mean_messages_recalled": statistics.mean(x["messages_recalled"] for x in p),
                "mean_recall_tokens": statistics.mean(x["recall_tokens"] for x in p),
                "mean_total_tokens": statistics.mean(x["total_tokens"] for x in p)}

    short = {"single-hop": "single", "multi-hop": "multi", "temporal": "temporal",
             "preference": "pref", "update": "update"}
    print(f"\n{len(convs)} conversations, {sum(len(c['messages']) for c in convs)} messages, "
          f"{len(questions)} questions (" + ", ".join(f"{short[c]} {n_cat[c]}" for c in CATEGORIES) + ")")
    n_over = sum(q.get("shared_words", 0) > 0 for _, q in questions)
    print(f"{len(questions) - n_over} questions share no content word with their evidence, {n_over} do")
    head = f"{'retriever':<36} {'any@5':>6} {'all@5':>6} {'any@10':>6}  | any@5: " + \
        " ".join(f"{short[c]:>8}" for c in CATEGORIES) + f" | {'no-shared':>9} {'shared':>6}"
    print(head)
    print("-" * len(head))
    for f in figures.values():
        print(f"{f['label']:<36} {f['any@5']:>6.3f} {f['all@5']:>6.3f} {f['any@10']:>6.3f}  |        " +
              " ".join(f"{f['by_category'][c]:>8.3f}" for c in CATEGORIES) +
              f" | {f['by_overlap']['no_shared_word']:>9.3f} {f['by_overlap']['shared_words']:>6.3f}")
    if pack:
        print(f"{'ctxd BuildContext: evidence in pack':<36} {pack['any']:>6.3f} {pack['all']:>6.3f} "
              f"{'':>6}  |        " + " ".join(f"{pack['by_category'][c]:>8.3f}" for c in CATEGORIES) +
              f" | {pack['by_overlap']['no_shared_word']:>9.3f} {pack['by_overlap']['shared_words']:>6.3f}")
        print(f"  (budget {args.budget}, recall max_tokens {args.recall_tokens}: any evidence message "
              f"in the pack {pack['any']:.3f}, all {pack['all']:.3f}; via the recalled turn "
              f"{pack['via_recall']:.3f}, verbatim in history {pack['in_history']:.3f}; "
              f"{pack['mean_messages_recalled']:.1f} messages / {pack['mean_recall_tokens']:.0f} tokens "
              f"recalled per pack)")
    answer = None
    if ctxd_rows:
        answer = {}
        for who in ("ctxd", "naive", "ceiling"):
            shares = [r["answer_words"][who] for _, r in ctxd_rows]
            answer[who] = {"mean": statistics.mean(shares), "all": pct([s == 1.0 for s in shares]),
                           "by_category": {c: statistics.mean([r["answer_words"][who] for q, r in ctxd_rows
                                                               if q["category"] == c] or [0.0])
                                           for c in CATEGORIES}}
        labels = {"ctxd": f"{args.label}: BuildContext",
                  "naive": "naive: history + BM25 top, whole",
                  "ceiling": "ceiling: history + evidence, whole"}
        print(f"\nanswer words in the pack (budget {args.budget}, recall {args.recall_tokens} tokens)")
        head = f"{'pack':<40} {'mean':>6} {'all':>6}  | " + " ".join(f"{short[c]:>8}" for c in CATEGORIES)
        print(head)
        print("-" * len(head))
        for who, label in labels.items():
            a = answer[who]
            print(f"{label:<40} {a['mean']:>6.3f} {a['all']:>6.3f}  | " +
                  " ".join(f"{a['by_category'][c]:>8.3f}" for c in CATEGORIES))
    t = {"baselines_s": round(t_baselines, 3), "total_s": round(t_total, 3)}
    if ctxd_rows:
        t.update({"append_s": round(sum(timings["append"]), 3),
                  "search_ms_p50": round(1000 * quantile(timings["search"], 0.5), 2),
                  "search_ms_p95": round(1000 * quantile(timings["search"], 0.95), 2),
                  "build_ms_p50": round(1000 * quantile(timings["build"], 0.5), 2),
                  "build_ms_p95": round(1000 * quantile(timings["build"], 0.95), 2),
                  "http_retries": client.retried})
        print(f"\ntimes: append {t['append_s']:.2f} s; SearchMessages p50 {t['search_ms_p50']} ms, "
              f"p95 {t['search_ms_p95']} ms; BuildContext p50 {t['build_ms_p50']} ms, "
              f"p95 {t['build_ms_p95']} ms; baselines {t['baselines_s']:.2f} s; total {t['total_s']:.2f} s; "
              f"{client.retried} HTTP retries; {checks['snippets']} snippets and {checks['excerpts']} "
              f"recalled excerpts matched their sequences")
    else:
        print(f"\n(no --url: ctxd not measured) baselines {t['baselines_s']:.2f} s")

    if args.json:
        details = []
        for i, (c, q) in enumerate(questions):
            d = {"conversation": c["id"], "question": q["question"], "category": q["category"],
                 "shared_words": q.get("shared_words"), "evidence": q["evidence"],
                 "top10": {name: results[name][i][1]["ranked"] for name, _ in lexical.BASELINES}}
            if ctxd_rows:
                d["top10"]["ctxd"] = ctxd_rows[i][1]["ranked"]
                d["pack"] = ctxd_rows[i][1]["pack"]
                d["answer_words"] = ctxd_rows[i][1]["answer_words"]
            details.append(d)
        doc = {"data": os.path.relpath(args.data), "conversations": len(convs),
               "messages": sum(len(c["messages"]) for c in convs), "questions": len(questions),
               "questions_by_category": n_cat, "url": args.url, "retrievers": figures,
               "ctxd_pack": pack, "answer_words": answer, "pack_settings": {"budget_max_tokens": args.budget,
                                                    "recall_max_tokens": args.recall_tokens,
                                                    "recall_max_items": args.recall_items},
               "sequence_checks": checks, "timings": t, "per_question": details}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
