import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// Prints the device as the coordinator reports it after a change.
private func show(_ reply: Capfleet_V1_OperatorReply, json: Bool) throws {
    if json {
        print(try FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
    } else if let device = reply.devices.first {
        print("\(device.deviceID): \(VideoFormat(wire: device.activeFormat).label) at \(VideoFormat.trim(device.activeFrameRate)) fps")
    }
}

struct FormatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "format",
        abstract: "Set a device's active format: an entry of its list (--index), or the format with a size, pixel format and rate.",
        discussion: """
            See the list with `capfleet formats DEVICE`. A size or pixel format the device does not have, \
            or a rate outside the ranges of the formats that match, is refused with what it supports. \
            With --fps the device runs at that rate; without, it keeps its rate where the new format runs \
            it, else takes the format's default (its highest rate up to 30 fps).
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(help: "Index in the device's format list.") var index: Int?
    @Option(help: "WIDTHxHEIGHT, exactly as the device lists it.") var size: String?
    @Option(help: "FourCC to match, e.g. NV12.") var pixelFormat: String?
    @Option(help: "Frame rate the format must support; the device then runs at it.") var fps: Double?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard index != nil || size != nil || pixelFormat != nil || fps != nil else {
            throw ValidationError("say which format: --index N, or any of --size, --pixel-format, --fps")
        }
        guard index == nil || (size == nil && pixelFormat == nil && fps == nil) else {
            throw ValidationError("--index names one exact format; do not combine it with --size, --pixel-format or --fps")
        }
    }

    func run() throws {
        let request = try Capfleet_V1_ChangeFormat.with {
            $0.deviceID = device
            if let index {
                $0.formatIndex = UInt32(index)
            } else {
                let dimensions = try size.map(Self.parseSize)
                $0.bestMatch = .with {
                    $0.width = UInt32(dimensions?.width ?? 0)
                    $0.height = UInt32(dimensions?.height ?? 0)
                    $0.pixelFormat = pixelFormat?.uppercased() ?? ""
                    $0.framesPerSecond = fps ?? 0
                }
            }
        }
        try show(try coordinator.call(.changeFormat(request)).reply, json: json)
    }

    static func parseSize(_ text: String) throws -> (width: Int, height: Int) {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), width > 0, height > 0 else {
            throw ValidationError("cannot read the size \(text): write WIDTHxHEIGHT, e.g. 1920x1080")
        }
        return (width, height)
    }
}

struct PresetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preset",
        abstract: "Set a device's format by session preset: \(FormatPreset.allCases.map(\.rawValue).joined(separator: ", ")).")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Argument(help: "The preset.", completion: .list(FormatPreset.allCases.map(\.rawValue))) var preset: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try show(
            try coordinator.call(
                .changeFormat(
                    .with {
                        $0.deviceID = device; $0.preset = preset
                    })
            ).reply, json: json)
    }
}

struct FrameRateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frame-rate", abstract: "Set a device's frame rate within its active format's ranges, or `default`.",
        discussion: """
            The rate is the device's minimum frame duration; --min sets the maximum frame duration, the \
            rate it may slow down to (for exposure in low light) where the device allows it.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Argument(help: "Frames per second, or `default` for the format's default.") var rate: String
    @Option(help: "The lowest rate the device may slow down to (default: the rate itself).") var min: Double?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let fps: Double
        if rate.lowercased() == "default" {
            fps = 0
        } else if let value = Double(rate), value > 0 {
            fps = value
        } else {
            throw ValidationError("cannot read the rate \(rate): write frames per second (e.g. 30) or `default`")
        }
        if let min, min <= 0 { throw ValidationError("--min is a rate above 0") }
        try show(
            try coordinator.call(
                .changeFrameRate(
                    .with {
                        $0.deviceID = device
                        $0.framesPerSecond = fps
                        $0.minFramesPerSecond = min ?? 0
                    })
            ).reply, json: json)
    }
}

