import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// `capfleet detect`: what a camera's agent looks for in its frames (proto-docs/detection.md).
struct DetectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect",
        abstract:
            "Look for codes and faces in a camera's frames (on its host); detections go to telemetry (meta.DEVICE) and into takes' timed metadata.",
        discussion:
            "Needs the camera's lease (capfleet lock). Remembered, and set again whenever the camera's agent registers. Codes: \(BarcodeSymbology.allCases.map(\.rawValue).joined(separator: ", ")) (ZBar; it has no Data Matrix decoder)."
    )
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The camera.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(help: "Symbologies to look for, comma-separated, e.g. qr,ean13.") var codes: String?
    @Flag(help: "Look for faces (up to 10 a frame, each with an id that stays with it).") var faces = false
    @Option(help: "Only this part of the frame: x,y,w,h as fractions of the frame, e.g. 0.25,0.25,0.5,0.5.") var region: String?
    @Option(help: "Frames examined a second at most (default 5).") var fps: Double?
    @Flag(
        help:
            "Auto-frame the faces (implies --faces): a crop of the frame that keeps them in view, in every frame's metadata (formats 1280 wide or more)."
    )
    var framing = false
    @Option(help: "Framing: space around the faces, in face heights on each side (default 0.5).") var margin: Double?
    @Option(help: "Framing: how fast the crop moves, in frame widths a second (default 0.5).") var speed: Double?
    @Option(help: "Framing: seconds the faces stand off the crop before it reframes (default 0.6).") var hold: Double?
    @Option(help: "Framing: the smallest crop, as a fraction of the frame's width (default 0.5).") var minCrop: Double?
    @Flag(
        help:
            "Framing: steer the camera's own zoom, pan and tilt instead of a crop (cameras with pan_absolute and tilt_absolute and a known field of view; any format); its frames then hold only the framed view."
    )
    var optics = false
    @Flag(help: "Stop detecting.") var off = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if off && (codes != nil || faces || region != nil || fps != nil || framing) { throw ValidationError("--off goes alone") }
        if !off && codes == nil && !faces && !framing {
            throw ValidationError("say what to look for: --codes, --faces, or both, or --framing (or --off)")
        }
        if !framing && (margin != nil || speed != nil || hold != nil || minCrop != nil || optics) {
            throw ValidationError("--margin, --speed, --hold, --min-crop and --optics are for --framing")
        }
    }

    static func region(_ text: String) throws -> NormalizedRect {
        let parts = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 4 else { throw ValidationError("--region is x,y,w,h as fractions of the frame, e.g. 0.25,0.25,0.5,0.5, not \(text)") }
        return NormalizedRect(x: parts[0], y: parts[1], width: parts[2], height: parts[3])
    }

    func run() throws {
        var settings = DetectionSettings.off
        if !off {
            let symbologies: [BarcodeSymbology]
            switch BarcodeSymbology.list(codes ?? "") {
            case let .success(list): symbologies = list
            case let .failure(error): throw CLIFailure(error.description)
            }
            let standard = FramingSettings.standard
            settings = DetectionSettings(
                codes: symbologies, faces: faces || framing, region: try region.map(Self.region) ?? .whole,
                framesPerSecond: fps ?? DetectionSettings.defaultFramesPerSecond,
                framing: framing
                    ? FramingSettings(
                        margin: margin ?? standard.margin, maximumSpeed: speed ?? standard.maximumSpeed, holdSeconds: hold ?? standard.holdSeconds,
                        minimumCrop: minCrop ?? standard.minimumCrop, optics: optics) : nil)
            if let problem = settings.problem { throw CLIFailure(problem.description) }
        }
        let reply = try coordinator.call(
            .changeDetection(
                .with {
                    $0.deviceID = device
                    $0.settings = settings.wire
                }), timeout: 15
        ).reply
        let applied = (try? DetectionSettings(wire: reply.detection)) ?? settings
        if json {
            print(try FleetTables.json(DetectionViews.Settings(device: device, applied)))
        } else if applied.isOn {
            print("\(device) looks for \(DetectionViews.summary(applied)); follow it with: capfleet metadata \(device) --follow")
        } else {
            print("\(device) detects nothing now")
        }
    }
}

