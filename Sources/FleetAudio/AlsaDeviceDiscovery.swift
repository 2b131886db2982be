import CAlsa
import FleetCore
import Foundation

/// An ALSA capture device the agent found (microphones.md, "ALSA capture devices").
public struct AlsaCaptureDevice: Sendable, Equatable {
    /// The card's id (ALSA's, from its driver or a udev rule: `Loopback`, `C920`, `PCH`),
    /// which stays with the card across reboots and re-plugging, unlike its number.
    public var cardID: String
    public var cardNumber: Int
    public var cardName: String
    public var driver: String
    /// The PCM device on the card (a card may have several capture devices).
    public var device: Int
    public var pcmName: String
    /// Where the card sits: its sysfs device path, e.g. `/sys/devices/pci0000:00/…/usb1/1-2/1-2:1.0`.
    public var busPath: String
    /// What it can capture, best first: the agent captures the first unless told otherwise.
    public var formats: [AudioFormat]

    /// The device as ALSA names it by the card's id: never `hw:N`, whose number can change.
    public var alsaName: String { "hw:CARD=\(cardID),DEV=\(device)" }

    /// The fleet's id: `alsa-<card id>-<device>`, with anything but letters, digits, `_` and
    /// `.` replaced by `_`.
    public var deviceID: String {
        let safe = String(cardID.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." ? $0 : "_" })
        return "alsa-\(safe)-\(device)"
    }
}

/// Finds the host's ALSA capture devices and what each can capture, through ALSA's control
/// interface (`snd_card_next`, `snd_ctl_pcm_info`) and a probe of each device's hardware
/// parameters. Blocking C calls: run it on a thread of the caller's own.
public enum AlsaDeviceDiscovery {
    /// Rates tried, within what the device says it spans.
    static let standardRates = [48_000, 44_100, 96_000, 32_000, 16_000, 88_200, 192_000, 22_050, 8_000]
    /// Channel counts offered, within the device's range.
    static let standardChannels = [2, 1, 4, 6, 8]

    /// Every capture device; one that cannot be probed (held by another program in a mode
    /// that refuses a second open) is listed in `problems` instead.
    public static func discover(sysfsRoot: String = "/sys") -> (devices: [AlsaCaptureDevice], problems: [String]) {
        capfleet_alsa_silence()
        var devices: [AlsaCaptureDevice] = []
        var problems: [String] = []
        var card: Int32 = -1
        while snd_card_next(&card) == 0, card >= 0 {
            var control: OpaquePointer?
            guard snd_ctl_open(&control, "hw:\(card)", 0) == 0, let control else {
                problems.append("card \(card): its control device cannot be opened")
                continue
            }
            defer { snd_ctl_close(control) }
            var info: OpaquePointer?
            guard snd_ctl_card_info_malloc(&info) == 0, let info else { continue }
            defer { snd_ctl_card_info_free(info) }
            guard snd_ctl_card_info(control, info) == 0 else { continue }
            let cardID = String(cString: snd_ctl_card_info_get_id(info))
            let cardName = String(cString: snd_ctl_card_info_get_name(info))
            let driver = String(cString: snd_ctl_card_info_get_driver(info))
            let busPath =
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(sysfsRoot)/class/sound/card\(card)/device"))
                .map { URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: "\(sysfsRoot)/class/sound/card\(card)/")).standardizedFileURL.path }
                ?? ""
            var device: Int32 = -1
            while snd_ctl_pcm_next_device(control, &device) == 0, device >= 0 {
                var pcmInfo: OpaquePointer?
                guard snd_pcm_info_malloc(&pcmInfo) == 0, let pcmInfo else { continue }
                defer { snd_pcm_info_free(pcmInfo) }
                snd_pcm_info_set_device(pcmInfo, UInt32(device))
                snd_pcm_info_set_subdevice(pcmInfo, 0)
                snd_pcm_info_set_stream(pcmInfo, SND_PCM_STREAM_CAPTURE)
                // A device without a capture stream (a playback-only output) is not a microphone.
                guard snd_ctl_pcm_info(control, pcmInfo) == 0 else { continue }
                var found = AlsaCaptureDevice(
                    cardID: cardID, cardNumber: Int(card), cardName: cardName, driver: driver, device: Int(device),
                    pcmName: String(cString: snd_pcm_info_get_name(pcmInfo)), busPath: busPath, formats: [])
                do {
                    found.formats = try probeFormats(of: found.alsaName)
                } catch {
                    problems.append("\(found.alsaName) (\(cardName)): \(error)")
                    continue
                }
                if found.formats.isEmpty {
                    problems.append("\(found.alsaName) (\(cardName)): captures no format the agent reads (S16_LE, S32_LE)")
                    continue
                }
                devices.append(found)
            }
        }
        return (devices, problems)
    }

    /// What the device can capture: every standard rate and channel count it accepts, in
    /// S16_LE and S32_LE (the formats the agent reads), the most common first.
    public static func probeFormats(of name: String) throws(AlsaError) -> [AudioFormat] {
        var pcm: OpaquePointer?
        try alsaCheck(snd_pcm_open(&pcm, name, SND_PCM_STREAM_CAPTURE, CAPFLEET_SND_PCM_NONBLOCK), "snd_pcm_open", device: name)
        guard let pcm else { return [] }
        defer { snd_pcm_close(pcm) }
        var params: OpaquePointer?
        try alsaCheck(snd_pcm_hw_params_malloc(&params), "snd_pcm_hw_params_malloc", device: name)
        guard let params else { return [] }
        defer { snd_pcm_hw_params_free(params) }
        try alsaCheck(snd_pcm_hw_params_any(pcm, params), "snd_pcm_hw_params_any", device: name)
        var minChannels: UInt32 = 0, maxChannels: UInt32 = 0
        snd_pcm_hw_params_get_channels_min(params, &minChannels)
        snd_pcm_hw_params_get_channels_max(params, &maxChannels)
        let channels = (standardChannels + [Int(minChannels)]).filter { $0 >= Int(minChannels) && $0 <= Int(maxChannels) }
            .reduce(into: [Int]()) { if !$0.contains($1) { $0.append($1) } }
        let rates = standardRates.filter { snd_pcm_hw_params_test_rate(pcm, params, UInt32($0), 0) == 0 }
        let sampleFormats: [(AudioFormat.SampleFormat, snd_pcm_format_t)] = [(.s16le, SND_PCM_FORMAT_S16_LE), (.s32le, SND_PCM_FORMAT_S32_LE)]
        let accepted = sampleFormats.filter { snd_pcm_hw_params_test_format(pcm, params, $0.1) == 0 }.map(\.0)
        var formats: [AudioFormat] = []
        for sampleFormat in accepted {
            for rate in rates {
                for count in channels { formats.append(AudioFormat(sampleRate: rate, channels: count, sampleFormat: sampleFormat)) }
            }
        }
        return formats
    }
}
