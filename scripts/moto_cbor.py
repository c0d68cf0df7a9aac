"""CloudWatch over Smithy RPCv2 CBOR in front of moto_server, for the tests only.

Run with .venv's python (it reads the CloudWatch model from botocore, which scripts/moto.sh
ensure pins beside moto):

    moto_cbor.py --port PORT --moto http://127.0.0.1:MOTO_PORT [--moto-pid PID]

scripts/moto.sh start starts it beside moto_server and prints its address as
GANNET_MOTO_CLOUDWATCH_ENDPOINT (and AWS_ENDPOINT_URL_CLOUDWATCH); scripts/moto.sh stop stops it
by its PID. It also exits by itself once the moto_server of --moto-pid is gone.

Why: aws-sdk-cloudwatch (the releases after 1.99) speaks only the rpc-v2-cbor protocol AWS
moved CloudWatch to, and moto 5.2.5 (the newest) serves CloudWatch only as awsQuery and JSON
1.0. So a request

    POST /service/GraniteServiceVersion20100801/operation/<Op>    smithy-protocol: rpc-v2-cbor
    body: CBOR (gzip when the SDK compressed it)

is sent on to moto as the same operation in JSON 1.0 (the service's other protocol):

    POST /    X-Amz-Target: GraniteServiceVersion20100801.<Op>    application/x-amz-json-1.0
    body: the same value as JSON: a timestamp (CBOR tag 1) as epoch seconds

and moto's JSON answer is turned back into CBOR. The answer is encoded by the operation's output
shape from botocore's CloudWatch model, as the SDK decodes it: a timestamp (moto writes epoch
seconds) as tag 1 over a float, a double as a float even when JSON wrote 0, a blob as bytes.
An error becomes the CBOR map {"__type", "message"} with moto's status (and its
x-amzn-query-error header, if any); a request this cannot read, an InternalFailure naming why.

Any other GET or POST (JSON, query, /moto-api/) is passed on to moto as it came, so this address
is a whole CloudWatch endpoint. Nothing is faked here: moto keeps the state and answers.

Not for the IAM-enforcing server (moto.sh start-iam): a converted body no longer matches the
request's SigV4 signature, which that server checks.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import http.client
import json
import math
import os
import re
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import botocore.session

MODEL = botocore.session.get_session().get_service_model("cloudwatch")
TARGET_PREFIX = MODEL.metadata["targetPrefix"]  # GraniteServiceVersion20100801
CBOR_PATH = re.compile(r"^/service/(?P<service>[^/?]+)/operation/(?P<op>[^/?]+)$")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-connection", "content-length", "host"}
UPSTREAM_TIMEOUT_S = 60


# --- CBOR (RFC 8949): the subset aws-sdk-cloudwatch writes ---------------------------------
# Strings come with their length; maps (and arrays) may be indefinite, up to a break.

class Tagged:
    def __init__(self, tag: int, value: Any) -> None:
        self.tag, self.value = tag, value


_BREAK = object()


def cbor_decode(data: bytes) -> Any:
    value, end = _item(data, 0)
    if end != len(data):
        raise ValueError(f"{len(data) - end} bytes after the CBOR value")
    return value


def _item(b: bytes, i: int) -> tuple[Any, int]:
    initial = b[i]
    i += 1
    major, info = initial >> 5, initial & 31
    if major == 7:
        simple = {20: False, 21: True, 22: None, 23: None}
        if info in simple:
            return simple[info], i
        floats = {25: (">e", 2), 26: (">f", 4), 27: (">d", 8)}
        if info in floats:
            fmt, size = floats[info]
            return struct.unpack_from(fmt, b, i)[0], i + size
        if info == 31:
            return _BREAK, i
        raise ValueError(f"unsupported CBOR simple value {info}")
    if info < 24:
        n: int | None = info
    elif info <= 27:
        size = 1 << (info - 24)
        n = int.from_bytes(b[i:i + size], "big")
        i += size
    elif info == 31 and major in (4, 5):
        n = None  # indefinite length, up to a break
    else:
        raise ValueError(f"unsupported CBOR head {initial:#x}")
    if major == 0:
        return n, i
    if major == 1:
        return -1 - n, i
    if major in (2, 3):
        raw = b[i:i + n]
        return (raw if major == 2 else raw.decode("utf-8")), i + n
    if major == 4:
        items = []
        while n is None or len(items) < n:
            value, i = _item(b, i)
            if value is _BREAK:
                break
            items.append(value)
        return items, i
    if major == 5:
        entries = {}
        while n is None or len(entries) < n:
            key, i = _item(b, i)
            if key is _BREAK:
                break
            entries[key], i = _item(b, i)
        return entries, i
    value, i = _item(b, i)  # major 6: a tag
    return Tagged(n, value), i


def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | info]) + n.to_bytes(size, "big")
    raise ValueError(f"{n} does not fit a CBOR head")


def _int(n: int) -> bytes:
    return _head(0, n) if n >= 0 else _head(1, -1 - n)


def _float(x: float) -> bytes:
    return b"\xfb" + struct.pack(">d", x)


def _text(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _head(3, len(raw)) + raw


def error_body(code: str, message: str) -> bytes:
    """An error's CBOR body, as the SDK reads it."""
    return _head(5, 2) + _text("__type") + _text(code) + _text("message") + _text(message)


def _double(value: Any) -> float:
    # JSON 1.0 writes the non-finite doubles as strings.
    return float({"Infinity": "inf", "-Infinity": "-inf"}.get(value, value))


