// Error helpers: the google.rpc details ctxd puts on its errors, decoded without extra deps.
import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
export { Code, ConnectError };
function fields(buf, each) {
    const reader = new BinaryReader(buf);
    while (reader.pos < reader.len) {
        const [no, wireType] = reader.tag();
        if (wireType === WireType.LengthDelimited)
            each(no, reader.bytes());
        else
            reader.skip(wireType, no);
    }
}
const utf8 = new TextDecoder();
function detailsOf(error, typeName) {
    const e = ConnectError.from(error);
    const out = [];
    for (const d of e.details) {
        if ("type" in d && d.type === typeName)
            out.push(d.value);
    }
    return out;
}
/** The field violations of an INVALID_ARGUMENT error (empty when it carries none). */
export function fieldViolations(error) {
    const violations = [];
    for (const bytes of detailsOf(error, "google.rpc.BadRequest")) {
        fields(bytes, (no, vb) => {
            if (no !== 1)
                return;
            const v = { field: "", description: "" };
            fields(vb, (n, x) => {
                if (n === 1)
                    v.field = utf8.decode(x);
                if (n === 2)
                    v.description = utf8.decode(x);
            });
            violations.push(v);
        });
    }
    return violations;
}
/** The `google.rpc.ErrorInfo` of an error, if it has one. */
export function errorInfo(error) {
    const [bytes] = detailsOf(error, "google.rpc.ErrorInfo");
    if (!bytes)
        return undefined;
    const info = { reason: "", domain: "", metadata: {} };
    fields(bytes, (no, v) => {
        if (no === 1)
            info.reason = utf8.decode(v);
        if (no === 2)
            info.domain = utf8.decode(v);
        if (no === 3) {
            let key = "";
            let value = "";
            fields(v, (n, x) => {
                if (n === 1)
                    key = utf8.decode(x);
                if (n === 2)
                    value = utf8.decode(x);
            });
            info.metadata[key] = value;
        }
    });
    return info;
}
/** True when the error has this gRPC/Connect code. */
export function isCode(error, code) {
    return error instanceof ConnectError ? error.code === code : ConnectError.from(error).code === code;
}
