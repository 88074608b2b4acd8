// @ctxd/client/node: the Node entry point. gRPC over HTTP/2 (default), Connect and gRPC-Web
// through @connectrpc/connect-node (node:http2 / node:http), plus everything the universal
// entry exports.
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
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
 * A ctxd client for Node: `transport` "grpc" (default: HTTP/2, one multiplexed session),
 * "connect" (Connect JSON, HTTP/1.1 unless `httpVersion: "2"`) or "grpc-web".
 */
export function createCtxdClient(options) {
    const baseUrl = checkBaseUrl(options.baseUrl);
    const kind = options.transport ?? "grpc";
    const common = { baseUrl, interceptors: interceptorsOf(options), defaultTimeoutMs: options.timeoutMs };
    switch (kind) {
        case "grpc":
            return createCtxdClientFromTransport(createGrpcTransport(common));
        case "connect":
            return createCtxdClientFromTransport(createConnectTransport({ ...common, httpVersion: options.httpVersion ?? "1.1", useBinaryFormat: options.useBinaryFormat ?? false }));
        case "grpc-web":
            return createCtxdClientFromTransport(createGrpcWebTransport({ ...common, httpVersion: options.httpVersion ?? "1.1" }));
        default:
            throw new TypeError(`createCtxdClient: unknown transport ${JSON.stringify(kind)}`);
    }
}
