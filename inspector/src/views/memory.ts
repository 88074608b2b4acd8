// The memory view: the rolling summary with its watermark and version, and the working memory
// item by item with links to the messages each item cites. Nothing is written: the summary is
// read with Summarize in PREPARE mode (which stores nothing; keep_recent_tokens at its maximum
// so that nothing is even prepared), the memory with GetWorkingMemory without refresh.

import { api } from "../api.js";
import { SummarizeMode, type Summary } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import type { GlossaryEntry, MemoryItem, WorkingMemory } from "../../../clients/typescript/src/gen/ctxd/v1/memory_pb.js";
import { h, type Child } from "../dom.js";
import { num, time } from "../format.js";
import { messageHref } from "../routes.js";
import type { View } from "../view.js";

/** The memory's categories of items, in the proto's order. */
const CATEGORIES = [
  ["goals", "goals"], ["requirements", "requirements"], ["constraints", "constraints"], ["decisions", "decisions"],
  ["assumptions", "assumptions"], ["openQuestions", "open questions"], ["stakeholders", "stakeholders"],
] as const;

export const memoryView: View = async (ctx) => {
  const status = h("p", { class: "status" }, "loading…");
  ctx.root.append(status);
  const [summary, memory] = await Promise.allSettled([
    api.summarize({ conversationId: ctx.id, mode: SummarizeMode.PREPARE, keepRecentTokens: 0xffffffff }),
    api.getWorkingMemory({ conversationId: ctx.id }),
  ]);
  if (!ctx.live()) return;
  status.remove();
  if (summary.status === "rejected") ctx.fail(summary.reason);
  else ctx.root.append(summaryElement(ctx.id, summary.value.summary));
  if (memory.status === "rejected") ctx.fail(memory.reason);
  else if (memory.value.memory) ctx.root.append(memoryElement(ctx.id, memory.value.memory));
};

function summaryElement(id: string, s: Summary | undefined): HTMLElement {
  if (!s) return h("section", { id: "summary", class: "card" }, h("h3", null, "Summary"), h("p", { class: "note" }, "No summary yet."));
  return h("section", { id: "summary", class: "card", "data-through": s.throughSequence, "data-version": s.version },
    h("h3", null, "Summary"),
    h("p", { class: "meta" }, "covers ", h("a", { href: messageHref(id, 1) }, "#1"), "–",
      h("a", { href: messageHref(id, s.throughSequence), class: "watermark" }, `#${s.throughSequence}`),
      ` · version ${s.version} · by ${s.summarizer || "—"} · ${num(s.tokens)} tokens (server default tokenizer) · ${time(s.updatedAt)}`),
    h("div", { class: "content summary-text", id: "summary-text" }, s.text),
    h("p", { class: "note" }, "Read with Summarize in PREPARE mode, which stores nothing."));
}

function memoryElement(id: string, m: WorkingMemory): HTMLElement {
  const empty = m.version === 0n;
  return h("section", { id: "memory", class: "card", "data-version": m.version },
    h("h3", null, "Working memory"),
    empty ? h("p", { class: "note" }, "No working memory yet.") : h("p", { class: "meta" },
      `version ${m.version} · extracted through `, h("a", { href: messageHref(id, m.throughSequence) }, `#${m.throughSequence}`), ` · ${time(m.updatedAt)}`),
    m.summary ? h("div", { class: "content memory-summary" }, m.summary) : null,
    CATEGORIES.map(([key, label]) => category(id, label, m[key])),
    m.glossary.length ? h("div", { class: "category" }, h("h4", null, `glossary (${m.glossary.length})`),
      h("dl", { class: "glossary" }, m.glossary.map((g) => glossaryEntry(id, g)))) : null);
}

function category(id: string, label: string, items: MemoryItem[]): Child {
  if (items.length === 0) return null;
  const current = items.filter((i) => !i.supersededBy).length;
  return h("div", { class: "category", "data-category": label },
    h("h4", null, `${label} (${current}${current < items.length ? ` current, ${items.length - current} superseded` : ""})`),
    h("ul", null, items.map((item) => h("li", { class: item.supersededBy ? "memory-item superseded" : "memory-item", "data-id": item.id },
      h("span", { class: "memory-text" }, item.text), " ", citations(id, item.sourceSequences),
      h("span", { class: "ids" }, ` ${item.id}`),
      item.supersededBy ? h("span", { class: "badge" }, `superseded by ${item.supersededBy}`) : null))));
}

function glossaryEntry(id: string, g: GlossaryEntry): Child {
  return [h("dt", null, g.term), h("dd", null, g.definition, " ", citations(id, g.sourceSequences))];
}

function citations(id: string, sequences: bigint[]): Child {
  if (sequences.length === 0) return h("span", { class: "cites none" }, "(no source)");
  return h("span", { class: "cites" }, "cites ",
    sequences.map((s, i) => [i ? ", " : "", h("a", { class: "citation", href: messageHref(id, s), "data-sequence": s }, `#${s}`)]));
}
