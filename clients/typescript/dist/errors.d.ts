import { Code, ConnectError } from "@connectrpc/connect";
export { Code, ConnectError };
/** One `google.rpc.BadRequest.FieldViolation`: the request field (or `native.json[...]` path) and why. */
export interface FieldViolation {
    field: string;
    description: string;
}
/** One `google.rpc.ErrorInfo`: `reason` (e.g. CONVERSATION_EXPIRED), `domain`, `metadata`. */
export interface ErrorInfo {
    reason: string;
    domain: string;
    metadata: Record<string, string>;
}
/** The field violations of an INVALID_ARGUMENT error (empty when it carries none). */
export declare function fieldViolations(error: unknown): FieldViolation[];
/** The `google.rpc.ErrorInfo` of an error, if it has one. */
export declare function errorInfo(error: unknown): ErrorInfo | undefined;
/** True when the error has this gRPC/Connect code. */
export declare function isCode(error: unknown, code: Code): boolean;
