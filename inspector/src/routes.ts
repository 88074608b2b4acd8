// Hash routes: `#/` (conversations), `#/c/<id>/<view>?<params>` for one conversation. The id
// is percent-encoded (encodeURIComponent), so it never contains a `/` of the route.

/** The views of one conversation, in the order the navigation shows them. */
export const CONVERSATION_VIEWS = ["log", "pack", "memory", "search"] as const;
export type ConversationView = (typeof CONVERSATION_VIEWS)[number];

/** What the hash names. */
export type Route =
  | { view: "list"; params: URLSearchParams }
  | { view: ConversationView; id: string; params: URLSearchParams }
  | { view: "unknown"; params: URLSearchParams };

/** Reads a location hash. */
export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, "") || "/";
  const q = raw.indexOf("?");
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
  const parts = path.split("/");
  if (path === "/" || path === "") return { view: "list", params };
  if (parts[1] === "c" && parts[2]) {
    let id: string;
    try {
      id = decodeURIComponent(parts[2]);
    } catch {
      return { view: "unknown", params };
    }
    const view = (parts[3] || "log") as ConversationView;
    if (CONVERSATION_VIEWS.includes(view)) return { view, id, params };
  }
  return { view: "unknown", params };
}

/** The hash of a conversation's view, e.g. `#/c/a%2Fb/log?seq=4`. */
export function viewHref(id: string, view: ConversationView, params?: Record<string, string | number | bigint>): string {
  const query = params ? new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)])).toString() : "";
  return `#/c/${encodeURIComponent(id)}/${view}${query ? `?${query}` : ""}`;
}

/** The hash of one message in the log view. */
export function messageHref(id: string, sequence: number | bigint): string {
  return viewHref(id, "log", { seq: sequence });
}
