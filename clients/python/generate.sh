#!/usr/bin/env bash
# Regenerates the committed gRPC stubs (src/ctxd/v1/*_pb2*.py, *.pyi) from ../../proto with the
# pinned grpcio-tools (requirements-dev.txt). CI (ci.sh) runs it and fails when the result differs
# from what is committed.
#   clients/python/generate.sh [PYTHON [SRC_DIR]]
# PYTHON: an interpreter with that grpcio-tools (default python3); SRC_DIR: where package `ctxd`
# lives (default clients/python/src; another directory generates a copy there, for comparing).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="${1:-python3}"
src="${2:-$here/src}"
want=$(sed -n 's/^grpcio-tools==//p' "$here/requirements-dev.txt")
have=$("$py" -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))')
[ "$have" = "$want" ] || { echo "generate.sh: grpcio-tools $have installed, $want pinned" >&2; exit 1; }
out="$src/ctxd/v1"
mkdir -p "$out"
rm -f "$out"/*_pb2.py "$out"/*_pb2.pyi "$out"/*_pb2_grpc.py
cd "$root/proto"
"$py" -m grpc_tools.protoc -I. --python_out="$src" --pyi_out="$src" --grpc_python_out="$src" ctxd/v1/*.proto
printf '"""Generated protobuf and gRPC modules of package ctxd.v1 (clients/python/generate.sh)."""\n' >"$out/__init__.py"
