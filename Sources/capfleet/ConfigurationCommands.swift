import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// Prints the device as the coordinator reports it after a change.
private func show(_ reply: Capfleet_V1_OperatorReply, json: Bool) {
    if json {
        print(FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
    } else if let device = reply.devices.first {
        print("\(device.deviceID): \(VideoFormat(wire: device.activeFormat).label) at \(VideoFormat.trim(device.activeFrameRate)) fps")
    }
}

struct FormatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "format",
        abstract: "Set a device's active format: an entry of its list (--index), or the best match for a size, pixel format and rate.",
        discussion: "See the list with `capfleet formats DEVICE`. A request the device cannot meet is refused with what it supports.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.") var device: String
    @Option(help: "Index in the device's format list.") var index: Int?
    @Option(help: "WIDTHxHEIGHT to match.") var size: String?
    @Option(help: "FourCC to match, e.g. NV12.") var pixelFormat: String?
    @Option(help: "Frame rate the format must support.") var fps: Double?
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
        show(try coordinator.call(.changeFormat(request)).reply, json: json)
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
    @Argument(help: "The device id.") var device: String
    @Argument(help: "The preset.") var preset: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        show(try coordinator.call(.changeFormat(.with { $0.deviceID = device; $0.preset = preset })).reply, json: json)
    }
}

struct FrameRateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frame-rate", abstract: "Set a device's frame rate within its active format's ranges, or `default`.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.") var device: String
    @Argument(help: "Frames per second, or `default` for the format's default.") var rate: String
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
        show(try coordinator.call(.changeFrameRate(.with { $0.deviceID = device; $0.framesPerSecond = fps })).reply, json: json)
    }
}

struct ZoomDeviceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zoom",
        abstract: "Zoom a device: jump to a factor, ramp to it (--ramp RATE, powers of two per second), or --cancel a ramp.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.") var device: String
    @Argument(help: "Zoom factor, 1 up to the active format's maximum.") var factor: Double?
    @Option(help: "Ramp at this many powers of two per second (1 doubles the factor every second).") var ramp: Double?
    @Flag(help: "Cancel a ramp in progress; it eases out.") var cancel = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard cancel != (factor != nil) else { throw ValidationError("give a zoom factor, or --cancel") }
        guard !(cancel && ramp != nil) else { throw ValidationError("--ramp goes with a factor, not with --cancel") }
    }

    func run() throws {
        let reply = try coordinator.call(.changeZoom(.with {
            $0.deviceID = device
            $0.factor = factor ?? 0
            $0.rampRate = ramp ?? 0
            $0.cancel = cancel
        })).reply
        let method = switch reply.zoomMethod {
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
            }
            let format = reply.devices.first?.activeFormat
            print(FleetTables.json(View(deviceId: device, zoomFactor: reply.zoomFactor, zoomMethod: "\(reply.zoomMethod)",
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
    @Argument(help: "The device id.") var device: String
    @Option(name: .customLong("for"), help: "Seconds the lease lasts (default 300, at most 86400).") var seconds: UInt32 = 300
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let reply = try coordinator.call(.lockDevice(.with { $0.deviceID = device; $0.seconds = seconds })).reply
        if json {
            print(FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
        } else if let info = reply.devices.first {
            print("\(device): locked for configuration by \(info.leaseHolder) until \(FleetTables.clock(info.leaseExpiresUnixMs))")
        }
    }
}

struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unlock", abstract: "Give back a device's configuration lease.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.") var device: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let reply = try coordinator.call(.unlockDevice(.with { $0.deviceID = device })).reply
        if json {
            print(FleetTables.json(reply.devices.map { JSONViews.Device($0) }))
        } else {
            print("\(device): unlocked")
        }
    }
}
