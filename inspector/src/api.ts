// The Inspector's one client of ctxd: Connect JSON on this page's origin, with the API key (or,
// on a server without keys, the tenant) the person gave. The key lives in sessionStorage only:
// never localStorage, never the URL, gone when the tab closes.

import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { identityChanged } from "./cache.js";
import { ContextService } from "../../clients/typescript/src/gen/ctxd/v1/context_service_pb.js";

const KEY_ITEM = "ctxd.inspector.key";
const TENANT_ITEM = "ctxd.inspector.tenant";

/** Sets or removes a sessionStorage item; a change empties the page's caches (cache.ts). */
function store(item: string, value: string): void {
  if ((sessionStorage.getItem(item) ?? "") === value) return;
  if (value) sessionStorage.setItem(item, value);
  else sessionStorage.removeItem(item);
  identityChanged();
}

/** The credential the calls carry. */
export const session = {
  /** The API key, or "" for none. */
  get key(): string {
    return sessionStorage.getItem(KEY_ITEM) ?? "";
  },
  set key(value: string) {
    store(KEY_ITEM, value);
  },
  /** The tenant named in `x-tenant-id` (servers without API keys), or "" for the default. */
  get tenant(): string {
    return sessionStorage.getItem(TENANT_ITEM) ?? "";
  },
  set tenant(value: string) {
    store(TENANT_ITEM, value);
  },
  /** Forgets the key and the tenant (and with them everything the page kept). */
  forget(): void {
    store(KEY_ITEM, "");
    store(TENANT_ITEM, "");
    identityChanged();
  },
};

/** Adds the stored credential to every call; `override` replaces the key for a probe. */
function credentials(override?: { key: string }): Interceptor {
  return (next) => async (req) => {
    const key = override ? override.key : session.key;
    if (key) req.header.set("authorization", `Bearer ${key}`);
    const tenant = session.tenant;
    if (tenant && !key) req.header.set("x-tenant-id", tenant);
    return next(req);
  };
}

function transport(override?: { key: string }) {
  return createConnectTransport({
    baseUrl: location.origin,
    useBinaryFormat: false,
    interceptors: [credentials(override)],
  });
}

/** The ContextService client every view uses. */
export const api = createClient(ContextService, transport());

/** A client that presents `key` instead of the stored one (the key prompt's check). */
export function clientWithKey(key: string) {
  return createClient(ContextService, transport({ key }));
}

/** The canonical gRPC name of a Connect code, e.g. NOT_FOUND. */
export function codeName(code: Code): string {
  const name = Code[code] ?? `CODE_${code}`;
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** A call's failure as the banner shows it: code and message. */
export interface CallError {
  code: string;
  message: string;
}

/** Reads any thrown value as a call error. */
export function callError(err: unknown): CallError {
  const e = ConnectError.from(err);
  return { code: codeName(e.code), message: e.rawMessage };
}

/** True when the error is UNAUTHENTICATED (no key, or a key the server does not know). */
export function isUnauthenticated(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Unauthenticated;
}