def cbor_encode(value: Any, shape: Any) -> bytes:
    """value, as moto's JSON gave it, encoded as the SDK decodes `shape`."""
    kind = shape.type_name
    if kind == "structure":
        members = [(name, value[name]) for name in shape.members
                   if value.get(name) is not None]
        return _head(5, len(members)) + b"".join(
            _text(name) + cbor_encode(v, shape.members[name]) for name, v in members)
    if kind == "list":
        return _head(4, len(value)) + b"".join(cbor_encode(v, shape.member) for v in value)
    if kind == "map":
        return _head(5, len(value)) + b"".join(
            _text(str(k)) + cbor_encode(v, shape.value) for k, v in value.items())
    if kind == "string":
        return _text(str(value))
    if kind == "boolean":
        return b"\xf5" if value else b"\xf4"
    if kind in ("integer", "long", "short", "byte"):
        return _int(int(value))
    if kind in ("float", "double"):
        return _float(_double(value))
    if kind == "timestamp":
        return _head(6, 1) + _float(float(value))
    if kind == "blob":
        return _head(2, len(raw := base64.b64decode(value))) + raw
    raise ValueError(f"shape type {kind} is not handled")


def to_json(value: Any) -> Any:
    """A decoded CBOR request value as JSON 1.0 writes it."""
    if isinstance(value, Tagged):
        if value.tag == 1:  # epoch-seconds timestamp
            return value.value
        raise ValueError(f"unsupported CBOR tag {value.tag}")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items() if v is not None}
    return value


# --- HTTP ---------------------------------------------------------------------------------

class Shim(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    moto: Any = None  # moto_server's address (urlsplit), set by main

    def do_POST(self) -> None:
        if self.headers.get("transfer-encoding"):  # the SDKs send a Content-Length
            self.send_error(411, "moto_cbor.py reads a body by its Content-Length")
            return
        match = CBOR_PATH.match(self.path)
        if match and self.headers.get("smithy-protocol", "").lower() == "rpc-v2-cbor":
            try:
                self.cbor(match["service"], match["op"])
            except Exception as e:  # answered as AWS would, so the SDK's error names it
                self.cbor_error(500, "InternalFailure", f"moto_cbor.py: {e!r}")
        else:
            self.pass_on()

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def upstream(self, method: str, path: str, body: bytes, headers: dict[str, str]):
        conn = http.client.HTTPConnection(self.moto.hostname, self.moto.port,
                                          timeout=UPSTREAM_TIMEOUT_S)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def forwarded_headers(self, drop: set[str]) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | drop}

    def reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP | {"date", "server"}:  # send_response sets these
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def pass_on(self) -> None:
        """The request to moto as it came, and moto's answer back."""
        body = self.body()
        status, headers, answer = self.upstream(self.command, self.path, body,
                                                self.forwarded_headers(set()))
        self.reply(status, headers, answer)

    do_GET = pass_on

    def cbor(self, service: str, op: str) -> None:
        body = self.body()
        if self.headers.get("content-encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        if service != TARGET_PREFIX or op not in MODEL.operation_names:
            self.cbor_error(400, "UnknownOperationException",
                            f"moto_cbor.py serves CloudWatch's operations; not {service}.{op}")
            return
        request = to_json(cbor_decode(body)) if body else {}
        headers = self.forwarded_headers({"content-type", "content-encoding", "accept",
                                          "smithy-protocol", "x-amz-target"})
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["X-Amz-Target"] = f"{TARGET_PREFIX}.{op}"
        status, moto_headers, answer = self.upstream("POST", "/", json.dumps(request).encode(),
                                                     headers)
        kept = [(k, v) for k, v in moto_headers
                if k.lower() in ("x-amzn-requestid", "x-amzn-query-error")]
        try:
            value = json.loads(answer) if answer.strip() else {}
        except ValueError:
            value = None
        if 200 <= status < 300 and isinstance(value, dict):
            output = MODEL.operation_model(op).output_shape
            encoded = cbor_encode(value, output) if output is not None else b""
            self.reply(status, [*kept, *self.cbor_headers()], encoded)
        elif isinstance(value, dict):
            code = str(value.get("__type") or "UnknownError")
            message = str(value.get("message") or value.get("Message") or "")
            self.reply(status, [*kept, *self.cbor_headers()], error_body(code, message))
        else:
            excerpt = answer[:500].decode("utf-8", "replace")
            self.cbor_error(status if status >= 400 else 502, "InternalFailure",
                            f"moto answered {op} with {status} and no JSON: {excerpt}")

    @staticmethod
    def cbor_headers() -> list[tuple[str, str]]:
        return [("Content-Type", "application/cbor"), ("smithy-protocol", "rpc-v2-cbor")]

    def cbor_error(self, status: int, code: str, message: str) -> None:
        self.log_message("%s", message)
        self.reply(status, self.cbor_headers(), error_body(code, message))


def alive(pid: int) -> bool:
    """True while the process runs (a zombie, ended but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def exit_with(pid: int) -> None:
    """Ends this process once the moto_server it fronts is gone."""
    while alive(pid):
        time.sleep(0.5)
    print(f"moto_server (pid {pid}) is gone; exiting", file=sys.stderr, flush=True)
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--moto", required=True, help="moto_server's http://127.0.0.1:PORT")
    parser.add_argument("--moto-pid", type=int, help="exit once this process is gone")
    args = parser.parse_args()
    Shim.moto = urlsplit(args.moto)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Shim)
    server.daemon_threads = True
    if args.moto_pid:
        threading.Thread(target=exit_with, args=(args.moto_pid,), daemon=True).start()
    print(f"CloudWatch rpc-v2-cbor -> JSON 1.0 on http://127.0.0.1:{args.port}, "
          f"moto at {args.moto}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
