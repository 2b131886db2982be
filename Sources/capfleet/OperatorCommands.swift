import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

extension CoordinatorOptions {
    func loadCredential() throws -> OperatorCredential {
        do {
            return try OperatorCredential.load(path: OperatorCredential.path(flag: credential))
        } catch {
            throw CLIFailure(error.description)
        }
    }

    /// `atLeast`: requests that wait on purpose (a sync check) need longer than the usual timeout.
    func client(timeoutAtLeast atLeast: Double = 0) throws -> OperatorClient {
        let credential = try loadCredential()
        // The flag, else the environment, else the address in the credential, else this machine.
        let written =
            coordinator ?? ProcessInfo.processInfo.environment[WireDefaults.coordinatorEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 }
            ?? credential.coordinator
        guard let address = CoordinatorAddress.resolve(written, defaultPort: WireDefaults.operatorPort) else {
            throw CLIFailure("cannot read the coordinator address \(written ?? ""): write HOST or HOST:PORT")
        }
        do {
            return try OperatorClient(address: address, credential: credential, timeout: max(timeout, atLeast))
        } catch {
            throw CLIFailure(error.description)
        }
    }

    /// One connection for a command that makes many requests (a download, a verify).
    func session(timeoutAtLeast atLeast: Double = 0) throws -> OperatorSession {
        OperatorSession(client: try client(timeoutAtLeast: atLeast))
    }

    func call(
        _ body: Capfleet_V1_OperatorRequest.OneOf_Body, timeout atLeast: Double = 0
    ) throws -> (reply: Capfleet_V1_OperatorReply, payload: [UInt8]?) {
        let client = try client(timeoutAtLeast: atLeast)
        do {
            return try client.call(body)
        } catch {
            throw CLIFailure(error.description)
        }
    }
}

struct NodesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nodes", abstract: "List the fleet's nodes, forget one, or revoke one.",
        subcommands: [List.self, Forget.self, Revoke.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        // Named, not derived from the type: the help dump (and so the manual page) names a
        // default subcommand only by its configured name.
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List every node the coordinator knows, online or not.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let nodes = try coordinator.call(.listNodes(.init())).reply.nodes
            print(json ? try FleetTables.json(nodes.map(JSONViews.Node.init)) : FleetTables.nodes(nodes))
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an offline node and its devices from the coordinator (audited).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The node id, as `capfleet nodes` shows it.", completion: FleetCompletion.nodeIDs) var node: String

        func run() throws {
            _ = try coordinator.call(.forgetNode(.with { $0.nodeID = node }))
            print("forgot node \(node)")
        }
    }
}

struct ClockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clock",
        abstract: "Show each node's clock against fleet time: sync state, wall-clock offset, drift, error bound, round trip.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Flag(help: "Print JSON (nanoseconds and ppm, with the monotonic offset too).") var json = false

    func run() throws {
        let nodes = try coordinator.call(.listNodes(.init())).reply.nodes
        print(json ? try FleetTables.json(nodes.map(JSONViews.Clock.init)) : FleetTables.clocks(nodes))
    }
}

struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "devices", abstract: "List every camera of the fleet.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Option(help: "Only the devices of this node.", completion: FleetCompletion.nodeIDs) var node: String?
    @Flag(help: "Print JSON, with each device's full format list.") var json = false

    func run() throws {
        let session = try coordinator.session()
        let devices = try session.call(
            .listDevices(
                .with {
                    $0.nodeID = node ?? ""
                    $0.withFormats = json
                })
        ).reply.devices
        if json {
            // One request for the whole listing; a coordinator before 1.4 sends no formats with
            // it, so those come one request per device, several in flight.
            let missing = devices.filter { $0.formats.isEmpty && $0.formatCount > 0 }
            let fetched = try session.callEach(missing.map { device in .getFormats(.with { $0.deviceID = device.deviceID }) })
            let formats = Dictionary(zip(missing.map(\.deviceID), fetched.map(\.formats)), uniquingKeysWith: { first, _ in first })
            print(try FleetTables.json(devices.map { JSONViews.Device($0, formats: formats[$0.deviceID] ?? $0.formats) }))
        } else {
            print(FleetTables.devices(devices))
            let interrupted = FleetTables.interruptions(devices.map { ($0.deviceID, $0.interruption) })
            if !interrupted.isEmpty { print("\n" + interrupted) }
        }
    }
}

