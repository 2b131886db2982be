#!/usr/bin/env python3
"""Send one request to CaptureFleet's operator endpoint from a plain pyzmq REQ socket and print
the reply as JSON, using only pyzmq and the .proto files.

    python3 operator_request.py --request '{"who_am_i": {}}'
    python3 operator_request.py --request '{"list_devices": {"with_formats": true}}'
    python3 operator_request.py --request '{"take_still": {"all": true}}'

The request is an OperatorRequest's body in protobuf's JSON mapping (field names as in
../operator.proto). The endpoint is CURVE-encrypted and admits operator keys only: the script
reads an operator credential as `capfleet operator add` writes it (--credential FILE, else
$CAPFLEET_CREDENTIAL, else ~/.config/capfleet/credential) and reaches the coordinator at
--coordinator, else $CAPFLEET_COORDINATOR, else the credential's `coordinator`, else
127.0.0.1:7602. A REQ socket's empty delimiter is answered in kind (../operator.md, "Framing").

It waits as long as ../operator.md, "Time limits", says the request may take, unless --timeout
says otherwise. Exit status: 0 for a reply with status OK, 2 for a refusal (printed all the
same), 1 when no reply came in time.
"""
import argparse
import json
import os
import sys

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capfleet_protos  # noqa: E402  (beside this script)
from telemetry_subscriber import default_credential, load_credential  # noqa: E402

# operator.md, "Time limits": what a client waits for requests that wait on agents, frames or
# an instant (the defaults of their fields); every other request is answered at once: 3 s.
TIME_LIMITS = {
    "get_latest_frame": 6, "change_format": 6, "change_frame_rate": 6, "change_zoom": 6,
    "change_focus": 6, "set_drop_recovery_policy": 6, "change_pressure_policy": 6,
    "change_consent": 9, "change_frame_alignment": 6, "sync_check": 7, "start_recording": 6,
    "stop_recording": 16, "delete_recording": 30, "verify_recording": 180, "backup_database": 30,
    "take_still": 54, "delete_still": 30, "change_detection": 13,
}


def coordinator_address(given, credential_path):
    if given:
        return given
    if os.environ.get("CAPFLEET_COORDINATOR"):
        return os.environ["CAPFLEET_COORDINATOR"]
    with open(credential_path, encoding="utf-8") as text:
        for line in text:
            name, _, value = line.strip().partition("=")
            if name.strip() == "coordinator":
                return value.strip().strip('"')
    return "127.0.0.1:7602"


def main():
    parser = argparse.ArgumentParser(description="Send one operator request over a REQ socket.")
    parser.add_argument("--request", required=True, help='the body as JSON, e.g. \'{"who_am_i": {}}\'')
    parser.add_argument("--coordinator", help="HOST:PORT of the operator endpoint")
    parser.add_argument("--credential", default=default_credential(), help="operator credential file")
    parser.add_argument("--timeout", type=float, help="seconds to wait (default: the request's time limit)")
    args = parser.parse_args()

    capfleet_protos.compile()
    import operator_pb2
    from google.protobuf.json_format import MessageToDict, Parse, ParseError

    try:
        body = json.loads(args.request)
        request = Parse(json.dumps({"request_id": "1", **body}), operator_pb2.OperatorRequest())
    except (ValueError, ParseError) as error:
        sys.exit(f"--request is not an OperatorRequest body in JSON: {error}")
    kind = request.WhichOneof("body")
    if kind is None:
        sys.exit("--request names no request; e.g. '{\"who_am_i\": {}}' (see operator.proto)")
    timeout = args.timeout if args.timeout is not None else TIME_LIMITS.get(kind, 3)

    public, secret, server, _ = load_credential(args.credential)
    address = coordinator_address(args.coordinator, args.credential)
    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.curve_publickey, socket.curve_secretkey, socket.curve_serverkey = public, secret, server
    socket.linger = 0
    socket.connect(f"tcp://{address}")
    socket.send(request.SerializeToString())
    if not socket.poll(int(timeout * 1000)):
        # A REQ socket that gave up cannot send again: it is closed, never reused.
        socket.close()
        sys.exit(f"no reply to {kind} from {address} in {timeout} s: is the coordinator running, "
                 "and does it know your key?")
    parts = socket.recv_multipart()
    reply = operator_pb2.OperatorReply.FromString(parts[0])
    out = MessageToDict(reply, preserving_proto_field_name=True)
    if len(parts) > 1:
        out["payload_bytes"] = len(parts[1])   # get_latest_frame: the frame's pixels follow
    print(json.dumps(out), flush=True)
    return 0 if reply.status.code == 1 else 2


if __name__ == "__main__":
    sys.exit(main())
