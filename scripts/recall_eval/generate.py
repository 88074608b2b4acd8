#!/usr/bin/env python3
"""Generates the recall development set: long multi-session chats between two people, with
planted facts, paraphrased questions about them and distractors (stdlib only, deterministic
from the seed).

    python3 scripts/recall_eval/generate.py                      # writes devset.jsonl beside it
    python3 scripts/recall_eval/generate.py -n 20 --seed 7 -o /tmp/big.jsonl

One JSON object per line and conversation:
    {"id", "participants": [A, B], "seed",
     "messages": [{"role", "content"}],          # A = user, B = assistant, session markers = system
     "questions": [{"question", "category", "evidence": [message indexes, 0-based], "answer",
                    "subject", "template", ("stale": [...]), ("date_evidence": index)}]}

Categories: single-hop (one evidence message), multi-hop (two, in different sessions, that
together answer), temporal (the answer needs the session's date: `date_evidence` is the session
marker), preference, update (the fact changed later: `evidence` is the newest statement,
`stale` the superseded one). The material (templates, word lists, filler) is in bank.py.
"""
import argparse
import datetime
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bank  # noqa: E402
import lexical  # noqa: E402

SLOT = re.compile(r"\{([A-Za-z_]+?)(\d*)(?:\[(\d+)\])?\}")
SPECIAL = {"P", "O", "rel", "when"}

# Facts that cannot all be true of one person at once: at most one template of each group per
# participant (asked facts and near-misses alike).
EXCLUSIVE = [
    {"new_job", "job_update", "started_job", "final_interview", "title_update"},
    {"pet_adopted", "pets_update", "pet_surgery", "pet_died"},
    {"relationship_update", "engaged", "partner_promotion", "anniversary_gift", "first_date_place",
     "wedding_date_update", "living_update"},
    {"commute_single", "commute_update", "move_commute"},
    {"living_update", "flatmate"},
    {"kid_activity", "kid_sport"},
    {"degree", "grad_school", "major_update", "final_exam"},
    {"instrument", "instrument_update", "cousin_band"},
    {"niece", "niece_born"},
    {"marathon_signup", "goal_update", "half_marathon"},
    {"uncle_car", "car_update"},
    {"book_club", "mentor_book", "book_update"},
    {"wedding_speech", "wedding_toast"},
    {"hometown", "going_home"},
    {"workout_update", "fit_pref", "physio_knee"},
    {"dream_biz", "launch_biz"},
    {"lost_item", "lost_phone"},
    {"cast_off", "bike_fall"},
    {"trip_update", "language_trip", "language"},
    {"hobby", "whittle"},
]
GROUPS = defaultdict(set)
for _n, _group in enumerate(EXCLUSIVE):
    for _key in _group:
        GROUPS[_key].add(_n)


class Filler:
    """Slot values of one fact instance, drawn on first use (so values may hold slots)."""

    def __init__(self, rng, avoid=None):
        self.rng = rng
        self.values = {}
        self.taken = defaultdict(list)   # base -> values drawn for it here
        self.avoid = avoid or {}         # base -> values to avoid (a near-miss differs)

    def value(self, base, suffix):
        key = base + suffix
        if key not in self.values:
            pool = bank.SLOTS.get(base) or bank.FILLER_SLOTS[base]
            fresh = [v for v in pool if v not in self.taken[base] and v not in self.avoid.get(base, ())]
            if not fresh:
                fresh = [v for v in pool if v not in self.taken[base]] or list(pool)
            v = self.rng.choice(fresh)
            self.values[key] = v
            self.taken[base].append(v)
        return self.values[key]

    def render(self, text, **special):
        def sub(m):
            base, suffix, index = m.group(1), m.group(2), m.group(3)
            if base in SPECIAL and not suffix:
                v = special[base]
            else:
                v = self.value(base, suffix)
            return v[int(index)] if index is not None else v

        for _ in range(4):
            new = SLOT.sub(sub, text)
            if new == text:
                break
            text = new
        return text


def cap(text):
    return text[:1].upper() + text[1:]


def fmt_date(d):
    return f"{d.day} {bank.MONTHS[d.month - 1]} {d.year}"


def resolve_when(rel, d):
    """What a relative time said in a session dated `d` means."""
    if rel == "yesterday":
        return fmt_date(d - datetime.timedelta(days=1))
    if rel == "this morning":
        return fmt_date(d)
    if rel == "two days ago":
        return fmt_date(d - datetime.timedelta(days=2))
    if rel == "last weekend":
        return f"the weekend before {fmt_date(d)}"
    if rel == "last week":
        return f"the week before {fmt_date(d)}"
    if rel == "last month":
        first = d.replace(day=1) - datetime.timedelta(days=1)
        return f"{bank.MONTHS[first.month - 1]} {first.year}"
    if rel.startswith("last "):
        wd = bank.WEEKDAYS.index(rel[5:])
        back = (d.weekday() - wd) % 7 or 7
        return fmt_date(d - datetime.timedelta(days=back))
    raise ValueError(rel)


