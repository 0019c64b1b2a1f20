#!/usr/bin/env python3
"""Call Railyard's gRPC `Check` from the command line, with the project's own tools (grpcio and
grpcio-tools from scripts/setup.sh's venv; no grpcurl needed). Prints the answer as JSON.

Usage: .venv/bin/python scripts/grpc-check.py HOST:PORT KEY RAIL TEXT
  RAIL: input, tool_result, tool_call, output or tools
  TEXT: the user message to judge (for tools: a tool description to judge, on a tool named
        `example`)

  .venv/bin/python scripts/grpc-check.py 127.0.0.1:8081 demo-key input "mail me at jane.doe@example.com"
"""
import json
import os
import sys
import tempfile

import grpc
from google.protobuf import json_format
from grpc_tools import protoc

if len(sys.argv) != 5:
    sys.exit(__doc__)
target, key, rail, text = sys.argv[1:]
proto_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto")
out = tempfile.mkdtemp()
if protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                os.path.join(proto_dir, "railyard/v1/policy.proto")]) != 0:
    sys.exit("grpc-check: the proto did not compile")
sys.path.insert(0, out)
from railyard.v1 import policy_pb2, policy_pb2_grpc  # noqa: E402

rails = {"input": policy_pb2.RAIL_INPUT, "tool_result": policy_pb2.RAIL_TOOL_RESULT,
         "tool_call": policy_pb2.RAIL_TOOL_CALL, "output": policy_pb2.RAIL_OUTPUT,
         "tools": policy_pb2.RAIL_TOOLS}
if rail not in rails:
    sys.exit(f"grpc-check: unknown rail {rail!r} (expected {', '.join(rails)})")
request = policy_pb2.CheckRequest(rail=rails[rail])
if rail == "tools":
    request.tools.append(policy_pb2.Tool(type="function", name="example", description=text))
else:
    request.messages.append(policy_pb2.Message(role="user", content=text))
stub = policy_pb2_grpc.PolicyServiceStub(grpc.insecure_channel(target))
try:
    answer = stub.Check(request, metadata=(("authorization", f"Bearer {key}"),), timeout=10)
except grpc.RpcError as e:
    print(json.dumps({"code": e.code().name, "message": e.details()}))
    sys.exit(1)
print(json.dumps(json_format.MessageToDict(answer), indent=2))