struct ZoomDeviceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zoom",
        abstract: "Zoom a device: jump to a factor, ramp to it (--ramp RATE, powers of two per second), or --cancel a ramp.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Argument(help: "Zoom factor, 1 up to the active format's maximum.") var factor: Double?
    @Option(help: "Ramp at this many powers of two per second (1 doubles the factor every second).") var ramp: Double?
    @Flag(help: "Cancel a ramp in progress; it eases out.") var cancel = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard cancel != (factor != nil) else { throw ValidationError("give a zoom factor, or --cancel") }
        guard !(cancel && ramp != nil) else { throw ValidationError("--ramp goes with a factor, not with --cancel") }
    }

    func run() throws {
        let reply = try coordinator.call(
            .changeZoom(
                .with {
                    $0.deviceID = device
                    $0.factor = factor ?? 0
                    $0.rampRate = ramp ?? 0
                    $0.cancel = cancel
                })
        ).reply
        let method =
            switch reply.zoomMethod {
            case .deviceControl: " (device zoom control)"
            case .cropSelection: " (driver crop)"
            case .agentCrop: " (crop and scale in the agent)"
            default: ""
            }
        if json {
            struct View: Encodable {
                var deviceId: String
                var zoomFactor: Double
                var zoomMethod: String
                var upscaleThresholdZoomFactor: Double?

                enum CodingKeys: String, CodingKey {
                    case deviceId = "device_id", zoomFactor = "zoom_factor", zoomMethod = "zoom_method",
                        upscaleThresholdZoomFactor = "upscale_threshold_zoom_factor"
                }
            }
            let format = reply.devices.first?.activeFormat
            print(
                try FleetTables.json(
                    View(
                        deviceId: device, zoomFactor: reply.zoomFactor, zoomMethod: "\(reply.zoomMethod)",
                        upscaleThresholdZoomFactor: (format?.upscaleThresholdZoomFactor ?? 0) > 0 ? format?.upscaleThresholdZoomFactor : nil)))
        } else {
            let threshold = reply.devices.first?.activeFormat.upscaleThresholdZoomFactor ?? 0
            let target = factor ?? reply.zoomFactor
            let upscaling = threshold > 0 && target > threshold ? "; upscales above \(VideoFormat.trim(threshold))x" : ""
            let what = cancel ? "ramp cancelled at" : ramp != nil ? "ramping to \(VideoFormat.trim(target))x, now" : "zoom"
            print("\(device): \(what) \(String(format: "%.2f", reply.zoomFactor))x\(method)\(upscaling)")
        }
    }
}

struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Take (or renew) the exclusive configuration lease on a device; changes need it.",
        discussion: "The lease expires by itself; `capfleet devices` shows who holds which device.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(name: .customLong("for"), help: "Seconds the lease lasts (default 300, at most 86400).") var seconds: UInt32 = 300
    @Flag(help: "Hold the lease while this command runs: it is released when the command ends, is killed, or loses the coordinator for 10 s.")
    var hold = false
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let client = try coordinator.client()
        // Armed before the lease is taken: a Ctrl-C that arrives as the lease appears still ends
        // the session, instead of killing the process and leaving the lease to time out.
        let stop = hold ? SessionHolder.StopSignal() : nil
        if hold {
            client.sessionID = "session-" + UUID().uuidString.lowercased()
            client.sessionTimeoutMilliseconds = 10_000
        }
        let reply: Capfleet_V1_OperatorReply
        do {
            reply = try client.call(
                .lockDevice(
                    .with {
                        $0.deviceID = device; $0.seconds = seconds
                    })
            ).reply
        } catch {
            throw CLIFailure(error.description)
        }
        if json {
            print(try FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
        } else if let info = reply.devices.first {
            print(
                "\(device): locked for configuration by \(info.leaseHolder) until \(FleetTables.clock(info.leaseExpiresUnixMs))"
                    + (hold ? "; held while this runs (Ctrl-C releases it)" : ""))
        }
        fflush(nil)
        guard let stop else { return }
        try SessionHolder(client: client, device: device, seconds: seconds).run(until: stop)
    }
}