class Session:
    def __init__(self, size, starter, date):
        self.size = size
        self.date = date
        self.speakers = [(starter + k) % 2 for k in range(size)]
        self.turns = [None] * size   # (speaker, text, tag)

    def free(self, speaker):
        return [k for k in range(2, self.size - 2)
                if self.speakers[k] == speaker and self.turns[k] is None]


def make_sessions(rng, total):
    n = max(2, round(total / 28.5))
    sizes = [rng.randint(15, 40) for _ in range(n)]
    target = total - n   # every session also has its marker message
    while sum(sizes) != target:
        i = rng.randrange(n)
        if sum(sizes) < target and sizes[i] < 40:
            sizes[i] += 1
        elif sum(sizes) > target and sizes[i] > 15:
            sizes[i] -= 1
    day = datetime.date(2022, 1, 1) + datetime.timedelta(days=rng.randrange(540))
    sessions = []
    for size in sizes:
        sessions.append(Session(size, rng.randint(0, 1), day))
        day += datetime.timedelta(days=rng.randint(2, 21))
    return sessions


def filler_text(rng, dense=False):
    """A small-talk turn (unrendered): a reaction, a remark or a question, or a mix. `dense`:
    two to four remarks, sometimes with a question, as the turns of a chat where every turn
    says something (the answer sits among long messages, not among "Lol.")."""
    if dense:
        text = " ".join(rng.sample(bank.SMALLTALK, rng.randint(2, 4)))
        if rng.random() < 0.3:
            text += " " + rng.choice(bank.QUESTIONS)
        return text
    r = rng.random()
    if r < 0.25:
        text = rng.choice(bank.SHORT)
    elif r < 0.45:
        text = rng.choice(bank.REACTIONS)
    elif r < 0.85:
        text = rng.choice(bank.SMALLTALK)
        if rng.random() < 0.3:
            text = rng.choice(bank.REACTIONS) + " " + text
        if rng.random() < 0.25:
            text += " " + rng.choice(bank.FOLLOWUPS)
    else:
        text = rng.choice(bank.QUESTIONS)
        if rng.random() < 0.3:
            text = rng.choice(bank.SMALLTALK) + " " + text
    return text


