//! The proto3 JSON mapping of ctxd's messages, from the same descriptors gRPC reflection
//! serves (prost-reflect's implementation of the canonical mapping: lowerCamelCase and
//! original field names accepted, 64-bit integers as strings, enums by name, well-known types
//! in their JSON forms), and Connect's error JSON.

use base64::{Engine, engine::general_purpose::STANDARD_NO_PAD};
use prost::Message;
use prost_reflect::{DynamicMessage, MethodDescriptor, SerializeOptions};
use serde_json::{Value, json};

use crate::grpc::{descriptors::pool, entries};

/// The unary method at `path` (`/package.Service/Method`), if ctxd serves it.
pub(super) fn method(path: &str) -> Option<MethodDescriptor> {
    let (service, name) = path.strip_prefix('/')?.split_once('/')?;
    let service = crate::grpc::descriptors::pool().get_service_by_name(service)?;
    let method = service.methods().find(|m| m.name() == name)?;
    (!method.is_client_streaming() && !method.is_server_streaming()).then_some(method)
}

/// The server-streaming method at `path`, if ctxd serves it (WatchChanges).
pub(super) fn streaming_method(path: &str) -> Option<MethodDescriptor> {
    let (service, name) = path.strip_prefix('/')?.split_once('/')?;
    let service = crate::grpc::descriptors::pool().get_service_by_name(service)?;
    let method = service.methods().find(|m| m.name() == name)?;
    (!method.is_client_streaming() && method.is_server_streaming()).then_some(method)
}

/// A request body in `encoding` as the method's input message in protobuf bytes.
pub(super) fn request_bytes(
    method: &MethodDescriptor,
    encoding: Encoding,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let input = method.input();
    // Bounded before anything is decoded (see `grpc::entries`).
    let counted = match encoding {
        Encoding::Json => entries::check_json(body),
        Encoding::Proto => entries::check_protobuf(&input, body),
    };
    if let Err(too_many) = counted {
        return Err(too_many.message());
    }
    let message = match encoding {
        Encoding::Json => {
            // An empty body is the empty message, as for `{}`.
            let body = if body.iter().all(u8::is_ascii_whitespace) {
                b"{}".as_slice()
            } else {
                body
            };
            let mut deserializer = serde_json::Deserializer::from_slice(body);
            let message = DynamicMessage::deserialize(input.clone(), &mut deserializer)
                .map_err(|e| format!("invalid JSON for {}: {e}", input.full_name()))?;
            deserializer
                .end()
                .map_err(|e| format!("invalid JSON for {}: {e}", input.full_name()))?;
            message
        }
        Encoding::Proto => DynamicMessage::decode(input.clone(), body)
            .map_err(|e| format!("invalid protobuf for {}: {e}", input.full_name()))?,
    };
    Ok(message.encode_to_vec())
}

/// A response message (protobuf bytes) in `encoding`.
pub(super) fn response_body(
    method: &MethodDescriptor,
    encoding: Encoding,
    bytes: &[u8],
) -> Result<Vec<u8>, String> {
    match encoding {
        Encoding::Proto => Ok(bytes.to_vec()),
        Encoding::Json => {
            let message = DynamicMessage::decode(method.output(), bytes).map_err(|e| e.to_string())?;
            json_of(&message)
        }
    }
}

fn json_of(message: &DynamicMessage) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::new(&mut out);
    message
        .serialize_with_options(&mut serializer, &SerializeOptions::new())
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// A request's or response's message encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    /// `application/json`: the proto3 JSON mapping.
    Json,
    /// `application/proto`: protobuf binary.
    Proto,
}

impl Encoding {
    /// The Content-Type of a unary Connect message.
    pub(super) fn content_type(self) -> &'static str {
        match self {
            Encoding::Json => "application/json",
            Encoding::Proto => "application/proto",
        }
    }
}

/// `google.rpc.Status`, as gRPC carries it in `grpc-status-details-bin`.
#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

/// Connect's error JSON for a gRPC status: the code's name, the message, and each detail of
/// `status_details` (the binary `google.rpc.Status`) as `{type, value, debug}`: value the
/// detail's protobuf bytes in base64, debug its JSON (the same BadRequest / ErrorInfo gRPC
/// callers get).
pub(super) fn error_json(code: tonic::Code, message: &str, status_details: &[u8]) -> Vec<u8> {
    let details: Vec<Value> = RpcStatus::decode(status_details)
        .map(|status| status.details)
        .unwrap_or_default()
        .iter()
        .map(|any| {
            let type_name = any.type_url.rsplit('/').next().unwrap_or_default();
            let mut detail = json!({"type": type_name, "value": STANDARD_NO_PAD.encode(&any.value)});
            let debug = pool()
                .get_message_by_name(type_name)
                .and_then(|desc| DynamicMessage::decode(desc, any.value.as_slice()).ok())
                .and_then(|m| json_of(&m).ok())
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            if let Some(debug) = debug {
                detail["debug"] = debug;
            }
            detail
        })
        .collect();
    let mut body = json!({"code": code_name(code)});
    if !message.is_empty() {
        body["message"] = json!(message);
    }
    if !details.is_empty() {
        body["details"] = Value::Array(details);
    }
    body.to_string().into_bytes()
}

/// Connect's name for a code.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "ok",
        Cancelled => "canceled",
        Unknown => "unknown",
        InvalidArgument => "invalid_argument",
        DeadlineExceeded => "deadline_exceeded",
        NotFound => "not_found",
        AlreadyExists => "already_exists",
        PermissionDenied => "permission_denied",
        ResourceExhausted => "resource_exhausted",
        FailedPrecondition => "failed_precondition",
        Aborted => "aborted",
        OutOfRange => "out_of_range",
        Unimplemented => "unimplemented",
        Internal => "internal",
        Unavailable => "unavailable",
        DataLoss => "data_loss",
        Unauthenticated => "unauthenticated",
    }
}

/// The HTTP status the Connect protocol gives a code.
pub(super) fn http_status(code: tonic::Code) -> u16 {
    use tonic::Code::*;
    match code {
        Ok => 200,
        Cancelled => 499,
        Unknown | Internal | DataLoss => 500,
        InvalidArgument | FailedPrecondition | OutOfRange => 400,
        DeadlineExceeded => 504,
        NotFound => 404,
        AlreadyExists | Aborted => 409,
        PermissionDenied => 403,
        ResourceExhausted => 429,
        Unimplemented => 501,
        Unavailable => 503,
        Unauthenticated => 401,
    }
}