struct DeviceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device", abstract: "Show one device in full: state, controls, crop and focus capabilities, interruption.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let info = try coordinator.device(device)
        print(json ? try FleetTables.json(JSONViews.DeviceDetails(info)) : FleetTables.details(info))
    }
}

struct FormatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "formats", abstract: "Show every format a device supports.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id, as `capfleet devices` shows it.", completion: FleetCompletion.deviceIDs) var device: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let formats = try coordinator.call(.getFormats(.with { $0.deviceID = device })).reply.formats
        print(json ? try FleetTables.json(formats.map(JSONViews.Format.init)) : FleetTables.formats(formats))
    }
}

struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "A live view of every node's pressure and every device: fps, bytes/s, drops by reason, last frame. Refreshes once a second.",
        discussion:
            "Devices in trouble (offline, interrupted, dropping frames, stalled, slow, on a host at serious pressure or worse) are marked ! and the reasons listed under the table."
    )
    @OptionGroup var coordinator: CoordinatorOptions
    @Option(help: "Stop after this many refreshes (default: until Ctrl-C).") var count: Int?
    @Flag(help: "Print one JSON array per refresh instead of a table.") var json = false

    func run() throws {
        let client = try coordinator.client()
        let interactive = isatty(STDOUT_FILENO) == 1 && !json
        var refreshes = 0
        var previous: [Capfleet_V1_DeviceStatus]?
        while count.map({ refreshes < $0 }) ?? true {
            if refreshes > 0 { Thread.sleep(forTimeInterval: 1) }
            refreshes += 1
            let reply: Capfleet_V1_OperatorReply
            do {
                reply = try client.call(.getFleetStats(.init())).reply
            } catch {
                throw CLIFailure(error.description)
            }
            let statuses = reply.deviceStats
            let trouble = FleetTables.trouble(statuses, previous: previous, nodes: reply.nodeStats)
            previous = statuses
            if json {
                print(try FleetTables.json(statuses.map { JSONViews.DeviceStats($0, trouble: trouble[$0.deviceID] ?? []) }))
            } else {
                // Clear the screen and home the cursor, like top(1).
                if interactive { print("\u{1B}[2J\u{1B}[H", terminator: "") }
                print("CaptureFleet at \(client.address)  \(Date().formatted(date: .omitted, time: .standard))\n")
                if !reply.nodeStats.isEmpty { print(FleetTables.pressure(reply.nodeStats, reports: reply.pressure) + "\n") }
                print(FleetTables.watch(statuses, trouble: trouble))
            }
            fflush(nil)
        }
    }
}

struct PressureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pressure", abstract: "Each node's pressure level (nominal, fair, serious, critical, shutdown) and what contributes to it.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let reply = try coordinator.call(.getFleetStats(.init())).reply
        if json {
            print(
                try FleetTables.json(
                    reply.nodeStats.map { node in
                        JSONViews.Pressure(node, report: reply.pressure.first { $0.nodeID == node.nodeID })
                    }))
        } else {
            print(FleetTables.pressure(reply.nodeStats, reports: reply.pressure))
        }
    }
}

struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot", abstract: "Fetch the next frame of a device from the coordinator, as a picture (.jpg, .png) or its raw bytes.",
        discussion:
            "A .jpg or .png holds every pixel of the frame, converted from its pixel format; .raw (or --raw) the bytes as the camera sent them. --preview takes the device's latest preview instead, without asking for a frame."
    )
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(name: .shortAndLong, help: "Write the frame to this file: .jpg or .png (a picture), .raw (its bytes).") var output: String?
    @Flag(help: "Write the frame's bytes as they came, whatever the file's extension.") var raw = false
    @Flag(help: "The device's latest preview (a small JPEG, about a second old at most) instead of its next full-rate frame.") var preview = false
    @Option(help: "JPEG quality, 1 to 100, for a .jpg of a raw frame.") var quality = 92
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if let output { _ = try PictureFile.kind(of: output, raw: raw) }
        guard (1...100).contains(quality) else { throw ValidationError("--quality must be from 1 to 100") }
    }

    func run() throws {
        let header: Capfleet_V1_FrameHeader
        var pixels: [UInt8]
        var previewAge: UInt64?
        if preview {
            guard let latest = try coordinator.call(.getPreview(.with { $0.deviceID = device })).reply.previews.first else {
                throw CLIFailure("the coordinator sent no preview of \(device)")
            }
            (header, pixels, previewAge) = (latest.header, [UInt8](latest.jpeg), latest.ageMs)
        } else {
            let (reply, payload) = try coordinator.call(.getLatestFrame(.with { $0.deviceID = device }))
            (header, pixels) = (reply.frameHeader, payload ?? [])
        }
        let stamped: UInt32? = pixels.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress,
                let luma = LumaPlane(
                    base: base, pixelFormat: PixelFormat(header.layout.pixelFormat),
                    width: Int(header.layout.width), height: Int(header.layout.height)),
                raw.count >= Int(header.layout.width) * Int(header.layout.height)
            else { return nil }
            return FrameNumberStamp.read(from: luma)
        }
        if let output {
            try SnapshotPicture.write(header: header, payload: pixels, to: output, as: try PictureFile.kind(of: output, raw: raw), quality: quality)
        }
        if json {
            struct View: Encodable {
                var deviceId, nodeId, pixelFormat: String
                var sequence, captureMonotonicNs, payloadSize: UInt64
                var width, height: UInt32
                var zoomFactor: Double
                var upscaled: Bool
                /// The device's consent when the frame was taken, and whether its pixels were withheld.
                var consent: String
                var black, recording: Bool
                /// Capture time in fleet time and its error bound, once the node's clock has an estimate.
                var fleetTimeNs, fleetTimeUncertaintyNs: UInt64?
                var stampedFrameNumber: UInt32?
                var output: String?
                /// With --preview: it is the device's latest preview, this old when the coordinator answered.
                var preview: Bool
                var previewAgeMs: UInt64?

                enum CodingKeys: String, CodingKey {
                    case deviceId = "device_id", nodeId = "node_id", pixelFormat = "pixel_format", sequence,
                        captureMonotonicNs = "capture_monotonic_ns", payloadSize = "payload_size", width, height,
                        zoomFactor = "zoom_factor", upscaled, consent, black, recording, fleetTimeNs = "fleet_time_ns",
                        fleetTimeUncertaintyNs = "fleet_time_uncertainty_ns", stampedFrameNumber = "stamped_frame_number",
                        output, preview, previewAgeMs = "preview_age_ms"
                }
            }
            let timed = header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0
            print(
                try FleetTables.json(
                    View(
                        deviceId: header.deviceID, nodeId: header.nodeID, pixelFormat: header.layout.pixelFormat,
                        sequence: header.sequence, captureMonotonicNs: header.captureMonotonicNs,
                        payloadSize: header.payloadSize, width: header.layout.width, height: header.layout.height,
                        zoomFactor: header.zoomFactor > 0 ? header.zoomFactor : 1,
                        upscaled: header.flags & UInt32(Capfleet_V1_FrameFlag.upscaled.rawValue) != 0,
                        consent: (ConsentState(wire: header.consent) ?? .notDetermined).rawValue,
                        black: header.flags & UInt32(Capfleet_V1_FrameFlag.black.rawValue) != 0,
                        recording: header.flags & UInt32(Capfleet_V1_FrameFlag.recording.rawValue) != 0,
                        fleetTimeNs: timed ? header.fleetTimeNs : nil,
                        fleetTimeUncertaintyNs: timed ? header.fleetTimeUncertaintyNs : nil,
                        stampedFrameNumber: stamped, output: output, preview: preview, previewAgeMs: previewAge)))
        } else {
            let withheld =
                header.flags & UInt32(Capfleet_V1_FrameFlag.black.rawValue) != 0
                ? " (black: consent \((ConsentState(wire: header.consent) ?? .notDetermined).rawValue))" : ""
            print(
                (preview ? "preview of frame" : "frame")
                    + " \(header.sequence) of \(header.deviceID): \(header.layout.width)x\(header.layout.height) \(header.layout.pixelFormat), \(pixels.count) bytes"
                    + withheld
                    + (stamped.map { ", stamped frame number \($0)" } ?? "") + (output.map { " → \($0)" } ?? ""))
        }
    }
}

struct IngestStatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rejections", abstract: "Show how much malformed input each coordinator endpoint has rejected, by reason.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let rejections = try coordinator.call(.getIngestStats(.init())).reply.rejections
        if json {
            print(try FleetTables.json(rejections.map(JSONViews.Rejection.init)))
        } else if rejections.isEmpty {
            print("no input has been rejected")
        } else {
            print(FleetTables.table(["ENDPOINT", "REASON", "COUNT"], rejections.map { [$0.endpoint, $0.reason, String($0.count)] }))
        }
    }
}
