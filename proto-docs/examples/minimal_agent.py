#!/usr/bin/env python3
"""A camera agent of a third party's, written from the .proto files and proto-docs alone.

    pip install pyzmq protobuf        # or: apt install python3-zmq python3-protobuf
    capfleet enroll --name gige-host  # on the coordinator: a one-time token
    python3 minimal_agent.py --coordinator coordinator.lan:7600 --token cfe1_... \
        --state ./agent-state --device-id gige-Acme_C1-0042 --frames 100

It enrolls once with the token (security.md, "Enrollment"), keeps its key pair and node id in
--state, registers one external camera (SOURCE_KIND_EXTERNAL; device-model.md, "Ids of
external cameras") that makes a GREY test pattern, heartbeats, reports its status, answers
the coordinator's commands (registration.md, commands.md) and streams frames on the ingest
endpoint (frames.md): black until the device's consent is granted (consent.md). It keeps one
HELLO outstanding, as registration.md asks. It stops after --frames frames and prints one JSON
line saying what it did.
"""
import argparse
import base64
import json
import os
import socket as sockets
import sys
import time
import uuid

import zmq
import zmq.utils.z85 as z85

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capfleet_protos  # noqa: E402  (beside this script)

WIDTH, HEIGHT = 64, 48
VERSION = "minimal-agent 1.0"


def decode_token(token):
    """(token public key, token secret key, coordinator public key), Z85 bytes.

    A token is cfe1_ + base64url (no padding) of 64 bytes: the token key pair's secret half,
    then the coordinator's public key. The public half is derived from the secret half."""
    if not token.startswith("cfe1_"):
        sys.exit("an enrollment token starts with cfe1_")
    raw = base64.urlsafe_b64decode(token[5:] + "=" * (-len(token[5:]) % 4))
    if len(raw) != 64:
        sys.exit("an enrollment token carries 64 bytes")
    secret = z85.encode(raw[:32])
    return zmq.curve_public(secret), secret, z85.encode(raw[32:])


def curve_dealer(context, endpoint, public, secret, server):
    dealer = context.socket(zmq.DEALER)
    dealer.curve_publickey, dealer.curve_secretkey, dealer.curve_serverkey = public, secret, server
    dealer.setsockopt(zmq.IMMEDIATE, 1)   # nothing queues for a peer that is not there
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(endpoint)
    return dealer


def receive(dealer, control_pb2, timeout_ms):
    if not dealer.poll(timeout_ms):
        return None
    message = control_pb2.CoordinatorMessage()
    message.ParseFromString(dealer.recv())
    return message


