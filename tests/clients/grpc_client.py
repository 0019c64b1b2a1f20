"""Call Railyard's gRPC Check with grpcio and stubs generated from the proto by grpcio-tools.

Usage: python grpc_client.py PROTO_DIR HOST:PORT   -- prints what it saw as JSON.
"""
import json
import os
import sys
import tempfile

import grpc
from grpc_tools import protoc

proto_dir, target = sys.argv[1], sys.argv[2]
out = tempfile.mkdtemp()
code = protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
                    os.path.join(proto_dir, "railyard/v1/policy.proto")])
assert code == 0, "protoc failed"
sys.path.insert(0, out)
from railyard.v1 import policy_pb2, policy_pb2_grpc  # noqa: E402

stub = policy_pb2_grpc.PolicyServiceStub(grpc.insecure_channel(target))
auth = (("authorization", "Bearer demo-key"),)  # the bundled config's demo key
seen = {}
try:
    stub.Check(policy_pb2.CheckRequest(
        rail=policy_pb2.RAIL_INPUT, messages=[policy_pb2.Message(role="user", content="x")]))
    seen["no_key_code"] = None
except grpc.RpcError as e:
    seen["no_key_code"] = e.code().name

r = stub.Check(policy_pb2.CheckRequest(
    rail=policy_pb2.RAIL_INPUT,
    messages=[policy_pb2.Message(role="user", content="call me on +44 20 7946 0958")]),
    metadata=auth)
seen["verdict"] = policy_pb2.Verdict.Name(r.verdict)
seen["content"] = r.messages[0].content
# The plugin that edited (llama31-compat is skipped: it runs only for Llama 3.1 models).
seen["plugin"] = [d.plugin for d in r.decisions if d.verdict == "modify"][0]

r = stub.Check(policy_pb2.CheckRequest(
    rail=policy_pb2.RAIL_TOOL_CALL,
    messages=[policy_pb2.Message(role="assistant", tool_calls=[
        policy_pb2.ToolCall(id="c1", name="drop_tables", arguments="{}")])]),
    metadata=auth)
seen["blocked_verdict"] = policy_pb2.Verdict.Name(r.verdict)

try:
    stub.Check(policy_pb2.CheckRequest(messages=[policy_pb2.Message(role="user", content="x")]),
               metadata=auth)
    seen["invalid_code"] = None
except grpc.RpcError as e:
    seen["invalid_code"] = e.code().name

# Server reflection: what a generic client (grpcurl, Postman) sees without the proto file.
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (  # noqa: E402
    ProtoReflectionDescriptorDatabase)
db = ProtoReflectionDescriptorDatabase(grpc.insecure_channel(target))
seen["services"] = sorted(db.get_services())
seen["check_input"] = db.FindFileContainingSymbol("railyard.v1.PolicyService").name

print(json.dumps(seen))
