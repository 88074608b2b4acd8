"""Python client for ctxd (package ctxd.v1, service ContextService).

    import ctxd
    client = ctxd.Client("localhost:50051", api_key=None)
    client.append_message("c1", [{"role": "user", "content": "Hi"}])
    pack = client.build_context("c1", max_tokens=8000, format="responses")
    openai.responses.create(model=..., **ctxd.packs.openai_responses_kwargs(pack))

Adapters: `ctxd.agents.CtxdSession` (OpenAI Agents SDK Session) and
`ctxd.pydantic_ai.CtxdConversationStore` (Pydantic AI ConversationStore); import those modules
explicitly (they need their framework installed).
"""

__version__ = "0.1.0"

from . import errors, native, packs  # noqa: E402
from ._requests import message, new_idempotency_key  # noqa: E402
from ._transport import DEFAULT_CHANNEL_OPTIONS, WATCH_RECONNECT, RetryPolicy  # noqa: E402
from .client import AsyncChangeStream, AsyncClient, ChangeStream, Client  # noqa: E402
from .errors import CtxdError  # noqa: E402
from .v1 import context_pb2, context_service_pb2, conversations_pb2, memory_pb2, messages_pb2  # noqa: E402
from .v1.messages_pb2 import Format, Role, Tokenizer  # noqa: E402

__all__ = [
    "AsyncChangeStream",
    "AsyncClient",
    "ChangeStream",
    "Client",
    "CtxdError",
    "DEFAULT_CHANNEL_OPTIONS",
    "Format",
    "RetryPolicy",
    "Role",
    "Tokenizer",
    "WATCH_RECONNECT",
    "context_pb2",
    "context_service_pb2",
    "conversations_pb2",
    "errors",
    "memory_pb2",
    "message",
    "messages_pb2",
    "native",
    "new_idempotency_key",
    "packs",
]