def load_or_enroll(args, context, control_pb2):
    """The node's id, key pair and the coordinator's key, enrolling with the token once."""
    path = os.path.join(args.state, "agent.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as saved:
            state = json.load(saved)
        return state["node_id"], state["public"].encode(), state["secret"].encode(), state["coordinator"].encode()
    if not args.token:
        sys.exit(f"{path} does not exist: enroll first with --token (capfleet enroll --name NAME)")
    token_public, token_secret, coordinator = decode_token(args.token)
    public, secret = zmq.curve_keypair()
    node_id = "node-" + str(uuid.uuid4())
    dealer = curve_dealer(context, args.endpoint, token_public, token_secret, coordinator)
    enroll = control_pb2.AgentMessage()
    enroll.enroll.node_public_key = z85.decode(public)
    enroll.enroll.node_id = node_id
    enroll.enroll.hostname = sockets.gethostname()
    enroll.enroll.software_version = VERSION
    deadline = time.monotonic() + 10
    sent = False
    while time.monotonic() < deadline:
        if not sent:
            try:
                dealer.send(enroll.SerializeToString(), zmq.NOBLOCK)
                sent = True
            except zmq.Again:           # not connected yet (IMMEDIATE)
                time.sleep(0.1)
                continue
        answer = receive(dealer, control_pb2, 200)
        if answer is not None and answer.WhichOneof("body") == "enrolled":
            if answer.enrolled.status.code != 1:
                sys.exit(f"enrollment refused: {answer.enrolled.status.reason}")
            os.makedirs(args.state, exist_ok=True)
            with open(path, "w", encoding="utf-8") as saved:
                json.dump({"node_id": node_id, "public": public.decode(), "secret": secret.decode(),
                           "coordinator": coordinator.decode()}, saved)
            os.chmod(path, 0o600)
            dealer.close()
            return node_id, public, secret, coordinator
    sys.exit("no answer to the enrollment within 10 s: is the coordinator at --coordinator the token's?")


def device_descriptor(common_pb2, args):
    device = common_pb2.DeviceDescriptor()
    device.device_id = args.device_id
    device.name = "Minimal test-pattern camera"
    device.driver = "minimal-agent"
    device.kind = common_pb2.SOURCE_KIND_EXTERNAL
    device.identity_source = "configured"
    video = device.formats.add()
    video.pixel_format, video.width, video.height = "GREY", WIDTH, HEIGHT
    rates = video.frame_rate_ranges.add()
    rates.min_fps = rates.max_fps = args.fps
    video.max_zoom_factor = 1
    video.bit_depth = 8
    device.active_format_index = 0
    device.active_frame_rate = args.fps
    return device


def main():
    parser = argparse.ArgumentParser(description="A minimal CaptureFleet agent with one external camera.")
    parser.add_argument("--coordinator", default="127.0.0.1:7600", help="HOST:PORT of the coordinator's control endpoint")
    parser.add_argument("--token", help="enrollment token (first start only)")
    parser.add_argument("--state", default="./minimal-agent-state", help="where the node's key and id are kept")
    parser.add_argument("--name", default="minimal-agent", help="node name sent in HELLO (the coordinator uses the enrolled one)")
    parser.add_argument("--device-id", default="ext-minimal-1", help="the camera's stable id")
    parser.add_argument("--fps", type=float, default=10.0)
    parser.add_argument("--frames", type=int, default=50, help="stop after this many frames")
    parser.add_argument("--timeout", type=float, default=60, help="give up after this many seconds")
    args = parser.parse_args()
    args.endpoint = f"tcp://{args.coordinator}"

    capfleet_protos.compile()
    import common_pb2
    import control_pb2
    import frames_pb2

    context = zmq.Context.instance()
    node_id, public, secret, coordinator = load_or_enroll(args, context, control_pb2)
    dealer = curve_dealer(context, args.endpoint, public, secret, coordinator)
    instance = str(uuid.uuid4())

    hello = control_pb2.AgentMessage()
    hello.hello.protocol_version = common_pb2.PROTOCOL_VERSION_CURRENT
    hello.hello.protocol_minor = 2
    hello.hello.node_id = node_id
    hello.hello.node_name = args.name
    hello.hello.hostname = sockets.gethostname()
    hello.hello.software_version = VERSION
    hello.hello.agent_instance = instance
    hello.hello.devices.append(device_descriptor(common_pb2, args))

    consent = frames_pb2.CONSENT_STATE_NOT_DETERMINED   # fail-closed until the coordinator says otherwise
    hello_outstanding = False
    welcome = None
    pusher = None
    heartbeat = sequence = frames_sent = real_frames = commands = 0
    interval = 1.0
    next_heartbeat = next_status = next_frame = time.monotonic()
    deadline = time.monotonic() + args.timeout

    while frames_sent < args.frames:
        now = time.monotonic()
        if now > deadline:
            sys.exit(f"timed out after {args.timeout} s: {frames_sent} of {args.frames} frames sent, "
                     f"{'welcomed' if welcome else 'never welcomed'}")
        if welcome is None and not hello_outstanding:
            try:
                dealer.send(hello.SerializeToString(), zmq.NOBLOCK)
                hello_outstanding = True
            except zmq.Again:
                time.sleep(0.25)       # not connected yet: try again after a back-off
                continue
        answer = receive(dealer, control_pb2, 10)
        body = answer.WhichOneof("body") if answer is not None else None
        if body == "welcome":
            hello_outstanding = False
            if answer.welcome.status.code != 1:
                sys.exit(f"HELLO refused: {answer.welcome.status.reason}")
            welcome = answer.welcome
            interval = max(welcome.heartbeat_interval_ms, 100) / 1000
            host = args.coordinator.rsplit(":", 1)[0]
            if pusher is not None:
                pusher.close()
            pusher = context.socket(zmq.PUSH)
            pusher.curve_publickey, pusher.curve_secretkey, pusher.curve_serverkey = public, secret, coordinator
            pusher.setsockopt(zmq.SNDHWM, 2)
            pusher.setsockopt(zmq.IMMEDIATE, 1)
            pusher.setsockopt(zmq.LINGER, 2000)
            pusher.connect(f"tcp://{host}:{welcome.frame_ingest_port}")
        elif body == "reregister":
            # The coordinator does not know this node (it restarted): one HELLO, not one per message.
            if not hello_outstanding:
                welcome = None
        elif body == "error":
            if welcome is None:
                sys.exit(f"HELLO refused: {answer.error.reason}")
            print(f"the coordinator refused a message: {answer.error.reason}", file=sys.stderr)
        elif body == "command":
            command = answer.command
            commands += 1
            reply = control_pb2.AgentMessage()
            reply.command_reply.command_id = command.command_id
            reply.command_reply.active_format_index = 0
            reply.command_reply.active_frame_rate = args.fps
            reply.command_reply.zoom_factor = 1
            action = command.WhichOneof("action")
            if command.device_id != args.device_id:
                reply.command_reply.status.code = common_pb2.STATUS_CODE_NOT_FOUND
                reply.command_reply.status.reason = f"this agent has no device {command.device_id}"
            elif action == "set_consent":
                consent = command.set_consent.state
                reply.command_reply.status.code = common_pb2.STATUS_CODE_OK
            else:
                reply.command_reply.status.code = common_pb2.STATUS_CODE_UNSUPPORTED
                reply.command_reply.status.reason = f"{args.device_id} is a fixed test pattern: it cannot do {action}"
            reply.command_reply.consent = consent
            dealer.send(reply.SerializeToString(), zmq.NOBLOCK)

        if welcome is None:
            continue
        now = time.monotonic()
        if now >= next_heartbeat:
            heartbeat += 1
            beat = control_pb2.AgentMessage()
            beat.heartbeat.node_id = node_id
            beat.heartbeat.sequence = heartbeat
            beat.heartbeat.monotonic_ns = time.monotonic_ns()
            dealer.send(beat.SerializeToString(), zmq.NOBLOCK)
            next_heartbeat = now + interval
        if now >= next_status:
            status = control_pb2.AgentMessage()
            status.status.node_id = node_id
            counters = status.status.devices.add()
            counters.device_id = args.device_id
            counters.frames_captured = counters.frames_sent = frames_sent
            counters.bytes_sent = frames_sent * WIDTH * HEIGHT
            counters.streaming = True
            counters.active_frame_rate = args.fps
            counters.consent = consent
            counters.real_frames = consent == frames_pb2.CONSENT_STATE_AUTHORIZED
            dealer.send(status.SerializeToString(), zmq.NOBLOCK)
            next_status = now + 1
        if now >= next_frame:
            authorized = consent == frames_pb2.CONSENT_STATE_AUTHORIZED
            sequence += 1
            # A moving gradient when authorized; black (and flagged so) otherwise.
            payload = bytes((x + y + sequence) % 256 for y in range(HEIGHT) for x in range(WIDTH)) if authorized \
                else bytes(WIDTH * HEIGHT)
            header = frames_pb2.FrameHeader()
            header.protocol_version = common_pb2.PROTOCOL_VERSION_CURRENT
            header.node_id = node_id
            header.device_id = args.device_id
            header.sequence = sequence
            header.capture_monotonic_ns = time.monotonic_ns()
            header.layout.pixel_format, header.layout.width, header.layout.height = "GREY", WIDTH, HEIGHT
            header.layout.bytes_per_line = WIDTH
            header.payload_size = len(payload)
            header.flags = 0 if authorized else frames_pb2.FRAME_FLAG_BLACK
            header.consent = consent
            header.send_monotonic_ns = time.monotonic_ns()
            try:
                pusher.send_multipart([header.SerializeToString(), payload], zmq.NOBLOCK)
                frames_sent += 1
                real_frames += 1 if authorized else 0
            except zmq.Again:
                pass                    # newest frame wins: this one is dropped (late)
            next_frame = now + 1 / args.fps

    print(json.dumps({"node_id": node_id, "device_id": args.device_id, "frames_sent": frames_sent,
                      "real_frames": real_frames, "commands": commands,
                      "consent": frames_pb2.ConsentState.Name(consent)}))
    pusher.close()
    dealer.close()


if __name__ == "__main__":
    main()
