// The conversations the browser test looks at, appended through the public Connect JSON API
// as an agent would (proto3 JSON: lowerCamelCase names, enums by name).
import { call, pngDataUri } from "./harness.mjs";

const user = (content, extra = {}) => ({ role: "ROLE_USER", content, ...extra });
const assistant = (content, extra = {}) => ({ role: "ROLE_ASSISTANT", content, ...extra });
const tool = (toolCallId, content) => ({ role: "ROLE_TOOL", toolCallId, content });
const call_ = (id, name, args) => ({ id, name, arguments: JSON.stringify(args) });

/** A long tool output (a few hundred tokens), for clearing and cutting. */
function venueListing(n) {
  const lines = [];
  for (let i = 1; i <= 40; i++) lines.push(`${n}.${i} Venue "Quinta ${n}-${i}" in Sintra, ${20 + i} rooms, €${150 + i * 7} per night, rated ${(3 + (i % 20) / 10).toFixed(1)}`);
  return lines.join("\n");
}

/**
 * Tenant A's main conversation: a pinned opener, a tool-call group of two calls and their
 * results, an image, a UI-only event, a failed call with partial output, longer tool outputs,
 * a summary through 2 and working memory citing messages. Returns what the test checks.
 */
export async function seedMain(base, key, id, run) {
  const image = pngDataUri(8, 6);
  const messages = [
    user("Plan the Lisbon offsite for the platform team (12 people, early June).", { pinned: true, name: "alice", metadata: { channel: "slack", run: "r-1" } }),
    user("What's the weather in Lisbon, and what time is it there?"),
    assistant("", { toolCalls: [call_("call_weather", "get_weather", { city: "Lisbon" }), call_("call_time", "get_time", { tz: "Europe/Lisbon" })], usage: { inputTokens: "812", outputTokens: "41" } }),
    tool("call_weather", "18°C, sunny, light wind from the north"),
    tool("call_time", "14:05 WEST"),
    user("Here is the venue photo from last year.", { attachments: [{ mimeType: "image/png", filename: "venue.png", uri: image }] }),
    assistant("Sunny and 18°C in Lisbon; it is 14:05 there. Nice venue!"),
    user("[ui] alice opened the map panel", { excludeFromContext: true, metadata: { event: "map_opened" } }),
    user("Find venues near Sintra."),
    assistant("", { toolCalls: [call_("call_v1", "search_venues", { near: "Sintra", page: 1 })] }),
    tool("call_v1", venueListing(1)),
    assistant("", { toolCalls: [call_("call_v2", "search_venues", { near: "Sintra", page: 2 })] }),
    tool("call_v2", venueListing(2)),
    assistant("", { toolCalls: [call_("call_v3", "search_venues", { near: "Sintra", page: 3 })] }),
    tool("call_v3", venueListing(3)),
    user("Book the second one."),
    assistant("", { error: { code: "timeout", message: "upstream timed out after 30 s", partialOutput: "Booking Quinta 1-2 for 12 people from" } }),
    user("Try again please."),
    assistant("Booked Quinta 1-2 in Sintra for 12 people, June 3–5. Confirmation QX-4471."),
  ];
  await call(base, "AppendMessage", { conversationId: id, messages }, key);
  await call(base, "UpdateConversation", {
    conversation: { conversationId: id, title: "Lisbon offsite planning", status: "CONVERSATION_STATUS_AWAITING_ANSWER", labels: { team: "platform", suite: "inspector", run } },
    updateMask: "title,status,labels",
  }, key);
  const summaryText = `Alice plans the Lisbon offsite for the platform team (summary ${id}).`;
  await call(base, "Summarize", { conversationId: id, mode: "SUMMARIZE_MODE_PROVIDED", summaryText, throughSequence: "2" }, key);
  await call(base, "UpdateWorkingMemory", {
    conversationId: id,
    memory: {
      summary: "Offsite for 12 in early June near Lisbon.",
      goals: [{ text: "Book an offsite venue for 12 people", sourceSequences: ["1"] }],
      decisions: [{ text: "Venue: Quinta 1-2 in Sintra", sourceSequences: ["16", "19"] }],
      glossary: [{ term: "WEST", definition: "Western European Summer Time", sourceSequences: ["5"] }],
      throughSequence: "19",
    },
  }, key);
  // The user's "Try again please." is redacted: a tombstone in the log from now on.
  await call(base, "RedactMessage", { conversationId: id, sequence: "18" }, key);
  return { image, summaryText, count: messages.length };
}

/** Tenant B's conversation, holding `marker`. */
export async function seedTenantB(base, key, id, marker) {
  await call(base, "AppendMessage", { conversationId: id, messages: [user(`Tenant B's secret plan ${marker}`), assistant(`Noted: ${marker}`)] }, key);
  await call(base, "UpdateConversation", { conversation: { conversationId: id, title: `B ${marker}` }, updateMask: "title" }, key);
}

