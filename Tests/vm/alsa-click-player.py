#!/usr/bin/env python3
"""Plays a click train into an ALSA playback device and says when each click was played.

Usage: alsa-click-player.py DEVICE SECONDS OUT.json [INTERVAL_S]

For the microphone tests in the VM rig (Tests/vm): played into one side of snd-aloop's
loopback (hw:CARD=Loopback,DEV=0), the clicks are captured from the other (DEV=1) by the
agent under test. Silence with, every INTERVAL_S (default 0.5 s), a 2 ms square burst at
-1 dBFS (as the synthetic microphone's click). After every write the player asks ALSA how far
behind the newest written frame playback is (snd_pcm_delay) and notes which frame was being
played at that CLOCK_MONOTONIC instant; a straight line through those notes, by least squares,
gives each click's playing time without the notes' jitter (the loopback moves its pointer on
the kernel's timer tick). Writes {"rate", "clicks": [{"frame", "monotonic_ns"}], "fit":
{"points", "residual_max_ns", "ns_per_frame"}}. Only ctypes and libasound.so.2.
"""
import ctypes
import json
import sys
import time

RATE, CHANNELS = 48_000, 2
SND_PCM_STREAM_PLAYBACK, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED = 0, 2, 3


def main():
    device, seconds, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
    alsa = ctypes.CDLL("libasound.so.2")
    alsa.snd_strerror.restype = ctypes.c_char_p
    pcm = ctypes.c_void_p()

    def check(result, what):
        if result < 0:
            sys.exit(f"alsa-click-player: {what} on {device}: {alsa.snd_strerror(result).decode()}")
        return result

    check(alsa.snd_pcm_open(ctypes.byref(pcm), device.encode(), SND_PCM_STREAM_PLAYBACK, 0), "snd_pcm_open")
    check(alsa.snd_pcm_set_params(pcm, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, CHANNELS, RATE, 0, 100_000),
          "snd_pcm_set_params")

    period = RATE // 100
    total = int(seconds * RATE)
    step = int(interval * RATE)
    # The first click a second in: the fit has notes on both sides of every click.
    clicks = list(range(RATE, total - RATE // 2, step))
    burst = int(0.002 * RATE)
    amplitude = int(0.891 * 32767)

    def block(start):
        samples = (ctypes.c_int16 * (period * CHANNELS))()
        for click in clicks:
            for frame in range(max(click, start), min(click + burst, start + period)):
                value = amplitude if ((frame - click) // 4) % 2 == 0 else -amplitude
                for channel in range(CHANNELS):
                    samples[(frame - start) * CHANNELS + channel] = value
        return samples

    notes = []
    written = 0
    delay = ctypes.c_long()
    while written < total:
        samples = block(written)
        result = alsa.snd_pcm_writei(pcm, samples, period)
        if result < 0:
            check(alsa.snd_pcm_recover(pcm, result, 1), "snd_pcm_recover")
            sys.exit("alsa-click-player: an underrun: the click times would be wrong")
        written += result
        if alsa.snd_pcm_delay(pcm, ctypes.byref(delay)) == 0:
            now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            notes.append((written - delay.value, now))
    alsa.snd_pcm_drain(pcm)
    alsa.snd_pcm_close(pcm)

    # Least squares of time against frame, from where playback runs steadily (after 0.2 s).
    notes = [n for n in notes if n[0] > RATE // 5]
    n = len(notes)
    mean_x = sum(x for x, _ in notes) / n
    mean_y = sum(y for _, y in notes) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in notes)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in notes)
    slope = sxy / sxx
    residual = max(abs(y - (mean_y + slope * (x - mean_x))) for x, y in notes)
    played = [{"frame": c, "monotonic_ns": round(mean_y + slope * (c - mean_x))} for c in clicks]
    with open(out, "w") as f:
        json.dump({"rate": RATE, "clicks": played,
                   "fit": {"points": n, "residual_max_ns": round(residual), "ns_per_frame": slope}}, f)


if __name__ == "__main__":
    main()
