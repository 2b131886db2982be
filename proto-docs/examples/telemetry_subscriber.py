#!/usr/bin/env python3
"""Print CaptureFleet telemetry as JSON lines, using only pyzmq and the .proto files.

    pip install pyzmq protobuf        # or: apt install python3-zmq python3-protobuf
    python3 telemetry_subscriber.py --endpoint tcp://127.0.0.1:7603 --topic device.

The telemetry endpoint is CURVE-encrypted and admits operator keys only (any role; see
../security.md). The script reads an operator credential as `capfleet operator add` writes
it (a ZeroMQ certificate: your key pair, plus the coordinator's public key in its metadata):
--credential FILE, else $CAPFLEET_CREDENTIAL, else ~/.config/capfleet/credential.

Each line is {"topic": ..., "message": {...}} with the message in protobuf's JSON mapping
(field names as in the .proto files; 64-bit integers as strings; fields at their default left
out). Every topic of ../telemetry.md is decoded: node., device., drops., event., pressure. and
meta. (detection reports, since 1.6).
"""
import argparse
import importlib
import json
import os
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capfleet_protos  # noqa: E402  (beside this script)


# Topic prefix -> (module, message) carried on it: every topic of ../telemetry.md, "Topics".
# A topic of another prefix (a newer coordinator's) is printed undecoded, never fatal.
TOPICS = {
    "node.": ("telemetry_pb2", "NodeStatus"),
    "device.": ("telemetry_pb2", "DeviceStatus"),
    "drops.": ("telemetry_pb2", "DropsReport"),
    "event.": ("telemetry_pb2", "FleetEvent"),
    "pressure.": ("common_pb2", "PressureReport"),
    "meta.": ("telemetry_pb2", "DetectionReport"),   # since 1.6: codes and faces found (../detection.md)
    "data.": ("sensors_pb2", "SensorData"),          # since 1.9: sensor streams' readings (../sensors.md)
}


def default_credential():
    if os.environ.get("CAPFLEET_CREDENTIAL"):
        return os.environ["CAPFLEET_CREDENTIAL"]
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "capfleet", "credential")


def load_credential(path):
    """(public, secret, coordinator public keys as Z85 bytes, telemetry HOST:PORT or None) from
    a CaptureFleet credential. pyzmq's load_certificate reads the key pair; the coordinator's
    key and endpoints are metadata lines of the same file, read here."""
    import zmq.auth
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as error:
        sys.exit(f"cannot read the operator credential {path}: {error} "
                 "(ask an admin: capfleet operator add NAME --role viewer --out FILE)")
    metadata = {}
    with open(path, encoding="utf-8") as text:
        for line in text:
            name, _, value = line.strip().partition("=")
            metadata[name.strip()] = value.strip().strip('"')
    server = metadata.get("coordinator-key", "").encode("ascii")
    if not secret or not server:
        sys.exit(f"{path} is not an operator credential: it needs secret-key and coordinator-key")
    return public, secret, server, metadata.get("telemetry")


def default_endpoint(credential_telemetry):
    """The credential's telemetry endpoint, else the coordinator's host at the default port."""
    if credential_telemetry:
        return f"tcp://{credential_telemetry}"
    host = os.environ.get("CAPFLEET_COORDINATOR", "127.0.0.1").rsplit(":", 1)[0] or "127.0.0.1"
    return f"tcp://{host}:7603"


def main():
    parser = argparse.ArgumentParser(description="Print CaptureFleet telemetry as JSON lines.")
    parser.add_argument("--endpoint", help="coordinator telemetry PUB endpoint (default: the credential's telemetry, else port 7603)")
    parser.add_argument("--topic", action="append", default=[], help="topic prefix to subscribe to (repeatable; default: all)")
    parser.add_argument("--count", type=int, default=0, help="exit after this many decoded messages (0: run forever)")
    parser.add_argument("--timeout", type=float, default=0,
                        help="give up after this many seconds (0: never); with --count 0, stop then (status 0)")
    parser.add_argument("--credential", default=default_credential(), help="operator credential file")
    args = parser.parse_args()

    capfleet_protos.compile()
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError

    public, secret, server, telemetry = load_credential(args.credential)
    args.endpoint = args.endpoint or default_endpoint(telemetry)
    socket = zmq.Context.instance().socket(zmq.SUB)
    socket.curve_publickey = public
    socket.curve_secretkey = secret
    socket.curve_serverkey = server
    socket.connect(args.endpoint)
    for prefix in args.topic or [""]:
        socket.setsockopt_string(zmq.SUBSCRIBE, prefix)

    deadline = time.monotonic() + args.timeout if args.timeout else None
    decoded = 0
    while not args.count or decoded < args.count:
        wait_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
        if wait_ms == 0 or not socket.poll(wait_ms):
            if not args.count:
                return  # a subscription for a while, not for a number of messages
            sys.exit(f"timed out after {args.timeout} s with {decoded} of {args.count} messages from {args.endpoint}: "
                     "is the coordinator running and publishing, and does it know your key?")
        parts = socket.recv_multipart()
        if len(parts) != 2:
            print(f"skipping a message with {len(parts)} parts (expected topic + payload)", file=sys.stderr)
            continue
        topic = parts[0].decode("utf-8", "replace")
        kind = next((TOPICS[p] for p in TOPICS if topic.startswith(p)), None)
        if kind is None:
            print(json.dumps({"topic": topic, "bytes": len(parts[1])}), flush=True)
            continue
        try:
            message = getattr(importlib.import_module(kind[0]), kind[1]).FromString(parts[1])
        except DecodeError as error:
            print(f"skipping undecodable {kind[1]} on {topic}: {error}", file=sys.stderr)
            continue
        # proto3's JSON mapping leaves out fields at their default: a DetectionReport without
        # "objects" is the one that says everything reported before is gone.
        print(json.dumps({"topic": topic, "message": MessageToDict(message, preserving_proto_field_name=True)}), flush=True)
        decoded += 1


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
