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
