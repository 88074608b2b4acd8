// The Inspector's entry: the key prompt (until a key the server accepts is given, nothing else
// is drawn), then the app shell and the hash router over the views.

import { api, callError, clientWithKey, isUnauthenticated, session } from "./api.js";
import { ConversationStatusSchema, type Conversation } from "../../clients/typescript/src/gen/ctxd/v1/conversations_pb.js";
import { field, h, on, replace } from "./dom.js";
import { enumLabel, num, time } from "./format.js";
import { CONVERSATION_VIEWS, parseHash, viewHref, type Route } from "./routes.js";
import type { View, ViewContext } from "./view.js";
import { conversationsView, labelChips } from "./views/conversations.js";
import { logView } from "./views/log.js";
import { memoryView } from "./views/memory.js";
import { usage } from "./views/message.js";
import { packView } from "./views/pack.js";
import { searchView } from "./views/search.js";

const VIEWS: Record<(typeof CONVERSATION_VIEWS)[number], View> = { log: logView, pack: packView, memory: memoryView, search: searchView };
const root = document.getElementById("app")!;

/** Bumped on every route change: a view's late answers check it (`ctx.live()`). */
let generation = 0;
let routing = false;

async function boot(): Promise<void> {
  const key = session.key;
  replace(root, h("p", { class: "status" }, "connecting…"));
  try {
    await api.listConversations({ pageSize: 1 });
  } catch (err) {
    if (isUnauthenticated(err)) {
      session.key = "";
      showPrompt(key ? `The stored key was refused (${callError(err).message}).` : "");
    } else {
      // E.g. the server is down, or a tenant it refuses: say so, and offer a fresh start.
      replace(root, h("div", { class: "banner", id: "banner", role: "alert" }, errorText(err),
        on(h("button", { type: "button", id: "retry" }, "Forget key and tenant, and retry"), "click", () => {
          session.forget();
          void boot();
        })));
    }
    return;
  }
  showApp(!key);
}

/** The key prompt, alone on the page. */
function showPrompt(error: string): void {
  generation++;
  const input = h("input", { id: "key-input", type: "password", autocomplete: "off", required: true, "aria-label": "API key" });
  const button = h("button", { id: "key-submit", type: "submit", class: "primary" }, "Open");
  const message = h("p", { id: "key-error", class: "error", role: "alert" }, error);
  const form = on(h("form", { id: "key-form", class: "key-form" },
    h("h1", null, "ctxd Inspector"),
    h("p", null, "This server needs an API key. It is kept in this tab's session storage only, and sent with each call as ",
      h("code", null, "authorization: Bearer …"), "."),
    field("API key", input), button, message), "submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    message.textContent = "";
    try {
      await clientWithKey(input.value).listConversations({ pageSize: 1 });
      session.key = input.value;
      showApp(false);
    } catch (err) {
      message.textContent = errorText(err);
      button.disabled = false;
    }
  });
  replace(root, h("main", { class: "prompt" }, form));
  input.focus();
}

/** The shell: header with navigation and session controls, the banner, the view. */
function showApp(authOff: boolean): void {
  const tenant = h("input", { id: "tenant-input", type: "text", value: session.tenant, placeholder: "default", class: "narrow-text" });
  const sessionControls = authOff
    ? on(h("form", { class: "session", id: "tenant-form", title: "this server has no API keys: calls name their tenant in x-tenant-id" },
      field("tenant", tenant), h("button", { type: "submit" }, "Use")), "submit", (e) => {
      e.preventDefault();
      session.tenant = tenant.value.trim();
      forgetParams();
      void render();
    })
    : h("div", { class: "session" }, on(h("button", { type: "button", id: "forget-key" }, "Forget key"), "click", () => {
      session.forget();
      forgetParams();
      void boot();
    }));
  replace(root,
    h("header", { class: "top" }, h("a", { class: "brand", href: "#/" }, "ctxd Inspector"), h("nav", { id: "nav" }), sessionControls),
    h("div", { id: "banner", class: "banner", role: "alert", hidden: true }),
    h("main", { id: "view" }));
  if (!routing) {
    routing = true;
    window.addEventListener("hashchange", () => void render());
  }
  void render();
}