/// `capfleet metadata`: a camera's detections as they come, from the telemetry endpoint.
struct MetadataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metadata",
        abstract:
            "A camera's detected codes and faces as its agent reports them (telemetry topic meta.DEVICE), one line per examined frame with objects.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The camera.", completion: FleetCompletion.deviceIDs) var device: String
    @Flag(help: "Keep following until Ctrl-C (without it: until the first report, or --count).") var follow = false
    @Option(help: "Stop after this many reports.") var count: Int?
    @Option(help: "Give up after this many seconds without one (default: never with --follow, else 10).") var wait: Double?
    @Option(help: "The coordinator's telemetry port (default: the one the coordinator names).") var telemetryPort: UInt16?
    @Flag(help: "Print one JSON object per line.") var json = false

    func run() throws {
        let client = try coordinator.client()
        let subscriber = try TelemetrySubscription.open(coordinator, client: client, port: telemetryPort, topic: TelemetryTopic.meta(device))
        try TelemetrySubscription.follow(
            subscriber, topic: TelemetryTopic.meta(device), limit: count ?? (follow ? nil : 1), patience: wait ?? (follow ? nil : 10),
            silent: { patience in
                CLIFailure(
                    "no detection report from \(device) in \(VideoFormat.trim(patience)) s: is detection on (capfleet detect \(device) …), its consent granted, and something in view?"
                )
            }
        ) { payload, _ in
            guard let report = try? Capfleet_V1_DetectionReport(serializedBytes: payload) else { return 0 }
            print(json ? try FleetTables.jsonLine(DetectionViews.Report(report)) : DetectionViews.line(report))
            return 1
        }
    }
}

/// `capfleet sensor`: a sensor stream's readings as they come, from the telemetry endpoint.
struct SensorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sensor",
        abstract:
            "A sensor stream's readings in fleet time as its agent sends them (telemetry topic data.NODE.STREAM; proto-docs/sensors.md), one line per reading."
    )
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The sensor stream's device (sen-NODE-STREAM).", completion: FleetCompletion.deviceIDs) var device: String
    @Flag(help: "Keep following until Ctrl-C (without it: until the first reading, or --count).") var follow = false
    @Option(help: "Stop after this many readings.") var count: Int?
    @Option(help: "Give up after this many seconds without one (default: never with --follow, else 10).") var wait: Double?
    @Option(help: "The coordinator's telemetry port (default: the one the coordinator names).") var telemetryPort: UInt16?
    @Flag(help: "Print one JSON object per line.") var json = false

    func run() throws {
        let client = try coordinator.client()
        guard let info = try client.call(.getDevice(.with { $0.deviceID = device })).reply.devices.first else {
            throw CLIFailure("no device \(device); see capfleet devices")
        }
        let parts = device.split(separator: "-", maxSplits: 2)
        guard info.kind == .sensor, parts.count == 3 else {
            throw CLIFailure("\(device) is not a sensor stream (sen-NODE-STREAM); capfleet devices lists them as kind sensor")
        }
        let topic = TelemetryTopic.data(nodeID: info.nodeID, stream: String(parts[2]))
        let subscriber = try TelemetrySubscription.open(coordinator, client: client, port: telemetryPort, topic: topic)
        try TelemetrySubscription.follow(
            subscriber, topic: topic, limit: count ?? (follow ? nil : 1), patience: wait ?? (follow ? nil : 10),
            silent: { patience in
                CLIFailure(
                    "no reading of \(device) in \(VideoFormat.trim(patience)) s: is a process sending it to the agent's sensor socket, and its consent granted (capfleet consent grant \(device))?"
                )
            }
        ) { payload, wanted in
            guard let batch = try? Capfleet_V1_SensorData(serializedBytes: payload) else { return 0 }
            let readings = batch.readings.prefix(wanted ?? batch.readings.count)
            for reading in readings {
                print(json ? try FleetTables.jsonLine(SensorViews.Reading(batch, reading)) : SensorViews.line(batch, reading))
            }
            return readings.count
        }
    }
}
