"""Sends two spans to an OTLP/gRPC endpoint with the OpenTelemetry Python SDK's gRPC exporter.

Usage: grpc_export.py PORT [TOKEN] (TOKEN: sent as `authorization: Bearer TOKEN`). `checkout` (server) has the child `charge` (client) with an int,
an int array, a bool and a double attribute; the resource has service.name, host.name and an
int attribute; the tracer's scope is shop 2.1. Requests are gzip-compressed. Prints the trace id
(32 hex digits) and the export result.
"""
import sys

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanKind

port = int(sys.argv[1])
headers = (("authorization", f"Bearer {sys.argv[2]}"),) if len(sys.argv) > 2 else None
results = []


class Recording(OTLPSpanExporter):
    def export(self, spans):
        r = super().export(spans)
        results.append(r)
        return r


exporter = Recording(
    endpoint=f"http://127.0.0.1:{port}", insecure=True, compression=Compression.Gzip, headers=headers
)
provider = TracerProvider(
    resource=Resource.create({"service.name": "shop", "host.name": "grpc-host", "shop.replicas": 3})
)
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("shop", "2.1")
with tracer.start_as_current_span("checkout", kind=SpanKind.SERVER) as root:
    trace_id = root.get_span_context().trace_id
    with tracer.start_as_current_span("charge", kind=SpanKind.CLIENT) as child:
        child.set_attribute("amount.cents", 1250)
        child.set_attribute("retry.ids", [1, 2, 3])
        child.set_attribute("card.ok", True)
        child.set_attribute("fx.rate", 0.5)
provider.shutdown()
print(f"{trace_id:032x}")
print("ok" if results and all(r == SpanExportResult.SUCCESS for r in results) else f"failed {results}")
