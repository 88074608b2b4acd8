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
export interface CtxdWebClientOptions extends CtxdClientOptions {
    /** The fetch to use (default: globalThis.fetch). */
    fetch?: typeof globalThis.fetch;
}
/**
 * A ctxd client over fetch: `transport` "connect" (default, JSON) or "grpc-web". "grpc" is
 * refused here (fetch cannot do gRPC's HTTP/2 trailers): import `@ctxd/client/node` for it.
 */
export declare function createCtxdClient(options: CtxdWebClientOptions): CtxdClient;
