// @ctxd/client: the universal entry point (fetch-based; Node, Deno, edge runtimes, browsers).
// Connect (JSON, or binary) and gRPC-Web through @connectrpc/connect-web. gRPC over HTTP/2 needs
// `@ctxd/client/node`.
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { checkBaseUrl, createCtxdClientFromTransport, interceptorsOf, } from "./core.js";
export * from "./core.js";
export * from "./errors.js";
export * from "./helpers.js";
export * from "./changes.js";
export * from "./gen/ctxd/v1/context_service_pb.js";
export * from "./gen/ctxd/v1/context_pb.js";
export * from "./gen/ctxd/v1/conversations_pb.js";
export * from "./gen/ctxd/v1/memory_pb.js";
export * from "./gen/ctxd/v1/messages_pb.js";
/**
 * A ctxd client over fetch: `transport` "connect" (default, JSON) or "grpc-web". "grpc" is
 * refused here (fetch cannot do gRPC's HTTP/2 trailers): import `@ctxd/client/node` for it.
 */
export function createCtxdClient(options) {
    const baseUrl = checkBaseUrl(options.baseUrl);
    const kind = options.transport ?? "connect";
    const common = {
        baseUrl,
        interceptors: interceptorsOf(options),
        defaultTimeoutMs: options.timeoutMs,
        fetch: options.fetch,
    };
    if (kind === "connect") {
        return createCtxdClientFromTransport(createConnectTransport({ ...common, useBinaryFormat: options.useBinaryFormat ?? false }));
    }
    if (kind === "grpc-web") {
        return createCtxdClientFromTransport(createGrpcWebTransport(common));
    }
    if (kind === "grpc") {
        throw new TypeError('createCtxdClient: transport "grpc" needs HTTP/2 trailers, which fetch lacks; import createCtxdClient from "@ctxd/client/node", or use "connect" / "grpc-web"');
    }
    throw new TypeError(`createCtxdClient: unknown transport ${JSON.stringify(kind)}`);
}