async function render(): Promise<void> {
  const view = document.getElementById("view");
  if (!view) return; // the key prompt is showing
  const gen = ++generation;
  const route = parseHash(location.hash);
  hideBanner();
  view.replaceChildren();
  // For people and tests alike: which route the view shows, and whether it has finished.
  view.dataset.route = location.hash;
  view.dataset.ready = "0";
  drawNav(route);
  const ctx: ViewContext = {
    id: "id" in route ? route.id : "",
    params: route.params,
    root: view,
    live: () => gen === generation,
    fail: (err) => { if (gen === generation) fail(err); },
  };
  try {
    await show(route, ctx);
  } catch (err) {
    if (ctx.live()) {
      view.querySelector("#view-loading")?.remove();
      const e = callError(err);
      // In the view too, in words: the banner can be dismissed.
      view.append(h("p", { class: "note warn", id: "view-error" }, `This view could not be loaded: ${e.code}: ${e.message}`));
    }
    ctx.fail(err);
  }
  if (ctx.live()) view.dataset.ready = "1";
}

async function show(route: Route, ctx: ViewContext): Promise<void> {
  if (route.view === "list") return conversationsView(ctx);
  if (route.view === "unknown") return showBanner("NOT_FOUND", `No such page: ${location.hash}`);
  const loading = h("p", { class: "status", id: "view-loading" }, "loading the conversation…");
  ctx.root.append(loading);
  const { conversation } = await api.getConversation({ conversationId: ctx.id });
  loading.remove();
  if (!ctx.live() || !conversation) return;
  ctx.conversation = conversation;
  ctx.root.append(conversationHead(conversation));
  await VIEWS[route.view](ctx);
}

function drawNav(route: Route): void {
  const nav = document.getElementById("nav")!;
  if (!("id" in route)) return replace(nav, h("a", { href: "#/", class: "active" }, "Conversations"));
  replace(nav, h("a", { href: "#/" }, "Conversations"), h("span", { class: "crumb" }, route.id),
    CONVERSATION_VIEWS.map((v) => h("a", { href: viewHref(route.id, v), class: v === route.view ? "active" : "", id: `nav-${v}` }, v)));
}

function conversationHead(c: Conversation): HTMLElement {
  return h("section", { class: "conv-head", id: "conv-head", "data-id": c.conversationId },
    h("h2", null, c.title || c.conversationId),
    h("p", { class: "meta" }, h("code", null, c.conversationId), " · ",
      enumLabel(ConversationStatusSchema, c.status), " · ", `${num(c.lastSequence)} messages`,
      c.summaryThroughSequence ? ` · summary through #${c.summaryThroughSequence}` : " · no summary",
      c.memoryVersion ? ` · memory v${c.memoryVersion}` : " · no memory",
      c.usage && (c.usage.inputTokens || c.usage.outputTokens) ? ` · ${usage(c.usage)}` : "",
      ` · created ${time(c.createdAt)} · last activity ${time(c.updatedAt)}`,
      c.forkedFrom ? [" · fork of ", h("a", { href: viewHref(c.forkedFrom.conversationId, "log", { seq: c.forkedFrom.sequence }) }, `${c.forkedFrom.conversationId} #${c.forkedFrom.sequence}`)] : null,
      c.expireTime ? ` · expires ${time(c.expireTime)}` : "", " ", labelChips(c.labels)));
}

function fail(err: unknown): void {
  if (isUnauthenticated(err)) {
    session.key = "";
    showPrompt(`The key was refused (${callError(err).message}).`);
    return;
  }
  const e = callError(err);
  showBanner(e.code, e.message);
  console.error(err);
}

function showBanner(code: string, message: string): void {
  const banner = document.getElementById("banner");
  if (!banner) return;
  banner.dataset.code = code;
  replace(banner, h("strong", null, code), " ", message,
    on(h("button", { type: "button", class: "close", "aria-label": "dismiss" }, "×"), "click", hideBanner));
  banner.hidden = false;
}

function hideBanner(): void {
  const banner = document.getElementById("banner");
  if (banner) banner.hidden = true;
}

/** Drops the route's parameters (a pack link's options, a search) without a navigation: what
 *  one tenant's page put in the URL is not used for the next one's. */
function forgetParams(): void {
  const q = location.hash.indexOf("?");
  if (q >= 0) history.replaceState(null, "", `${location.pathname}${location.search}${location.hash.slice(0, q)}`);
}

function errorText(err: unknown): string {
  const e = callError(err);
  return `${e.code}: ${e.message}`;
}

void boot();
