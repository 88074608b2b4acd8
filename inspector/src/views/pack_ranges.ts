// Which parts of the log a pack holds, and why the rest is not there: each sequence of
// 1..log_last_sequence classified (pack_classify.ts) and explained (pack_why.ts), drawn as a
// strip and listed as ranges linked into the log, with the pack's own counts next to what the
// page found, so that a mismatch shows.

import type { BuildContextResponse } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import { Role } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { h, on, type Child } from "../dom.js";
import { num } from "../format.js";
import { messageHref } from "../routes.js";
import { classify, fateCounts, recalledSequences, type Fate, type PackFacts, type Run } from "./pack_classify.js";
import { anchoredStart, LABELS, span, why } from "./pack_why.js";

/** Builds the same request with newest-that-fits history (for the comparison button). */
export type CompareNewest = () => Promise<BuildContextResponse>;

/** The most ranges the table lists. */
const MAX_ROWS = 500;

/** The strip, the counts and the list of ranges. */
export function rangesElement(id: string, facts: PackFacts, compareNewest: CompareNewest): HTMLElement {
  const stats = facts.res.stats!;
  const classified = classify(facts);
  const { runs } = classified;
  const last = stats.logLastSequence;
  const counts = fateCounts(runs);
  const recalled = recalledSequences(facts.res);
  const shown = runs.slice(0, MAX_ROWS);
  const lastDropped = runs.filter((r) => r.fate === "dropped").at(-1);
  return h("section", { class: "ranges", id: "ranges" },
    h("h3", null, last > 0n ? `The log, #1–#${last}: what the pack holds` : "The log is empty"),
    strip(runs, last),
    h("ul", { class: "legend" }, [...counts].map(([fate, n]) =>
      h("li", { "data-fate": fate, "data-count": n }, h("span", { class: `swatch fate-${fate}` }), `${LABELS[fate]}: ${num(n)}`))),
    checks(facts.res, counts, recalled, [...classified.finals].filter((s) => facts.log.get(s)?.role !== Role.ASSISTANT).length),
    recalled.length > 0 ? h("p", { id: "recalled", "data-count": recalled.length }, `recalled (quoted in the recall turn, ${stats.messagesRecalled} per stats): `,
      recalled.map((s, i) => [i ? ", " : "", h("a", { href: messageHref(id, s), class: "recalled", "data-sequence": s }, `#${s}`)])) : null,
    h("table", { class: "runs" },
      h("thead", null, h("tr", null, h("th", null, "sequences"), h("th", { class: "n" }, "count"), h("th", null, "fate"), h("th", null, "why"))),
      h("tbody", null, shown.map((run) => h("tr", { class: `fate-row-${run.fate}`, "data-fate": run.fate, "data-from": run.from, "data-to": run.to },
        h("td", null, h("a", { href: messageHref(id, run.from) }, `#${run.from}`), run.to > run.from ? ["–", h("a", { href: messageHref(id, run.to) }, `#${run.to}`)] : null),
        h("td", { class: "n" }, num(run.to - run.from + 1n)), h("td", null, LABELS[run.fate]),
        h("td", { class: "why" }, why(run, facts, classified), recalledIn(run, recalled),
          run === lastDropped && anchoredStart(facts) ? compareButton(stats.oldestIncludedSequence, compareNewest) : null))))),
    runs.length > shown.length ? h("p", { class: "note" }, `… ${num(runs.length - shown.length)} more ranges`) : null);
}

function strip(runs: Run[], last: bigint): HTMLElement {
  const el = h("div", { class: "strip", id: "log-strip", role: "img", "aria-label": "the log by fate" });
  const total = Number(last) || 1;
  for (const run of runs) {
    const seg = h("div", { class: `fate fate-${run.fate}`, title: `${span(run.from, run.to)}: ${LABELS[run.fate]}` });
    seg.style.setProperty("width", `${((100 * Number(run.to - run.from + 1n)) / total).toFixed(4)}%`);
    el.append(seg);
  }
  return el;
}

/** The pack's own counts next to what the strip found, so a mismatch shows. */
function checks(res: BuildContextResponse, counts: Map<Fate, number>, recalled: bigint[], blanks: number): HTMLElement {
  const s = res.stats!;
  const item = (label: string, found: number, stat: number, name: string) =>
    h("li", { class: found === stat ? "" : "mismatch" }, `${label}: ${num(found)} found in the pack; ${name} = ${num(stat)}`);
  return h("ul", { class: "checks" },
    item("cleared results", counts.get("cleared") ?? 0, s.toolResultsCleared, "tool_results_cleared"),
    s.toolResultTokensCleared ? h("li", null, `clearing saved ${num(s.toolResultTokensCleared)} tokens (tool_result_tokens_cleared)`) : null,
    h("li", null, `cut outputs: ${num(counts.get("cut") ?? 0)}; truncated = ${s.truncated}`),
    item("final replies omitted", (counts.get("final") ?? 0) - blanks, s.finalAssistantOmitted, "final_assistant_omitted"),
    s.messagesRecalled || recalled.length ? item("recalled messages", recalled.length, s.messagesRecalled, "messages_recalled") : null,
    h("li", null, `history messages included: ${s.messagesIncluded} (considered ${s.messagesConsidered}, dropped ${s.messagesDropped}, tool groups dropped ${s.toolGroupsDropped}, incomplete ${s.incompleteToolGroups})`));
}

function recalledIn(run: Run, recalled: bigint[]): string {
  const quoted = recalled.filter((s) => s >= run.from && s <= run.to);
  return quoted.length ? ` · quoted by recall: ${quoted.map((s) => `#${s}`).join(", ")}` : "";
}

/** "compare with newest-that-fits": the same request with HISTORY_POLICY_NEWEST, and the oldest
 *  sequence its history keeps. */
function compareButton(oldest: bigint, compareNewest: CompareNewest): Child {
  const out = h("span", { class: "compare", id: "compare-newest-result" });
  const button = on(h("button", { type: "button", id: "compare-newest", class: "small" }, "compare with newest-that-fits"), "click", async () => {
    button.disabled = true;
    out.textContent = " building…";
    try {
      const stats = (await compareNewest()).stats!;
      const from = stats.oldestIncludedSequence;
      out.dataset.oldest = String(from);
      out.textContent = from === 0n ? " newest-that-fits keeps no history either"
        : from < oldest ? ` newest-that-fits keeps history from #${from}: ${num(oldest - from)} older log positions (#${from}–#${oldest - 1n}) than this pack`
          : ` newest-that-fits keeps history from #${from} too: nothing more fits`;
    } catch (err) {
      out.textContent = ` the comparison failed: ${err instanceof Error ? err.message : String(err)}`;
    } finally {
      button.disabled = false;
    }
  });
  return [" ", button, out];
}
