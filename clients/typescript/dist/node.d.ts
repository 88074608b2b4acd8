import { type CtxdClient, type CtxdClientOptions } from "./core.js";
export * from "./core.js";
export * from "./errors.js";
export * from "./helpers.js";
export * from "./changes.js";
export * from "./gen/ctxd/v1/context_service_pb.js";
export * from "./gen/ctxd/v1/context_pb.js";
export * from "./gen/ctxd/v1/conversations_pb.js";
export * from "./gen/ctxd/v1/memory_pb.js";
export * from "./gen/ctxd/v1/messages_pb.js";
export interface CtxdNodeClientOptions extends CtxdClientOptions {
    /** HTTP version for Connect and gRPC-Web (default "1.1"); gRPC always uses HTTP/2. */
    httpVersion?: "1.1" | "2";
}
/**
 * A ctxd client for Node: `transport` "grpc" (default: HTTP/2, one multiplexed session),
 * "connect" (Connect JSON, HTTP/1.1 unless `httpVersion: "2"`) or "grpc-web".
 */
export declare function createCtxdClient(options: CtxdNodeClientOptions): CtxdClient;
