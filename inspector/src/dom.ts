// The only way the Inspector makes DOM: `h` builds elements whose text is always text nodes
// (never parsed as HTML) and whose attributes come from an allowlist, with every URL checked.
// Everything the log holds (content, names, arguments, metadata, URIs, native JSON) reaches
// the page through here or through `textContent`, so none of it is ever markup or code.

/** A child of `h`: text (as a text node), a node, or nothing. Arrays are flattened. */
export type Child = Node | string | number | bigint | null | undefined | false | Child[];

/** Attribute values; `false`, null and undefined leave the attribute out, `true` sets it empty. */
export type Attrs = Record<string, string | number | bigint | boolean | null | undefined>;

/** Tags that would load or run something, or parse text as markup: never created. */
const FORBIDDEN_TAGS = new Set([
  "script", "style", "iframe", "frame", "frameset", "object", "embed", "link", "meta", "base",
  "svg", "math", "template", "noscript", "applet", "portal",
]);

/** Attributes `h` sets; `data-*` and `aria-*` are allowed too. No `on*`, no `style`. */
const ALLOWED_ATTRS = new Set([
  "id", "class", "href", "src", "alt", "title", "type", "name", "value", "placeholder", "for",
  "rel", "target", "role", "colspan", "rowspan", "open", "checked", "disabled", "selected",
  "readonly", "autocomplete", "min", "max", "step", "required", "hidden", "tabindex",
  "spellcheck", "size", "multiple", "autofocus", "width", "height", "rows", "cols", "lang",
  "loading", "decoding", "referrerpolicy", "inputmode", "pattern", "maxlength", "datetime",
]);

/** The only images shown: base64 data URIs of raster types browsers decode safely. */
const DATA_IMAGE = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$/i;

/** True for a data URI of a PNG, JPEG, GIF or WebP image (the only `src` the page sets). */
export function isDataImage(uri: string): boolean {
  return DATA_IMAGE.test(uri);
}

/** True for an absolute http: or https: URL (the only external links the page makes). */
export function isHttpUrl(uri: string): boolean {
  try {
    const url = new URL(uri);
    return (url.protocol === "http:" || url.protocol === "https:") && /^https?:\/\//i.test(uri.trim());
  } catch {
    return false;
  }
}

/** Whether `value` may be the URL attribute `name`: a fragment link, http(s), or a data image. */
function safeUrl(name: string, value: string): boolean {
  if (name === "src") return isDataImage(value);
  return value.startsWith("#") || isHttpUrl(value);
}

/** Creates `<tag>` with `attrs` and `children`; throws on anything that could run code. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  if (FORBIDDEN_TAGS.has(tag)) throw new Error(`h: <${tag}> is not allowed`);
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === false || value === null || value === undefined) continue;
    setAttr(el, name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Sets one attribute after the same checks as `h`. */
export function setAttr(el: Element, name: string, value: string): void {
  const lower = name.toLowerCase();
  const known = ALLOWED_ATTRS.has(lower) || /^(data|aria)-[a-z0-9-]+$/.test(lower);
  if (lower.startsWith("on") || !known) throw new Error(`h: attribute ${name} is not allowed`);
  if ((lower === "href" || lower === "src") && !safeUrl(lower, value)) {
    throw new Error(`h: ${lower} ${JSON.stringify(value.slice(0, 40))} is not allowed`);
  }
  el.setAttribute(lower, value);
}

/** Appends children (text as text nodes) to `parent`. */
export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.appendChild(child);
    else parent.appendChild(document.createTextNode(String(child)));
  }
}

/** Removes every child of `el`. */
export function clear(el: Element): void {
  el.replaceChildren();
}

/** Replaces the children of `el` with `children`. */
export function replace(el: Element, ...children: Child[]): void {
  const fragment = document.createDocumentFragment();
  append(fragment, children);
  el.replaceChildren(fragment);
}

/** Adds a listener and returns the element, for building and wiring in one expression. */
export function on<E extends HTMLElement, K extends keyof HTMLElementEventMap>(
  el: E,
  type: K,
  listener: (event: HTMLElementEventMap[K]) => void,
): E {
  el.addEventListener(type, listener);
  return el;
}

/** A link to an in-page route (`#/...`). */
export function link(href: string, ...children: Child[]): HTMLAnchorElement {
  return h("a", { href }, ...children);
}

/** An external link: http(s) only, opened in a new tab with no opener and no referrer. */
export function externalLink(url: string, text?: string): HTMLElement {
  if (!isHttpUrl(url)) return h("span", { class: "uri" }, url);
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer", class: "uri" }, text ?? url);
}

/** `<input>` of a labelled form field. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLLabelElement {
  return h("label", { class: "field" }, h("span", { class: "field-label" }, label), control,
    hint ? h("span", { class: "hint" }, hint) : null);
}
