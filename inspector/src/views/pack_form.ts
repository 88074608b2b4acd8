// The pack view's form: every BuildContextRequest option a person debugging a pack changes,
// read into the request exactly as sent (the view shows it as JSON next to the result).

import { create, type DescEnum } from "@bufbuild/protobuf";
import { BuildContextRequestSchema, FinalAssistantSchema, HistoryPolicySchema, ReasoningPolicySchema, type BuildContextRequest } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import { FormatSchema, TokenizerSchema } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { field, h } from "../dom.js";
import { enumLabel } from "../format.js";

/** The form's values (kept per conversation while the page is open). */
export interface PackOptions {
  format: number;
  maxTokens: number;
  reserveOutputTokens: number;
  maxMessages: number;
  maxTurns: number;
  tokenizer: number;
  systemPrompt: string;
  omitSummary: boolean;
  omitWorkingMemory: boolean;
  historyPolicy: number;
  reasoning: number;
  finalAssistant: number;
  toolOutputMaxTokens: number;
  clear: boolean;
  keepRecent: number;
  excludeTools: string;
  clearArguments: boolean;
  recall: boolean;
  recallQuery: string;
  recallMaxTokens: number;
  recallMaxItems: number;
}

export const DEFAULT_OPTIONS: PackOptions = {
  format: 0, maxTokens: 16000, reserveOutputTokens: 0, maxMessages: 0, maxTurns: 0, tokenizer: 0,
  systemPrompt: "", omitSummary: false, omitWorkingMemory: false, historyPolicy: 0, reasoning: 0,
  finalAssistant: 0, toolOutputMaxTokens: 0, clear: false, keepRecent: 0, excludeTools: "",
  clearArguments: false, recall: false, recallQuery: "", recallMaxTokens: 0, recallMaxItems: 0,
};

/** The options as route parameters: those that differ from the defaults, and `build=1`, so that
 *  a link to the pack view builds that pack when opened. */
export function optionsToParams(o: PackOptions): Record<string, string> {
  const params: Record<string, string> = {};
  for (const key of Object.keys(DEFAULT_OPTIONS) as (keyof PackOptions)[]) {
    const value = o[key];
    if (value === DEFAULT_OPTIONS[key]) continue;
    params[key] = typeof value === "boolean" ? (value ? "1" : "0") : String(value);
  }
  params.build = "1";
  return params;
}

/** The options a route's parameters name (the defaults for the others), or `undefined` when
 *  they name none. */
export function optionsFromParams(params: URLSearchParams): PackOptions | undefined {
  const o: Record<string, number | string | boolean> = { ...DEFAULT_OPTIONS };
  let named = false;
  for (const key of Object.keys(DEFAULT_OPTIONS) as (keyof PackOptions)[]) {
    const raw = params.get(key);
    if (raw === null) continue;
    named = true;
    const fallback = DEFAULT_OPTIONS[key];
    if (typeof fallback === "boolean") o[key] = raw === "1" || raw === "true";
    else if (typeof fallback === "number") o[key] = Number.isFinite(Number(raw)) ? Math.max(0, Math.trunc(Number(raw))) : fallback;
    else o[key] = raw;
  }
  return named || params.get("build") === "1" ? (o as unknown as PackOptions) : undefined;
}

/** The request the options stand for. */
export function packRequest(id: string, o: PackOptions): BuildContextRequest {
  return create(BuildContextRequestSchema, {
    conversationId: id,
    budget: { maxTokens: o.maxTokens, reserveOutputTokens: o.reserveOutputTokens, maxMessages: o.maxMessages, maxTurns: o.maxTurns },
    tokenizer: o.tokenizer,
    systemPrompt: o.systemPrompt,
    omitSummary: o.omitSummary,
    omitWorkingMemory: o.omitWorkingMemory,
    toolOutputMaxTokens: o.toolOutputMaxTokens,
    format: o.format,
    historyPolicy: o.historyPolicy,
    reasoning: o.reasoning,
    finalAssistant: o.finalAssistant,
    clearToolResults: o.clear ? { keepRecent: o.keepRecent, excludeTools: names(o.excludeTools), clearArguments: o.clearArguments } : undefined,
    recall: o.recall ? { query: o.recallQuery, maxTokens: o.recallMaxTokens, maxItems: o.recallMaxItems } : undefined,
  });
}

