import FleetCore
import FleetProtocol
import Foundation

/// How operator listings are shown: aligned text tables for people, JSON for programs.
public enum FleetTables {
    /// Pretty, key-sorted JSON of a listing (see JSONViews for the field names).
    ///
    /// The views spell their snake_case names in CodingKeys rather than through the encoder's
    /// `convertToSnakeCase`, which converts every key of every object again: at 200 devices with
    /// 40 formats each that took 0.19 s of a 0.26 s encode.
    public static func json(_ value: some Encodable) throws(JSONOutputError) -> String {
        try encode(value, formatting: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    /// One compact JSON object on one line (JSON lines, for streams).
    public static func jsonLine(_ value: some Encodable) throws(JSONOutputError) -> String {
        try encode(value, formatting: [.sortedKeys, .withoutEscapingSlashes])
    }

    private static func encode(_ value: some Encodable, formatting: JSONEncoder.OutputFormatting) throws(JSONOutputError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = formatting
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw JSONOutputError(type: String(describing: type(of: value)), underlying: String(describing: error))
        }
    }

    public static func table(_ header: [String], _ rows: [[String]]) -> String {
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            // Only the end is trimmed: a blank first cell (watch's `!` column) keeps its place.
            var text = cells.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
            while text.last == " " { text.removeLast() }
            return text
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n")
    }

    public static func nodes(_ nodes: [Capfleet_V1_NodeInfo], now: Date = Date()) -> String {
        guard !nodes.isEmpty else { return "no nodes have registered yet: start an agent with `capfleet agent`" }
        return table(
            ["NODE", "NAME", "HOST", "STATE", "DEVICES", "VERSION", "LAST SEEN", "ADDRESS"],
            nodes.map { node in
                [
                    node.nodeID, node.name, node.hostname, node.revoked ? "revoked" : node.online ? "online" : "offline", String(node.deviceCount),
                    node.softwareVersion, age(node.lastSeenUnixMs, now: now), node.address,
                ]
            })
    }

    /// Each node's clock against fleet time (proto-docs/clock.md).
    public static func clocks(_ nodes: [Capfleet_V1_NodeInfo], now: Date = Date()) -> String {
        guard !nodes.isEmpty else { return "no nodes have registered yet: start an agent with `capfleet agent`" }
        return table(
            ["NODE", "NAME", "CLOCK", "WALL CLOCK", "DRIFT", "UNCERTAINTY", "ROUND TRIP", "REPORTED"],
            nodes.map { node in
                guard node.hasClock, node.clock.sync != .unspecified else {
                    return [node.nodeID, node.name, node.online ? "not reported" : "offline", "-", "-", "-", "-", "-"]
                }
                let clock = node.clock
                let sync = clock.sync.name ?? "unsynchronised"
                let known = clock.sync != .unsynchronised
                return [
                    node.nodeID, node.name, node.online ? sync : "offline (was \(sync))",
                    known ? signedDuration(clock.wallClockOffsetNs) : "-",
                    known ? String(format: "%+.2f ppm", clock.driftPpm) : "-",
                    known ? "±" + duration(Double(clock.uncertaintyNs)) : "-",
                    known ? duration(Double(clock.roundTripNs)) : "-",
                    age(clock.reportedUnixMs, now: now),
                ]
            })
    }

    public static func syncCheck(_ result: Capfleet_V1_SyncCheckResult) -> String {
        let rows = result.entries.map { entry -> [String] in
            guard entry.hasFrame else { return [entry.deviceID, entry.nodeID, "-", "-", "-", entry.status.reason] }
            let frame = entry.frame
            return [
                entry.deviceID, entry.nodeID, String(frame.sequence), "+" + duration(Double(frame.fleetTimeNs &- result.atFleetTimeNs)),
                "±" + duration(Double(frame.uncertaintyNs)), VideoFormat.trim(frame.frameRate) + " fps",
            ]
        }
        let answered = result.entries.filter(\.hasFrame).count
        let summary =
            answered < 2
            ? "\(answered) of \(result.entries.count) devices answered: no spread to show"
            : "spread \(duration(Double(result.spreadNs))) across \(answered) devices (clock error bound up to ±\(duration(Double(result.uncertaintyNs))))"
        return "first frames at or after fleet time \(result.atFleetTimeNs):\n"
            + table(["DEVICE", "NODE", "FRAME", "AFTER", "UNCERTAINTY", "RATE / ERROR"], rows) + "\n" + summary
    }

    /// Nanoseconds as people read them: 850 ns, 12.3 µs, 4.56 ms, 3.200 s.
    public static func duration(_ nanoseconds: Double) -> String {
        let magnitude = abs(nanoseconds)
        return switch magnitude {
        case ..<1_000: String(format: "%.0f ns", nanoseconds)
        case ..<1_000_000: String(format: "%.1f µs", nanoseconds / 1e3)
        case ..<1_000_000_000: String(format: "%.2f ms", nanoseconds / 1e6)
        default: String(format: "%.3f s", nanoseconds / 1e9)
        }
    }

    public static func signedDuration(_ nanoseconds: Int64) -> String {
        (nanoseconds < 0 ? "-" : "+") + duration(abs(Double(nanoseconds)))
    }

    public static func operators(_ operators: [Capfleet_V1_OperatorInfo], now: Date = Date()) -> String {
        guard !operators.isEmpty else { return "no operators" }
        return table(
            ["NAME", "ROLE", "KEY", "ADDED BY", "ADDED"],
            operators.map { info in
                [
                    info.name, OperatorRole(wire: info.role)?.rawValue ?? "none", String(info.publicKey.prefix(8)) + "…", info.addedBy,
                    age(info.addedUnixMs, now: now),
                ]
            })
    }

    public static func devices(_ devices: [Capfleet_V1_DeviceInfo]) -> String {
        guard !devices.isEmpty else { return "no devices: no node has registered a camera yet" }
        return table(
            ["DEVICE", "NODE", "NAME", "KIND", "STATE", "CONSENT", "REC", "ACTIVE FORMAT", "FPS", "FORMATS", "ALIGN", "LOCKED BY"],
            devices.map { device in
                [
                    device.deviceID, device.nodeID, device.name, (SourceKind(wire: device.kind) ?? .v4l2).rawValue,
                    state(online: device.online, interruption: device.interruption), consent(device),
                    device.recording ? "yes" : "-", activeFormat(device),
                    device.kind == .sensor || device.kind == .syntheticMicrophone || device.kind == .alsa
                        ? "-" : VideoFormat.trim(device.activeFrameRate),
                    String(device.formatCount),
                    device.hasAlignment ? alignment(device.alignment) : "-",
                    device.leaseHolder.isEmpty ? "-" : device.leaseHolder,
                ]
            })
    }

    /// A camera's active format; "audio" for a microphone, nothing for a sensor stream.
    static func activeFormat(_ device: Capfleet_V1_DeviceInfo) -> String {
        switch device.kind {
        case .sensor: "-"
        case .syntheticMicrophone, .alsa: "audio"
        default: VideoFormat(wire: device.activeFormat).label
        }
    }

    /// "aligned p99 12.0 µs", "aligning -2.40 ms", "free +4.20 ms" (the latest frame's distance
    /// from its slot of the fleet-time grid; once aligned, the 99th percentile of |phase| over
    /// the last minute), or "-" while alignment is off.
    static func alignment(_ alignment: Capfleet_V1_FrameAlignment) -> String {
        guard let name = alignment.state.name, alignment.state != .off else { return "-" }
        switch alignment.state {
        case .aligned where alignment.phaseFrames > 0: return "aligned p99 " + duration(Double(alignment.phaseP99Ns))
        case .unaligned where !alignment.steered: return "free " + signedDuration(alignment.phaseNs)
        default: return name + " " + signedDuration(alignment.phaseNs)
        }
    }

    /// "authorized", or what is sent instead of real frames ("denied: black frames").
    static func consent(_ device: Capfleet_V1_DeviceInfo) -> String {
        let state = ConsentState(wire: device.consent) ?? .notDetermined
        let name = state.rawValue.replacingOccurrences(of: "_", with: " ")
        return state.allowsRealFrames ? name : name + " (black)"
    }

    public static func consentHistory(_ records: [Capfleet_V1_ConsentRecord]) -> String {
        guard !records.isEmpty else { return "no consent changes: the device is not determined (it sends black frames)" }
        return table(
            ["WHEN", "WHO", "ACTION", "FROM", "TO", "REASON"],
            records.map { record in
                [
                    Date(timeIntervalSince1970: Double(record.unixMs) / 1000).formatted(.iso8601), record.actor,
                    ConsentAction(wire: record.action)?.rawValue ?? "?", (ConsentState(wire: record.fromState) ?? .notDetermined).rawValue,
                    (ConsentState(wire: record.toState) ?? .notDetermined).rawValue, record.reason,
                ]
            })
    }

    public static func formats(_ formats: [Capfleet_V1_VideoFormat]) -> String {
        table(
            ["#", "PIXEL", "SIZE", "FRAME RATES", "FOV", "MAX ZOOM", "UPSCALES ABOVE", "BINNED", "BITS", "COLOUR"],
            formats.enumerated().map { index, wire in
                let format = VideoFormat(wire: wire)
                return [
                    String(index), format.pixelFormat.fourCC, "\(format.width)x\(format.height)",
                    format.frameRateRanges.map { "\(VideoFormat.trim($0.minFramesPerSecond))-\(VideoFormat.trim($0.maxFramesPerSecond))" }.joined(
                        separator: ","),
                    format.fieldOfViewDegrees.map { "\(VideoFormat.trim($0))°" } ?? "-",
                    "\(VideoFormat.trim(format.maxZoomFactor))x",
                    format.upscaleThresholdZoomFactor.map { "\(VideoFormat.trim($0))x" } ?? "-",
                    format.isBinned ? "yes" : "no", String(format.bitDepth),
                    format.depthUnitMetres.map { "depth, \(VideoFormat.trim($0 * 1000)) mm a unit" } ?? format.colour?.label ?? "-",
                ]
            })
    }

    /// The live view: one line per device.
    /// The live table; `trouble` (see `trouble(_:previous:nodes:)`) marks devices that need
    /// attention with `!` and lists why under the table.
    public static func watch(_ statuses: [Capfleet_V1_DeviceStatus], trouble: [String: [String]] = [:], now: Date = Date()) -> String {
        guard !statuses.isEmpty else { return "no devices yet" }
        let rows = table(
            ["", "DEVICE", "NODE", "STATE", "FORMAT", "FPS", "MB/S", "FRAMES", "LATE", "NO-BUF", "GAPS", "ENC-LATE", "LAST FRAME"],
            statuses.map { status in
                let mark = (trouble[status.deviceID] ?? []).isEmpty ? " " : "!"
                let running =
                    status.interruption.reason != .none
                    ? state(online: status.online, interruption: status.interruption)
                    : status.streaming ? "streaming" : (status.online ? "idle" : "offline")
                // A microphone has levels (microphones.md): each channel's peak and RMS, dBFS.
                if status.kind == .syntheticMicrophone || status.kind == .alsa {
                    let levels = status.audioLevels.map { String(format: "%.1f/%.1f", $0.peakDbfs, $0.rmsDbfs) }.joined(separator: " ")
                    let clipped = status.audioLevels.reduce(0) { $0 + $1.clipped }
                    return [
                        mark, status.deviceID, status.nodeID, running, "audio", "-", "-",
                        "peak/rms dBFS \(levels.isEmpty ? "-" : levels)" + (clipped > 0 ? " (\(clipped) clipped)" : "") + " · "
                            + AudioClockNames.summary(status.audioClock), "-", "-", "-", "-", "-",
                    ]
                }
                // A sensor stream has samples, not frames (sensors.md): received, and refused if any.
                guard status.kind != .sensor else {
                    let refused = status.samplesRefused > 0 ? " (\(status.samplesRefused) refused)" : ""
                    return [
                        mark, status.deviceID, status.nodeID, running, "sensor", "-", "-", "\(status.samplesReceived) samples\(refused)", "-", "-",
                        "-", "-", "-",
                    ]
                }
                return [
                    mark, status.deviceID, status.nodeID, running,
                    status.width > 0 ? "\(status.width)x\(status.height) \(status.pixelFormat)" : "-",
                    String(format: "%.1f", status.framesPerSecond), String(format: "%.2f", status.bytesPerSecond / 1e6),
                    String(framesCounted(status)), String(status.drops.late), String(status.drops.outOfBuffers),
                    String(status.drops.discontinuity), String(status.drops.encoderLate), age(status.lastFrameUnixMs, now: now),
                ]
            })
        let notes = statuses.compactMap { status -> String? in
            guard let reasons = trouble[status.deviceID], !reasons.isEmpty else { return nil }
            return "! \(status.deviceID): " + reasons.joined(separator: "; ")
        }
        return notes.isEmpty ? rows : rows + "\n\n" + notes.joined(separator: "\n")
    }

    /// The frames FPS measures: those the agent captured (since 1.3), whether or not any
    /// crossed the network; an older agent's frames the coordinator received.
    static func framesCounted(_ status: Capfleet_V1_DeviceStatus) -> UInt64 {
        status.framesCaptured > 0 ? status.framesCaptured : status.framesReceived
    }

    /// Each device's trouble, judged from this refresh, the previous one (for new drops)
    /// and its node's pressure level.
    public static func trouble(
        _ statuses: [Capfleet_V1_DeviceStatus], previous: [Capfleet_V1_DeviceStatus]?,
        nodes: [Capfleet_V1_NodeStatus], now: Date = Date()
    ) -> [String: [String]] {
        let before = Dictionary((previous ?? []).map { ($0.deviceID, $0) }, uniquingKeysWith: { $1 })
        let pressure = Dictionary(nodes.map { ($0.nodeID, PressureLevel(wire: $0.pressureLevel)) }, uniquingKeysWith: { $1 })
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        var result: [String: [String]] = [:]
        for status in statuses {
            result[status.deviceID] = DeviceTrouble.reasons(
                .init(
                    online: status.online, streaming: status.streaming, interruption: InterruptionReason(wire: status.interruption.reason),
                    drops: DropTally(wire: status.drops), previousDrops: before[status.deviceID].map { DropTally(wire: $0.drops) },
                    framesPerSecond: status.framesPerSecond, activeFrameRate: status.activeFrameRate,
                    previousRates: before[status.deviceID].map { ($0.framesPerSecond, $0.activeFrameRate) },
                    lastFrameAgeMilliseconds: status.lastFrameUnixMs > 0 ? nowMs - status.lastFrameUnixMs : nil,
                    nodePressure: pressure[status.nodeID] ?? nil))
        }
        return result
    }

    /// "online", "offline", or "INTERRUPTED (device_in_use)" so trouble stands out.
    static func state(online: Bool, interruption: Capfleet_V1_Interruption) -> String {
        guard online else { return "offline" }
        guard let interruption = Interruption(wire: interruption) else { return "online" }
        return "INTERRUPTED (\(interruption.reason.rawValue))"
    }

    /// Interruptions in full, under a listing: the reason alone does not say what to do.
    public static func interruptions(_ devices: [(id: String, interruption: Capfleet_V1_Interruption)]) -> String {
        devices.compactMap { device in
            Interruption(wire: device.interruption).map { "\(device.id): interrupted since \(clock($0.sinceUnixMilliseconds)): \($0.message)" }
        }.joined(separator: "\n")
    }

    /// A region of interest: its window, and where it sits on the sensor.
    public static func regionSummary(_ region: Capfleet_V1_Rectangle, sensor: PixelRectangle?) -> String {
        "\(region.width)x\(region.height) at \(region.left),\(region.top)" + (sensor.map { " of the \($0.width)x\($0.height) sensor" } ?? "")
    }

    /// A device's controls, crop and focus, for `capfleet device`.
    public static func details(_ info: Capfleet_V1_DeviceInfo) -> String {
        let description = DeviceDescription(wire: info.descriptor)
        var lines = [
            "device     \(info.deviceID)  (\(info.name), \(info.driver), id from \(description.identitySource))",
            "node       \(info.nodeID)\(description.devicePath.map { "  at \($0)" } ?? "")",
            "state      \(state(online: info.online, interruption: info.interruption))",
            "format     \(VideoFormat(wire: info.activeFormat).label) running at \(VideoFormat.trim(info.activeFrameRate)) fps"
                + (info.activeMinFrameRate > 0 && info.activeMinFrameRate < info.activeFrameRate
                    ? " (may slow to \(VideoFormat.trim(info.activeMinFrameRate)))" : ""),
            "zoom       \(VideoFormat.trim(info.zoomFactor > 0 ? info.zoomFactor : 1))x",
            "focus      \(description.focus.summary)" + (info.hasFocus ? "; now \(FocusState(wire: info.focus).mode.rawValue)" : ""),
            "crop       "
                + (description.crop.map { "bounds \($0.bounds.width)x\($0.bounds.height) at \($0.bounds.left),\($0.bounds.top)" } ?? "not supported"),
        ]
        if info.hasRegion {
            lines.append("region     " + regionSummary(info.region, sensor: description.crop?.bounds))
        }
        if info.hasPreRoll { lines.append("pre-roll   " + PreRollViews.summary(info.preRoll)) }
        lines += [
            "recovery   "
                + (info.hasDropRecovery && info.dropRecovery.enabled
                    ? "drop recovery on, down to \(VideoFormat.trim(info.dropRecovery.minimumFps)) fps" : "drop recovery off"),
            "pressure   "
                + (info.hasPressurePolicy && info.pressurePolicy.enabled
                    ? "policy " + PressurePolicy(wire: info.pressurePolicy).summary + (info.pressurePolicy.active ? " (in force now)" : "")
                    : "no pressure policy"),
        ]
        lines.append(
            "live       "
                + (info.liveConsumers.isEmpty
                    ? "full-rate frames stay on the host (nobody is watching)"
                    : "wanted by \(info.liveConsumers.joined(separator: ", ")); "
                        + (info.liveFlow ? "flowing to the coordinator" : "asked of the agent")))
        let encoders = info.encoders.compactMap(HostEncoder.init(wire:))
        lines.append(
            "encoders   "
                + (encoders.isEmpty
                    ? "none listed (an agent before 1.4 records raw only)"
                    : VideoCodec.allCases.compactMap { codec in
                        let mine = encoders.filter { $0.codec == codec }
                        return mine.isEmpty ? nil : "\(codec.rawValue): " + mine.map(\.summary).joined(separator: ", then ")
                    }.joined(separator: "; ")))
        if info.hasAlignment { lines.append("alignment  " + alignmentSummary(info.alignment)) }
        if let near = description.focus.minimumFocusDistanceMillimetres {
            lines.append("lens       focuses from \(VideoFormat.trim(near)) mm (the device says)")
        }
        if info.hasOptics {
            lines.append(
                "optics     \(DeviceOptics(wire: info.optics).summary)"
                    + (info.optics.changedBy.isEmpty ? "" : " (recorded by \(info.optics.changedBy))"))
        }
        if info.hasDetection, let settings = try? DetectionSettings(wire: info.detection) {
            lines.append("detection  " + DetectionViews.summary(settings))
        }
        if info.hasAudioProcessing { lines.append("processing " + AudioProcessingSettings(wire: info.audioProcessing).summary) }
        if let interruption = Interruption(wire: info.interruption) { lines.append("why        \(interruption.message)") }
        lines.append("")
        if description.controls.isEmpty {
            lines.append("no controls")
        } else {
            lines.append(controls(description.controls))
        }
        return lines.joined(separator: "\n")
    }

    /// A table of controls: `capfleet device` and `capfleet control`.
    public static func controls(_ controls: [DeviceControl]) -> String {
        table(
            ["CONTROL", "TYPE", "MIN", "MAX", "STEP", "DEFAULT", "VALUE", "FLAGS"],
            controls.map { control in
                let menu = control.menu.isEmpty ? "" : " {" + control.menu.map { "\($0.value)=\($0.name)" }.joined(separator: ", ") + "}"
                var flags = [String]()
                if control.isReadOnly { flags.append("read-only") }
                if control.isInactive { flags.append("inactive") }
                return [
                    control.key, control.kind.rawValue, String(control.minimum), String(control.maximum), String(control.step),
                    String(control.defaultValue), (control.value.map(String.init) ?? "-") + menu, flags.joined(separator: ","),
                ]
            })
    }

    /// The `alignment` lines of `capfleet device` (proto-docs/clock.md, "Frame alignment").
    static func alignmentSummary(_ alignment: Capfleet_V1_FrameAlignment) -> String {
        guard alignment.state != .off, alignment.state != .unspecified else { return "off" }
        let how =
            alignment.triggerDelivery == .hardwareLine
            ? "wired" : alignment.triggered ? "triggered" : alignment.steered ? "steered" : "free-running"
        var lines = [
            "\(alignment.state.name ?? "unknown") (\(how)): latest frame \(signedDuration(alignment.phaseNs)) from its slot of the grid from fleet time \(alignment.gridOriginFleetNs)"
        ]
        if !alignment.notAlignedReason.isEmpty { lines.append("why not aligned: " + alignment.notAlignedReason) }
        if alignment.phaseFrames > 0 {
            lines.append(
                "|phase| over \(alignment.phaseFrames) frames of the last minute: median \(duration(Double(alignment.phaseMedianNs))), p99 \(duration(Double(alignment.phaseP99Ns))), max \(duration(Double(alignment.phaseMaxNs)))"
            )
            lines.append(
                alignment.triggered
                    ? String(format: "phase moving %+.1f µs/s (the camera's own timestamps against the slots)", alignment.driftNsPerS / 1e3)
                    : alignment.steered
                        ? String(
                            format: "oscillator %+.1f ppm against fleet time; phase moving %+.1f µs/s", alignment.frequencyErrorPpm,
                            alignment.driftNsPerS / 1e3)
                        : String(
                            format: "drifting %+.1f µs/s against the grid (its rate's error; + = later each second)", alignment.driftNsPerS / 1e3))
        }
        if alignment.triggered, alignment.triggerDelivery == .hardwareLine {
            lines.append(
                "exposes on the edges of \(alignment.triggerLine), driven by \(alignment.lineSourceDeviceID.isEmpty ? "an external generator" : alignment.lineSourceDeviceID) (wired; the agent sends no triggers)"
            )
            if !alignment.triggerError.isEmpty { lines.append("the camera's latest refusal: " + alignment.triggerError) }
        } else if alignment.triggered {
            lines.append(
                (alignment.triggerDelivery == .scheduledAction
                    ? "scheduled action commands: \(alignment.triggersFired) sent, \(alignment.triggersMissed) missed; left after their planned departure: median"
                    : "triggers: \(alignment.triggersFired) fired, \(alignment.triggersMissed) missed; left after their slots: median")
                    + " \(duration(Double(alignment.triggerLatenessMedianNs))), p99 \(duration(Double(alignment.triggerLatenessP99Ns))), max \(duration(Double(alignment.triggerLatenessMaxNs)))"
            )
            if !alignment.triggerError.isEmpty { lines.append("the camera's latest refusal: " + alignment.triggerError) }
            if !alignment.actionUnavailableReason.isEmpty {
                lines.append("software triggers, not scheduled action commands: " + alignment.actionUnavailableReason)
            }
        }
        if !alignment.outputLine.isEmpty { lines.append("drives \(alignment.outputLine) with its exposure signal, for the cameras wired to it") }
        if alignment.outOfPhaseSinceFleetNs != 0 {
            lines.append("out of phase since fleet time \(alignment.outOfPhaseSinceFleetNs)")
        } else if alignment.outOfPhaseNs != 0 {
            lines.append(
                "last out of phase for \(duration(Double(alignment.outOfPhaseNs))), in phase again from fleet time \(alignment.outOfPhaseEndFleetNs)")
        }
        return lines.joined(separator: "\n           ")
    }

    /// Each node's pressure: level, contributing factors, and the readings behind them.
    public static func pressure(_ nodes: [Capfleet_V1_NodeStatus], reports: [Capfleet_V1_PressureReport]) -> String {
        guard !nodes.isEmpty else { return "no nodes" }
        return table(
            ["NODE", "NAME", "PRESSURE", "FACTORS", "CPU%", "MEM%", "IO%", "HOTTEST", "DISK FREE"],
            nodes.map { node in
                let report = reports.first { $0.nodeID == node.nodeID }
                let level = PressureLevel(wire: node.pressureLevel)
                let shown = level.map { $0 >= .serious ? $0.description.uppercased() : $0.description } ?? (node.online ? "-" : "offline")
                func percent(_ has: Bool, _ value: Double) -> String { has ? String(format: "%.1f", value) : "-" }
                return [
                    node.nodeID, node.name, shown,
                    node.pressureFactors.isEmpty
                        ? "-"
                        : node.pressureFactors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", "),
                    percent(report?.hasCpuStallPercent ?? false, report?.cpuStallPercent ?? 0),
                    percent(report?.hasMemoryStallPercent ?? false, report?.memoryStallPercent ?? 0),
                    percent(report?.hasIoStallPercent ?? false, report?.ioStallPercent ?? 0),
                    report?.hasHottestCelsius == true ? String(format: "%.0f°C %@", report!.hottestCelsius, report!.hottestZone) : "-",
                    report?.hasLowestDiskFree == true ? String(format: "%.0f%%", report!.lowestDiskFree * 100) : "-",
                ]
            })
    }

    /// A wall-clock time of day for humans, e.g. `14:05:09`.
    public static func clock(_ unixMilliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000).formatted(date: .omitted, time: .standard)
    }

    public static func age(_ unixMilliseconds: Int64, now: Date) -> String {
        guard unixMilliseconds > 0 else { return "never" }
        let seconds = max(0, now.timeIntervalSince1970 - Double(unixMilliseconds) / 1000)
        switch seconds {
        case ..<1: return "now"
        case ..<120: return "\(Int(seconds))s ago"
        case ..<7200: return "\(Int(seconds / 60))m ago"
        default: return "\(Int(seconds / 3600))h ago"
        }
    }
}

/// A listing that JSON cannot carry (a number that is not finite, say): the command says which
/// view failed and why instead of printing an empty list that looks like an empty fleet.
public struct JSONOutputError: Error, CustomStringConvertible {
    public let type: String
    public let underlying: String

    public var description: String {
        "cannot write \(type) as JSON: \(underlying); the text output (without --json) still shows it, and this is a bug to report"
    }
}
