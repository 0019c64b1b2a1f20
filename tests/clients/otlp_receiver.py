"""A real OTLP/gRPC trace receiver: the collector's TraceService, with the protobuf stubs of the
`opentelemetry-proto` package. Prints `listening PORT`, then one JSON line per span received
(ids in hex, attributes as a map, the resource's service.name), flushed as they arrive.

Usage: python otlp_receiver.py
"""
import json
import sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        for rs in request.resource_spans:
            resource = {a.key: value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    print(json.dumps({
                        "service": resource.get("service.name"),
                        "scope": ss.scope.name,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "status": s.status.code,
                        "attributes": {a.key: value(a.value) for a in s.attributes},
                    }), flush=True)
        return trace_service_pb2.ExportTraceServiceResponse()


server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(f"listening {port}", flush=True)
try:
    server.wait_for_termination()
except KeyboardInterrupt:
    sys.exit(0)