/// Keeps an operator session alive (renewing the lease every 2 s) until SIGINT or SIGTERM,
/// then ends it, which releases the lease at once.
struct SessionHolder {
    let client: OperatorClient
    let device: String
    let seconds: UInt32

    /// SIGINT and SIGTERM, turned from "die" into a semaphore the session waits on.
    final class StopSignal {
        let semaphore = DispatchSemaphore(value: 0)
        private let sources: [any DispatchSourceSignal]

        init() {
            signal(SIGINT, SIG_IGN)
            signal(SIGTERM, SIG_IGN)
            let semaphore = semaphore
            sources = [SIGINT, SIGTERM].map { number in
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { semaphore.signal() }
                source.resume()
                return source
            }
        }
    }

    func run(until stop: StopSignal) throws {
        while stop.semaphore.wait(timeout: .now() + 2) == .timedOut {
            do {
                _ = try client.call(
                    .lockDevice(
                        .with {
                            $0.deviceID = device; $0.seconds = seconds
                        }))
            } catch {
                // Say so, and keep trying: the coordinator may be back before the session times out.
                FileHandle.standardError.write(Data("capfleet lock: cannot renew the lease on \(device): \(error.description)\n".utf8))
            }
        }
        do {
            _ = try client.call(.endSession(.init()))
            print("\(device): lease released")
        } catch {
            throw CLIFailure(
                "could not end the session, so the lease on \(device) stays until the coordinator notices the silence (10 s): \(error.description)")
        }
    }
}

struct FocusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "focus",
        abstract: "Focus a device: mode (locked, auto, continuous), lens position, point of interest, range, smooth focus.",
        discussion: "A device that cannot do what is asked refuses it, listing what its focus offers (`capfleet device DEVICE`).")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(help: "locked, auto (focus once, then lock) or continuous.") var mode: String?
    @Option(help: "Lens position, 0 (nearest) to 1 (furthest); locks focus there.") var lens: Double?
    @Option(help: "Point of interest X,Y, each 0 to 1 from the top-left corner.") var point: String?
    @Option(help: "Range restriction: none, near or far.") var range: String?
    @Option(help: "Smooth (slow, unobtrusive) focusing: on or off.") var smooth: String?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let request = try Capfleet_V1_ChangeFocus.with {
            $0.deviceID = device
            if let mode {
                guard let parsed = FocusMode(rawValue: mode.lowercased()) else { throw ValidationError("focus modes: locked, auto, continuous") }
                $0.mode = parsed.wire
            }
            if let lens { $0.lensPosition = lens }
            if let point {
                let parts = point.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
                guard parts.count == 2 else { throw ValidationError("write the point as X,Y, e.g. 0.5,0.3") }
                $0.pointOfInterestX = parts[0]
                $0.pointOfInterestY = parts[1]
            }
            if let range {
                guard let parsed = FocusRangeRestriction(rawValue: range.lowercased()) else { throw ValidationError("ranges: none, near, far") }
                $0.range = parsed.wire
            }
            if let smooth {
                guard ["on", "off"].contains(smooth.lowercased()) else { throw ValidationError("--smooth is on or off") }
                $0.smooth = smooth.lowercased() == "on"
            }
        }
        guard
            request.mode != .unspecified || request.hasLensPosition || request.hasPointOfInterestX || request.range != .unspecified
                || request.hasSmooth
        else {
            throw ValidationError("say what to change: --mode, --lens, --point, --range or --smooth")
        }
        let reply = try coordinator.call(.changeFocus(request)).reply
        let focus = FocusState(wire: reply.focus)
        if json {
            print(try FleetTables.json(JSONViews.FocusView(focus)))
        } else {
            let lens = focus.lensPosition.map { String(format: ", lens at %.2f", $0) } ?? ""
            print("\(device): focus \(focus.mode.rawValue)\(lens)\(focus.isAdjusting ? " (moving)" : "")")
        }
    }
}

struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Set a device's opt-in policies: drop recovery, and a frame-rate cap while its host is under pressure.",
        discussion: """
            Off by default: nothing throttles unless an operator says so.

            Lower the rate step by step while late drops persist:
              capfleet policy DEV --drop-recovery on [--min-fps 10]
            At serious pressure or above, run at most 15 fps:
              capfleet policy DEV --on-pressure serious --frame-rate 15
            Lift the pressure cap:
              capfleet policy DEV --on-pressure off

            Every step, cap and restore is published as a policy_acted event and audited. Policies are stored \
            and pushed again when the node registers. Needs the device's configuration lease.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(help: "Drop recovery: on or off.") var dropRecovery: String?
    @Option(help: "Never below this rate (default 5).") var minFps: Double?
    @Option(help: "Late drops above this share of frames in a second count as persisting (default 0.05).") var lateShare: Double?
    @Option(help: "Seconds without late drops before the rate is restored (default 5).") var quietSeconds: UInt32?
    @Option(help: "Cap the frame rate while the host's pressure is at this level or above: fair, serious, critical, shutdown; or off.")
    var onPressure: String?
    @Option(help: "With --on-pressure: the most frames per second while the cap is in force.") var frameRate: Double?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard dropRecovery != nil || onPressure != nil else {
            throw ValidationError("say which policy: --drop-recovery on|off, or --on-pressure LEVEL --frame-rate FPS (or --on-pressure off)")
        }
        if let dropRecovery, !["on", "off"].contains(dropRecovery.lowercased()) { throw ValidationError("--drop-recovery is on or off") }
        if let onPressure {
            let text = onPressure.lowercased()
            if text == "off" { return }
            guard let level = PressureLevel(name: text), level > .nominal else {
                throw ValidationError("--on-pressure is fair, serious, critical, shutdown or off")
            }
            guard let frameRate, frameRate > 0 else { throw ValidationError("--on-pressure \(text) needs --frame-rate FPS (above 0)") }
        } else if frameRate != nil {
            throw ValidationError("--frame-rate goes with --on-pressure LEVEL")
        }
    }

    func run() throws {
        var reply = Capfleet_V1_OperatorReply()
        var said: [String] = []
        if let dropRecovery {
            reply = try coordinator.call(
                .setDropRecoveryPolicy(
                    .with {
                        $0.deviceID = device
                        $0.policy = .with {
                            $0.enabled = dropRecovery.lowercased() == "on"
                            $0.minimumFps = minFps ?? 0
                            $0.lateDropShare = lateShare ?? 0
                            $0.quietSeconds = quietSeconds ?? 0
                        }
                    })
            ).reply
            said.append("drop recovery \(dropRecovery.lowercased())" + (reply.status.reason.isEmpty ? "" : " (\(reply.status.reason))"))
        }
        if let onPressure {
            let level = PressureLevel(name: onPressure.lowercased())
            let policy = level.map { PressurePolicy(isEnabled: true, level: $0, frameRate: frameRate ?? 0) } ?? .off
            reply = try coordinator.call(
                .changePressurePolicy(
                    .with {
                        $0.deviceID = device
                        $0.policy = policy.wire()
                    })
            ).reply
            said.append("pressure policy " + policy.summary + (reply.status.reason.isEmpty ? "" : " (\(reply.status.reason))"))
        }
        if json {
            print(try FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
        } else {
            print("\(device): " + said.joined(separator: "; "))
        }
    }
}

struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unlock", abstract: "Give back a device's configuration lease.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let reply = try coordinator.call(.unlockDevice(.with { $0.deviceID = device })).reply
        if json {
            print(try FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
        } else {
            print("\(device): unlocked")
        }
    }
}
