#!/usr/bin/env python3
"""Sends a synthetic IMU's samples to a CaptureFleet agent's sensor endpoint (../sensors.md).

    python3 sensor_sender.py --socket /var/lib/capfleet/agent/sensors.sock --stream imu0
    python3 sensor_sender.py --socket ./agent-state/sensors.sock --rate 200 --seconds 10

The agent must offer the stream (its setting sensor_streams, or --sensor-stream imu0), and the
sender must be allowed to open the socket (mode 0660: the agent's user or group). Each message
is one SensorSamples of `--batch` samples, stamped with this host's CLOCK_MONOTONIC when each
sample was taken (time.monotonic_ns() on Linux); the agent puts them in fleet time. Six
channels: acceleration ax ay az in m/s² and rotation rate gx gy gz in rad/s, a slow sway on
gravity. Needs pyzmq, protobuf's Python runtime and protoc (capfleet_protos.py, beside it).
"""
import argparse
import math
import os
import sys
import time

import zmq

import capfleet_protos

CHANNELS = ["ax", "ay", "az", "gx", "gy", "gz"]


def imu_values(t):
    """A level IMU swaying by 2° at 0.5 Hz, its gyro following the sway."""
    sway = math.radians(2) * math.sin(2 * math.pi * 0.5 * t)
    rate = math.radians(2) * 2 * math.pi * 0.5 * math.cos(2 * math.pi * 0.5 * t)
    return [9.81 * math.sin(sway), 0.0, 9.81 * math.cos(sway), rate, 0.0, 0.0]


def main():
    parser = argparse.ArgumentParser(description="Send a synthetic IMU to a CaptureFleet agent's sensor endpoint.")
    default_socket = os.path.join(os.path.expanduser("~"), ".local", "state", "capfleet", "agent", "sensors.sock")
    parser.add_argument("--socket", default=default_socket, help=f"the agent's sensor socket (default {default_socket})")
    parser.add_argument("--stream", default="imu0", help="the stream's name, as the agent offers it (default imu0)")
    parser.add_argument("--rate", type=float, default=200, help="samples a second (default 200)")
    parser.add_argument("--batch", type=int, default=10, help="samples per message, 1 to 1000 (default 10)")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: run until interrupted)")
    args = parser.parse_args()
    if not 1 <= args.batch <= 1000 or args.rate <= 0:
        sys.exit("--batch must be 1 to 1000 and --rate above 0")
    if not os.path.exists(args.socket):
        sys.exit(f"no sensor socket at {args.socket}: start the agent with --sensor-stream {args.stream}, "
                 "or give --socket (the agent's setting sensor_socket)")

    capfleet_protos.compile()
    import sensors_pb2

    socket = zmq.Context.instance().socket(zmq.PUSH)
    socket.setsockopt(zmq.SNDHWM, 1000)
    socket.setsockopt(zmq.LINGER, 2000)  # what is queued still goes at exit
    socket.connect("ipc://" + args.socket)

    interval_ns = int(1e9 / args.rate)
    start = time.monotonic_ns()
    next_at = start
    sent = 0
    message = sensors_pb2.SensorSamples(stream=args.stream, channels=CHANNELS)
    while not args.seconds or next_at - start < args.seconds * 1e9:
        now = time.monotonic_ns()
        if next_at > now:
            time.sleep((next_at - now) / 1e9)
        taken = time.monotonic_ns()  # the moment this sample was measured
        message.samples.add(monotonic_ns=taken, values=imu_values((taken - start) / 1e9))
        sent += 1
        next_at += interval_ns
        if len(message.samples) >= args.batch:
            socket.send(message.SerializeToString())
            # Channels named in every message: an agent that restarted knows them again at once.
            message = sensors_pb2.SensorSamples(stream=args.stream, channels=CHANNELS)
    if message.samples:
        socket.send(message.SerializeToString())
    print(f"sent {sent} samples of {args.stream} to {args.socket}", file=sys.stderr)
    socket.close()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