/** Hostile strings: each must show verbatim as text and never run. */
export const HOSTILE = {
  script: "<script>window.__pwned=1</script>",
  img: '<img src=x onerror="window.__pwned=1">',
  svg: '"><svg onload=window.__pwned=1>',
  js: "javascript:window.__pwned=1",
  dataHtml: "data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+",
  dataSvg: "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIG9ubG9hZD0id2luZG93Ll9fcHduZWQ9MSIvPg==",
};

/** A tool output long enough to be cleared: `line` thirty times, numbered. */
const hostileListing = (line) => Array.from({ length: 30 }, (_, i) => `${i + 1}. ${line}`).join("\n");

/** Tenant A's conversation of hostile content in every field the page shows. */
export async function seedHostile(base, key, id, run) {
  const { script, img, svg, js, dataHtml, dataSvg } = HOSTILE;
  const messages = [
    user(script, { name: img, metadata: { [img]: svg, note: script } }),
    user(img),
    assistant(svg, { toolCalls: [call_("call_h1", `tool${svg}`, { q: img, s: script }), { id: "call_h2", name: script, arguments: `not json ${img}` }] }),
    tool("call_h1", hostileListing(svg)),
    tool("call_h2", hostileListing(`${script} ${img}`)),
    user("pwned attachments", { attachments: [
      { mimeType: "image/png", filename: img, uri: js },
      { mimeType: "text/html", filename: "x.html", uri: dataHtml },
      { mimeType: "image/svg+xml", filename: "x.svg", uri: dataSvg },
      { mimeType: "image/png", filename: "link.png", uri: "https://example.invalid/pic.png" },
    ] }),
    assistant("", { error: { code: script, message: img, partialOutput: svg } }),
    user("pwned search window __pwned"),
  ];
  await call(base, "AppendMessage", { conversationId: id, messages }, key);
  // An Anthropic reply appended natively: its JSON (Message.native) and reasoning hold HTML too.
  const reply = {
    id: "msg_hostile", type: "message", role: "assistant", model: "claude-test", stop_reason: "end_turn", stop_sequence: null,
    content: [{ type: "thinking", thinking: script, signature: "c2lnbmF0dXJl" }, { type: "text", text: `native ${img}` }],
    usage: { input_tokens: 40, output_tokens: 12 },
  };
  await call(base, "AppendMessage", { conversationId: id, native: { format: "FORMAT_ANTHROPIC_MESSAGES", json: JSON.stringify(reply) } }, key);
  await call(base, "UpdateConversation", { conversation: { conversationId: id, title: img, labels: { evil: "x-onerror", run } }, updateMask: "title,labels" }, key);
  await call(base, "Summarize", { conversationId: id, mode: "SUMMARIZE_MODE_PROVIDED", summaryText: `${script} ${img}`, throughSequence: "2" }, key);
  await call(base, "UpdateWorkingMemory", {
    conversationId: id,
    memory: { summary: svg, goals: [{ text: img, sourceSequences: ["1"] }], glossary: [{ term: script, definition: svg, sourceSequences: ["2"] }], throughSequence: "2" },
  }, key);
}

/** `total` messages in cycles of 10 (11 every tenth cycle, with a UI-only event): user, two
 *  calls and results, replies, one more call. */
export async function seedMany(base, key, id, total = 1000) {
  const cycle = (c) => [
    user(`Question ${c}: how many venues in area ${c}?`),
    assistant("", { toolCalls: [call_(`c${c}a`, "count_venues", { area: c }), call_(`c${c}b`, "area_name", { area: c })] }),
    tool(`c${c}a`, `${c * 3} venues`),
    tool(`c${c}b`, `Area ${c}`),
    assistant(`Area ${c} has ${c * 3} venues.`),
    user(`And the cheapest in area ${c}?`),
    // Every tenth cycle a UI-only event (a panel opened), kept in the log and never in a pack.
    ...(c % 10 === 0 ? [user(`[ui] map of area ${c} opened`, { excludeFromContext: true, metadata: { cycle: String(c) } })] : []),
    assistant("", { toolCalls: [call_(`c${c}c`, "cheapest", { area: c })] }),
    tool(`c${c}c`, `Quinta ${c}, €${100 + c} per night`),
    assistant(`The cheapest is Quinta ${c} at €${100 + c}.`, { name: "planner" }),
    user(`Thanks (${c}).`),
  ];
  const all = [];
  for (let c = 1; all.length < total; c++) all.push(...cycle(c));
  all.length = total;
  for (let i = 0; i < all.length; i += 100) {
    await call(base, "AppendMessage", { conversationId: id, messages: all.slice(i, i + 100) }, key);
  }
  return { groups: all.filter((m) => m.toolCalls).length, uiOnly: all.filter((m) => m.excludeFromContext).length };
}

/** A conversation whose pack renders to more than 1 MiB: a question and an answer of about
 *  half a megabyte each. */
export async function seedLarge(base, key, id) {
  const text = Array.from({ length: 9000 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog ✓ `).join("\n");
  await call(base, "AppendMessage", { conversationId: id, messages: [user(text), assistant(text)] }, key);
}