def make_conversation(rng, conv_id, names, close_share=0.5, long_share=0.4, speaker_in_text=False,
                      dense=False):
    sessions = make_sessions(rng, rng.randint(500, 700))
    n_sess = len(sessions)
    asked_span = n_sess - 2    # no evidence in the last two sessions (the pack's history)
    used_groups = {0: set(), 1: set()}
    used_keys = {0: set(), 1: set()}
    facts = []
    planted = []   # (session, position, speaker, text, fact index, role in the fact)

    def place(speaker, text, tag, sessions_allowed):
        choices = [s for s in sessions_allowed if sessions[s].free(speaker)]
        if not choices:
            return None
        s = rng.choice(choices)
        k = rng.choice(sessions[s].free(speaker))
        sessions[s].turns[k] = (speaker, text, tag)
        return s, k

    def allowed(key, who):
        return key not in used_keys[who] and not (GROUPS[key] & used_groups[who])

    def claim(key, who):
        used_keys[who].add(key)
        used_groups[who] |= GROUPS[key]

    templates = list(bank.TEMPLATES)
    rng.shuffle(templates)
    wanted = rng.randint(25, 40)
    for t in templates:
        if len(facts) == wanted:
            break
        subject = rng.randint(0, 1)
        if not allowed(t["key"], subject):
            subject = 1 - subject
            if not allowed(t["key"], subject):
                continue
        other = 1 - subject
        filler = Filler(rng)
        rel = rng.choice(bank.RELS) if t["cat"] == "temporal" else None
        lines = [cap(filler.render(ev, O=names[other], rel=rel)) for ev in t["ev"]]
        fact = {"t": t, "subject": subject, "filler": filler, "rel": rel, "where": []}
        # Evidence sessions: one line anywhere before the last two sessions; two lines in two
        # sessions in order (an update at least two sessions after the old statement).
        if len(lines) == 1:
            spots = [place(subject, lines[0], ("ev", len(facts), 0), range(asked_span))]
        else:
            gap = 2 if t["cat"] == "update" else 1
            s1_max = asked_span - 1 - gap
            first = place(subject, lines[0], ("ev", len(facts), 0), range(0, s1_max + 1))
            second = place(subject, lines[1], ("ev", len(facts), 1),
                           range(first[0] + gap, asked_span)) if first else None
            spots = [first, second]
        if None in spots:
            for spot in spots:
                if spot:
                    sessions[spot[0]].turns[spot[1]] = None
            continue
        fact["where"] = spots
        claim(t["key"], subject)
        facts.append(fact)
        fi = len(facts) - 1
        # A near-miss: the same kind of fact about the other participant, other values.
        if rng.random() < 0.5 and allowed(t["key"], other):
            avoid = defaultdict(set)
            for key, v in filler.values.items():
                avoid[SLOT.match("{" + key + "}").group(1)].add(v)
            nm = Filler(rng, avoid)
            nm_rel = rng.choice([r for r in bank.RELS if r != rel]) if rel else None
            line = t["ev"][-1] if len(t["ev"]) > 1 else t["ev"][0]
            text = cap(nm.render(line, O=names[subject], rel=nm_rel))
            if text not in lines and place(other, text, ("near", fi, 0), range(n_sess)):
                claim(t["key"], other)
        # Distractors: the question's surface words, in unrelated lines, by either person.
        for d in t["d"]:
            speaker = rng.randint(0, 1)
            text = cap(filler.render(d, O=names[1 - speaker]))
            place(speaker, text, ("distractor", fi, 0), range(n_sess))

    # A reaction after most evidence lines; greetings, farewells and small talk elsewhere.
    for sess in sessions:
        for k, turn in enumerate(sess.turns):
            if turn and turn[2][0] == "ev" and k + 1 < sess.size - 2 and sess.turns[k + 1] is None \
                    and rng.random() < 0.6:
                sp = sess.speakers[k + 1]
                text = Filler(rng).render(rng.choice(bank.NEUTRAL_REACTIONS), O=names[1 - sp])
                sess.turns[k + 1] = (sp, text, ("filler",))
        last = sess.size - 1
        for k in range(sess.size):
            if sess.turns[k] is not None:
                continue
            sp = sess.speakers[k]
            pool = (bank.GREETINGS if k == 0 else bank.GREETING_REPLIES if k == 1 else
                    bank.FAREWELLS if k == last - 1 else bank.FAREWELL_REPLIES if k == last else None)
            text = Filler(rng).render(rng.choice(pool) if pool else filler_text(rng, dense), O=names[1 - sp])
            sess.turns[k] = (sp, cap(text), ("filler",))

    # Some evidence comes inside a longer message: small talk before it (and sometimes after),
    # so that a quote of the message's first match or its start misses the answer.
    for sess in sessions:
        for k, turn in enumerate(sess.turns):
            if turn and turn[2][0] in ("ev", "stale") and rng.random() < long_share:
                sp, text, tag = turn
                before = [cap(Filler(rng).render(line, O=names[1 - sp]))
                          for line in rng.sample(bank.SMALLTALK, rng.randint(2, 4))]
                after = [cap(Filler(rng).render(rng.choice(bank.FOLLOWUPS), O=names[1 - sp]))
                         for _ in range(rng.random() < 0.3)]
                sess.turns[k] = (sp, " ".join(before + [text] + after), tag)

    # Flatten. Each session is dated by its marker and by its messages' times (a minute or two
    # apart); the speaker is the message's `name`, or the start of its text with
    # `speaker_in_text` (the set before Recall III).
    messages, where = [], {}
    markers = []
    for s, sess in enumerate(sessions):
        hh, mm = rng.randint(7, 22), rng.choice(range(0, 60, 5))
        start = datetime.datetime.combine(sess.date, datetime.time(hh, mm), tzinfo=datetime.timezone.utc)
        markers.append(len(messages))
        messages.append({"role": "system",
                         "content": f"[Session {s + 1}, {fmt_date(sess.date)}, {hh}:{mm:02d}]",
                         "time": start.strftime("%Y-%m-%dT%H:%M:%SZ")})
        for k, (sp, text, tag) in enumerate(sess.turns):
            where[(s, k)] = len(messages)
            at = start + datetime.timedelta(minutes=1 + 2 * k)
            message = {"role": "user" if sp == 0 else "assistant", "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
            if speaker_in_text:
                message["content"] = f"{names[sp]}: {text}"
            else:
                message["name"], message["content"] = names[sp], text
            messages.append(message)

    questions = []
    for fact in facts:
        t, subject, filler = fact["t"], fact["subject"], fact["filler"]
        idx = [where[spot] for spot in fact["where"]]
        extra = {}
        when = None
        if t["cat"] == "temporal":
            s = fact["where"][0][0]
            when = resolve_when(fact["rel"], sessions[s].date)
            extra["date_evidence"] = markers[s]
        if t["cat"] == "update":
            extra["stale"] = idx[:1]
            idx = idx[1:]
        close = "qk" in t and rng.random() < close_share
        q = filler.render(t["qk"] if close else rng.choice(t["q"]), P=names[subject])
        a = filler.render(t["a"], P=names[subject], when=when)
        drop = frozenset(n.lower() for n in names)
        shared = set(lexical.normalized_tokens(q, drop)) & \
            {w for i in idx for w in lexical.normalized_tokens(messages[i]["content"], drop)}
        questions.append({"question": cap(q), "category": t["cat"], "evidence": idx,
                          "answer": cap(a), "subject": names[subject], "template": t["key"],
                          "form": "close" if close else "paraphrase", "shared_words": len(shared),
                          **extra})
    questions.sort(key=lambda q: q["evidence"][0])
    return {"id": conv_id, "participants": list(names), "messages": messages, "questions": questions}


def generate(n, seed, close_share=0.5, long_share=0.4, speaker_in_text=False, dense=False):
    names = list(bank.NAMES)
    random.Random(f"{seed}-names").shuffle(names)
    if 2 * n > len(names):
        # More conversations than name pairs: pairs repeat, in another order.
        pairs = [(names[(2 * i) % 40], names[(2 * i + 1 + i // 20) % 40]) for i in range(n)]
    else:
        pairs = [(names[2 * i], names[2 * i + 1]) for i in range(n)]
    return [make_conversation(random.Random(f"{seed}-conv-{i}"), f"conv-{i:02d}", pairs[i], close_share,
                              long_share, speaker_in_text, dense)
            for i in range(n)]


def check(conv):
    """The invariants run.py and the figures rely on."""
    msgs = conv["messages"]
    for q in conv["questions"]:
        assert q["subject"] in q["question"], q
        for i in q["evidence"] + q.get("stale", []):
            assert msgs[i].get("name") == q["subject"] or msgs[i]["content"].startswith(q["subject"] + ": "), \
                (q, msgs[i])
        if q["category"] == "multi-hop":
            assert len(q["evidence"]) == 2 and q["evidence"][0] < q["evidence"][1]
        if "date_evidence" in q:
            assert msgs[q["date_evidence"]]["content"].startswith("[Session ")
    assert 500 <= len(msgs) <= 700, len(msgs)


def stats(convs):
    out = sys.stderr
    n_msgs = [len(c["messages"]) for c in convs]
    cats = Counter(q["category"] for c in convs for q in c["questions"])
    n_q = sum(cats.values())
    print(f"conversations: {len(convs)}; messages: {sum(n_msgs)} ({min(n_msgs)}-{max(n_msgs)} each); "
          f"questions: {n_q}", file=out)
    print("questions per category: " + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())), file=out)
    named = total = 0
    overlap = Counter()
    for c in convs:
        a, b = c["participants"]
        for m in c["messages"]:
            if m["role"] == "system":
                continue
            total += 1
            body = m["content"].split(": ", 1)[1] if "name" not in m else m["content"]
            named += a in body or b in body
        for q in c["questions"]:
            overlap[min(q["shared_words"], 2)] += 1
    print(f"messages naming a participant in their text (besides the speaker prefix): "
          f"{named / total:.0%}", file=out)
    print("question/evidence shared content words (stop words, names out, light stemming): "
          + ", ".join(f"{'2+' if k == 2 else k}: {v / n_q:.0%}" for k, v in sorted(overlap.items())),
          file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--conversations", type=int, default=8)
    ap.add_argument("--seed", default="ctxd-recall-dev-1")
    ap.add_argument("--close-share", type=float, default=0.5,
                    help="share of questions asked in their close form (default 0.5)")
    ap.add_argument("--long-share", type=float, default=0.4,
                    help="share of evidence messages padded with small talk before (and after) the fact")
    ap.add_argument("--speaker-in-text", action="store_true",
                    help="start each message with its speaker's name (the set before Recall III) "
                         "instead of keeping the speaker in `name`")
    ap.add_argument("--dense", action="store_true",
                    help="small-talk turns of two to four remarks instead of short reactions: every "
                         "turn says something, as in long real chats")
    ap.add_argument("-o", "--output",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "devset.jsonl"))
    args = ap.parse_args()
    convs = generate(args.conversations, args.seed, args.close_share, args.long_share, args.speaker_in_text,
                     args.dense)
    for c in convs:
        check(c)
    with open(args.output, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    stats(convs)
    print(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.2f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
