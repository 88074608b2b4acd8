// Transport-independent part of the client: options, auth/tenant headers, the typed client.
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { ContextService } from "./gen/ctxd/v1/context_service_pb.js";

/**
 * The default token budget of the packs the framework adapters build (CtxdSession
 * `budgetTokens`, buildPrompt `budgetTokens`): 32,000. It fits the context window of every
 * current tool-calling model with room left for instructions, tool schemas and the reply
 * (GPT-4o / 4.1 / 5, Claude, Gemini and Llama 3.1+ take 128k or more; 32k-window local models
 * fit too), bounds each call's input cost (at most 32k input tokens, most of them a cached
 * prefix with cache-stable packs), and is about where more context stops helping an agent
 * (models use the middle of very long inputs poorly). Raise it for long-document work on
 * long-context models; lower it for small local models (an 8k model: about 6,000).
 */
export const DEFAULT_BUDGET_TOKENS = 32_000;

/** The typed ctxd client: one method per ContextService RPC (appendMessage, buildContext, ...). */
export type CtxdClient = Client<typeof ContextService>;

/** Wire protocol: gRPC (HTTP/2, Node only), Connect (unary JSON or binary), gRPC-Web. */
export type CtxdTransportKind = "grpc" | "connect" | "grpc-web";

export interface CtxdClientOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:50051` (gRPC, Connect and gRPC-Web share the port). */
  baseUrl: string;
  /** Sent as `authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Sent as `x-tenant-id` (honoured when the server runs without auth). */
  tenant?: string;
  /** Protocol. `@ctxd/client` (fetch): "connect" (default) or "grpc-web". `@ctxd/client/node`: "grpc" (default), "connect", "grpc-web". */
  transport?: CtxdTransportKind;
  /** Default deadline of every call, in milliseconds (per call: `{ timeoutMs }` as the second argument). */
  timeoutMs?: number;
  /** Connect protocol only: binary protobuf instead of JSON (default false: JSON). */
  useBinaryFormat?: boolean;
  /** Extra interceptors, run after the auth one. */
  interceptors?: Interceptor[];
  /** Extra headers on every call. */
  headers?: Record<string, string>;
}

/** The interceptor that sets the auth, tenant and extra headers on every call. */
export function headersInterceptor(options: Pick<CtxdClientOptions, "apiKey" | "tenant" | "headers">): Interceptor {
  return (next) => async (req) => {
    if (options.apiKey && !req.header.has("authorization")) req.header.set("authorization", `Bearer ${options.apiKey}`);
    if (options.tenant && !req.header.has("x-tenant-id")) req.header.set("x-tenant-id", options.tenant);
    for (const [k, v] of Object.entries(options.headers ?? {})) if (!req.header.has(k)) req.header.set(k, v);
    return next(req);
  };
}

type OtelApi = typeof import("@opentelemetry/api");
let otelApi: Promise<OtelApi | null> | undefined;

/** The optional peer, named in a variable so that bundlers leave the import to run time. */
const OTEL_API = "@opentelemetry/api";

/** `@opentelemetry/api` when the application has it installed (an optional peer), else null. */
function loadOtel(): Promise<OtelApi | null> {
  otelApi ??= (import(OTEL_API) as Promise<OtelApi>).then(
    (api) => api,
    () => null,
  );
  return otelApi;
}

/**
 * The interceptor that sends the caller's OpenTelemetry context (W3C `traceparent`,
 * `tracestate`, through the application's configured propagator) when `@opentelemetry/api` is
 * installed, so ctxd's spans join the caller's trace. Without it, nothing is sent.
 */
export function traceContextInterceptor(): Interceptor {
  return (next) => async (req) => {
    const api = await loadOtel();
    if (api) {
      api.propagation.inject(api.context.active(), req.header, {
        set: (carrier, key, value) => carrier.set(key, value),
      });
    }
    return next(req);
  };
}

export function interceptorsOf(options: CtxdClientOptions): Interceptor[] {
  return [headersInterceptor(options), traceContextInterceptor(), ...(options.interceptors ?? [])];
}

export function checkBaseUrl(baseUrl: string): string {
  if (typeof baseUrl !== "string" || !/^https?:\/\//.test(baseUrl)) {
    throw new TypeError(`createCtxdClient: baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
  }
  return baseUrl.replace(/\/+$/, "");
}

/** Wraps a transport built by the caller (any Connect-ES transport) into the typed client. */
export function createCtxdClientFromTransport(transport: Transport): CtxdClient {
  return createClient(ContextService, transport);
}