function names(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

/** The form, filled with `o`; `read()` returns what it holds now. */
export function packForm(o: PackOptions): { form: HTMLFormElement; read: () => PackOptions } {
  const c = {
    format: enumSelect("pack-format", FormatSchema, o.format, "OpenAI chat (default)"),
    maxTokens: numberInput("pack-max-tokens", o.maxTokens, 1),
    reserveOutputTokens: numberInput("pack-reserve", o.reserveOutputTokens),
    maxMessages: numberInput("pack-max-messages", o.maxMessages),
    maxTurns: numberInput("pack-max-turns", o.maxTurns),
    tokenizer: enumSelect("pack-tokenizer", TokenizerSchema, o.tokenizer, "server default"),
    systemPrompt: h("textarea", { id: "pack-system-prompt", rows: 3, spellcheck: "false" }),
    omitSummary: checkbox("pack-omit-summary", o.omitSummary),
    omitWorkingMemory: checkbox("pack-omit-memory", o.omitWorkingMemory),
    historyPolicy: enumSelect("pack-history-policy", HistoryPolicySchema, o.historyPolicy, "cache-stable (default)"),
    reasoning: enumSelect("pack-reasoning", ReasoningPolicySchema, o.reasoning, "current turn (default)"),
    finalAssistant: enumSelect("pack-final-assistant", FinalAssistantSchema, o.finalAssistant, "the format's rule (default)"),
    toolOutputMaxTokens: numberInput("pack-tool-output-max", o.toolOutputMaxTokens),
    clear: checkbox("pack-clear", o.clear),
    keepRecent: numberInput("pack-keep-recent", o.keepRecent),
    excludeTools: h("input", { id: "pack-exclude-tools", type: "text", value: o.excludeTools, placeholder: "tool names, comma-separated" }),
    clearArguments: checkbox("pack-clear-arguments", o.clearArguments),
    recall: checkbox("pack-recall", o.recall),
    recallQuery: h("input", { id: "pack-recall-query", type: "text", value: o.recallQuery, placeholder: "empty: the newest user message" }),
    recallMaxTokens: numberInput("pack-recall-max-tokens", o.recallMaxTokens),
    recallMaxItems: numberInput("pack-recall-max-items", o.recallMaxItems),
  };
  c.systemPrompt.value = o.systemPrompt;
  const form = h("form", { id: "pack-form", class: "pack-form" },
    h("fieldset", null, h("legend", null, "Budget and format"),
      field("format", c.format), field("tokenizer", c.tokenizer),
      field("max_tokens", c.maxTokens, "the whole pack, reserve included"), field("reserve_output_tokens", c.reserveOutputTokens),
      field("max_messages", c.maxMessages, "0 = no limit"), field("max_turns", c.maxTurns, "0 = no limit")),
    h("fieldset", null, h("legend", null, "History"),
      field("history_policy", c.historyPolicy), field("reasoning", c.reasoning), field("final_assistant", c.finalAssistant),
      field("tool_output_max_tokens", c.toolOutputMaxTokens, "0 = never cut"),
      field("omit_summary", c.omitSummary), field("omit_working_memory", c.omitWorkingMemory)),
    h("fieldset", null, h("legend", null, "Clear tool results"),
      field("on", c.clear), field("keep_recent", c.keepRecent), field("exclude_tools", c.excludeTools), field("clear_arguments", c.clearArguments)),
    h("fieldset", null, h("legend", null, "Recall"),
      field("on", c.recall), field("query", c.recallQuery), field("max_tokens", c.recallMaxTokens, "0 = 1,000"), field("max_items", c.recallMaxItems, "0 = 40")),
    h("fieldset", { class: "wide" }, h("legend", null, "System prompt"), c.systemPrompt),
    h("div", { class: "actions" },
      h("button", { type: "submit", id: "pack-build", class: "primary" }, "Build"),
      h("button", { type: "button", id: "pack-build-again", disabled: true, title: "the same request again, e.g. after the agent's next turn" }, "Build again (after the next turn)")));
  const n = (el: HTMLInputElement | HTMLSelectElement) => Number(el.value) || 0;
  const read = (): PackOptions => ({
    format: n(c.format), maxTokens: n(c.maxTokens), reserveOutputTokens: n(c.reserveOutputTokens), maxMessages: n(c.maxMessages),
    maxTurns: n(c.maxTurns), tokenizer: n(c.tokenizer), systemPrompt: c.systemPrompt.value, omitSummary: c.omitSummary.checked,
    omitWorkingMemory: c.omitWorkingMemory.checked, historyPolicy: n(c.historyPolicy), reasoning: n(c.reasoning),
    finalAssistant: n(c.finalAssistant), toolOutputMaxTokens: n(c.toolOutputMaxTokens), clear: c.clear.checked,
    keepRecent: n(c.keepRecent), excludeTools: c.excludeTools.value, clearArguments: c.clearArguments.checked,
    recall: c.recall.checked, recallQuery: c.recallQuery.value, recallMaxTokens: n(c.recallMaxTokens), recallMaxItems: n(c.recallMaxItems),
  });
  return { form, read };
}

function numberInput(id: string, value: number, min = 0): HTMLInputElement {
  return h("input", { id, type: "number", min, step: 1, value, class: "narrow" });
}

function checkbox(id: string, checked: boolean): HTMLInputElement {
  return h("input", { id, type: "checkbox", checked });
}

/** A select of an enum's values, 0 labelled `zero`. */
export function enumSelect(id: string, desc: DescEnum, value: number, zero: string): HTMLSelectElement {
  return h("select", { id }, desc.values.map((v) =>
    h("option", { value: v.number, selected: v.number === value }, v.number === 0 ? zero : enumLabel(desc, v.number))));
}
