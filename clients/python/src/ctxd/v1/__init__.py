"""Generated protobuf and gRPC modules of package ctxd.v1 (clients/python/generate.sh)."""
