// Transport-independent part of the client: options, auth/tenant headers, the typed client.
import { createClient } from "@connectrpc/connect";
import { ContextService } from "./gen/ctxd/v1/context_service_pb.js";
/** The interceptor that sets the auth, tenant and extra headers on every call. */
export function headersInterceptor(options) {
    return (next) => async (req) => {
        if (options.apiKey && !req.header.has("authorization"))
            req.header.set("authorization", `Bearer ${options.apiKey}`);
        if (options.tenant && !req.header.has("x-tenant-id"))
            req.header.set("x-tenant-id", options.tenant);
        for (const [k, v] of Object.entries(options.headers ?? {}))
            if (!req.header.has(k))
                req.header.set(k, v);
        return next(req);
    };
}
export function interceptorsOf(options) {
    return [headersInterceptor(options), ...(options.interceptors ?? [])];
}
export function checkBaseUrl(baseUrl) {
    if (typeof baseUrl !== "string" || !/^https?:\/\//.test(baseUrl)) {
        throw new TypeError(`createCtxdClient: baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
    }
    return baseUrl.replace(/\/+$/, "");
}
/** Wraps a transport built by the caller (any Connect-ES transport) into the typed client. */
export function createCtxdClientFromTransport(transport) {
    return createClient(ContextService, transport);
}
