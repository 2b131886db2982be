import FleetCore
import FleetProtocol
import Foundation

/// How takes are shown: tables for people, JSON (snake_case keys) for programs.
public enum RecordingViews {
    public struct Take: Encodable {
        struct Device: Encodable {
            var deviceId, nodeId, state, format: String
            var frameRate: Double
            var firstFleetNs, lastFleetNs, firstSequence, lastSequence: UInt64?
            var frames, bytes: UInt64
            var drops: [String: UInt64]
            var segments: UInt32
            var endReason: String?
            var withheldFrames: UInt64
            var nodeOnline: Bool
            /// The codec asked for this camera (the take's, or its own), and for encoded parts
            /// the encoder that wrote it and the camera's own format.
            var codec: String
            var encoder: String?
            var sourceFormat: String?
            /// A camera's part as recorded (frames.md, "Colour and depth"): significant bits per
            /// sample, the colour the camera declared, a depth part's metres per unit.
            var bitDepth: UInt32?
            var colour: JSONViews.Colour?
            var depthUnitMetres: Double?

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", nodeId = "node_id", state, format, frameRate = "frame_rate",
                    firstFleetNs = "first_fleet_ns", lastFleetNs = "last_fleet_ns", firstSequence = "first_sequence",
                    lastSequence = "last_sequence", frames, bytes, drops, segments, endReason = "end_reason",
                    withheldFrames = "withheld_frames", nodeOnline = "node_online", codec, encoder,
                    sourceFormat = "source_format", bitDepth = "bit_depth", colour, depthUnitMetres = "depth_unit_metres"
            }
        }
        struct Segment: Encodable {
            var deviceId: String
            var number: UInt32
            var path, state, sha256: String
            var sizeBytes, frames: UInt64
            var firstFleetNs, lastFleetNs, firstSequence, lastSequence: UInt64?
            /// Where the file is: "coordinator", or the node whose disk holds it.
            var location: String
            var nodeOnline: Bool
            var collectedPath: String?
            var drops: [String: UInt64]
            /// Its copies on storage destinations (recordings.md, "Offload").
            var copies: [Copy]

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", number, path, state, sha256, sizeBytes = "size_bytes", frames,
                    firstFleetNs = "first_fleet_ns", lastFleetNs = "last_fleet_ns", firstSequence = "first_sequence",
                    lastSequence = "last_sequence", location, nodeOnline = "node_online", collectedPath = "collected_path",
                    drops, copies
            }
        }
        struct Copy: Encodable {
            var destination, objectPath, state: String
            var proof: String?
            var sentBytes: UInt64
            var atUnixMs: Int64
            var error: String?
            /// Who sent it: the node, or "coordinator".
            var sentBy: String

            init(_ copy: Capfleet_V1_SegmentCopyInfo) {
                destination = copy.destination; objectPath = copy.objectPath; state = copy.state
                proof = copy.proof.isEmpty ? nil : copy.proof
                sentBytes = copy.sentBytes; atUnixMs = copy.atUnixMs
                error = copy.error.isEmpty ? nil : copy.error
                sentBy = copy.nodeID.isEmpty ? "coordinator" : copy.nodeID
            }

            enum CodingKeys: String, CodingKey {
                case destination, objectPath = "object_path", state, proof, sentBytes = "sent_bytes", atUnixMs = "at_unix_ms", error,
                    sentBy = "sent_by"
            }
        }
        /// The take's offload to one destination.
        struct Offload: Encodable {
            var destination: String
            var segments, verified, heldBack: UInt32
            var verifiedBytes, pendingBytes, sendingBytes: UInt64
            var running, destinationFull: Bool
            var error, indexPath: String?

            init(_ offload: Capfleet_V1_TakeOffloadInfo) {
                destination = offload.destination; segments = offload.segments; verified = offload.verified; heldBack = offload.heldBack
                verifiedBytes = offload.verifiedBytes; pendingBytes = offload.pendingBytes; sendingBytes = offload.sendingBytes
                running = offload.running; destinationFull = offload.destinationFull
                error = offload.error.isEmpty ? nil : offload.error
                indexPath = offload.indexPath.isEmpty ? nil : offload.indexPath
            }

            enum CodingKeys: String, CodingKey {
                case destination, segments, verified, heldBack = "held_back", verifiedBytes = "verified_bytes", pendingBytes = "pending_bytes",
                    sendingBytes = "sending_bytes", running, destinationFull = "destination_full", error, indexPath = "index_path"
            }
        }
        struct Event: Encodable {
            var deviceId: String?
            var fleetNs: UInt64
            var kind, detail: String

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", fleetNs = "fleet_ns", kind, detail
            }
        }
        var id, name, state, directory, createdBy: String
        var error: String?
        var startFleetNs: UInt64
        /// How long before its instant it starts (recordings.md, "Pre-roll"); absent: none.
        var preRollMs: UInt32?
        var stopFleetNs: UInt64?
        var createdUnixMs: Int64
        var startSpreadNs: UInt64?
        var frames, bytes, sizeBytes: UInt64
        var store: String
        var agentHeldBytes, collectedBytes: UInt64
        var collectError: String?
        /// Its offloads to storage destinations.
        var offloads: [Offload]
        /// The codec asked for: raw, ffv1, h264, hevc, with quality or bit rate and GOP.
        var codec: String
        var quality: Int?
        var bitrate: Int?
        var gop: Int?
        /// Set when the take's encoder steadies the picture (deshake).
        var stabilisation: String?
        var devices: [Device]
        /// Sensor streams whose readings its cameras' files carry (sensors.md, "In takes").
        var sensors: [String]
        var segments: [Segment]?
        var events: [Event]?
        /// Its sync and integrity (recordings.md): so far while it records, shown in detail.
        var syncReport: TakeSyncViews.Report?

        public init(_ take: Capfleet_V1_TakeInfo, detailed: Bool = false) {
            id = take.id; name = take.name; state = take.state; directory = take.directory; createdBy = take.createdBy
            error = take.error.isEmpty ? nil : take.error
            startFleetNs = take.startFleetNs; stopFleetNs = take.stopFleetNs == 0 ? nil : take.stopFleetNs
            preRollMs = take.preRollMs > 0 ? take.preRollMs : nil
            createdUnixMs = take.createdUnixMs
            startSpreadNs = take.devices.contains { $0.firstFleetNs != 0 } ? take.startSpreadNs : nil
            frames = take.frames; bytes = take.bytes; sizeBytes = take.sizeBytes
            store = take.store.isEmpty ? "coordinator" : take.store
            agentHeldBytes = take.agentHeldBytes; collectedBytes = take.collectedBytes
            collectError = take.collectError.isEmpty ? nil : take.collectError
            offloads = take.offloads.map(Offload.init)
            let encoding = TakeEncoding(wire: take.encoding) ?? .raw
            codec = encoding.codec.rawValue
            quality = encoding.codec.isLossy && encoding.bitrate == 0 ? encoding.quality ?? TakeEncoding.defaultQuality : nil
            bitrate = encoding.bitrate > 0 ? encoding.bitrate : nil
            gop = encoding.gop > 0 ? encoding.gop : nil
            stabilisation = encoding.stabilisation == .off ? nil : encoding.stabilisation.rawValue
            syncReport = take.hasSyncReport ? TakeSyncViews.Report(take.syncReport) : nil
            sensors = take.sensorDeviceIds
            devices = take.devices.map { device in
                let hasFrames = device.frames > 0
                return Device(
                    deviceId: device.deviceID, nodeId: device.nodeID, state: device.state,
                    format: device.pixelFormat.isEmpty
                        ? "" : device.pixelFormat == "FLAC" ? "FLAC (sound)" : "\(device.width)x\(device.height) \(device.pixelFormat)",
                    frameRate: device.frameRate,
                    firstFleetNs: hasFrames ? device.firstFleetNs : nil, lastFleetNs: hasFrames ? device.lastFleetNs : nil,
                    firstSequence: hasFrames ? device.firstSequence : nil, lastSequence: hasFrames ? device.lastSequence : nil,
                    frames: device.frames, bytes: device.bytes,
                    drops: dropsByReason(device.drops),
                    segments: device.segments, endReason: device.endReason.isEmpty ? nil : device.endReason,
                    withheldFrames: device.withheldFrames, nodeOnline: device.nodeOnline,
                    codec: (TakeEncoding(wire: device.encoding) ?? encoding).summary,
                    encoder: device.encoder.isEmpty ? nil : device.encoder,
                    sourceFormat: device.sourcePixelFormat.isEmpty ? nil : device.sourcePixelFormat,
                    bitDepth: device.pixelFormat.isEmpty || device.pixelFormat == "FLAC" ? nil : device.bitDepth == 0 ? 8 : device.bitDepth,
                    colour: device.hasColour ? ColourDescription(wire: device.colour).map(JSONViews.Colour.init) : nil,
                    depthUnitMetres: device.depthUnitMetres > 0 ? device.depthUnitMetres : nil)
            }
            if detailed {
                segments = take.segments.map { segment in
                    let hasFrames = segment.frames > 0
                    return Segment(
                        deviceId: segment.deviceID, number: segment.number, path: segment.path, state: segment.state, sha256: segment.sha256,
                        sizeBytes: segment.sizeBytes, frames: segment.frames,
                        firstFleetNs: hasFrames ? segment.firstFleetNs : nil, lastFleetNs: hasFrames ? segment.lastFleetNs : nil,
                        firstSequence: hasFrames ? segment.firstSequence : nil, lastSequence: hasFrames ? segment.lastSequence : nil,
                        location: segment.nodeID.isEmpty ? "coordinator" : segment.nodeID, nodeOnline: segment.nodeOnline,
                        collectedPath: segment.collectedPath.isEmpty ? nil : segment.collectedPath,
                        drops: dropsByReason(segment.drops), copies: segment.copies.map(Copy.init))
                }
                events = take.events.map {
                    Event(deviceId: $0.deviceID.isEmpty ? nil : $0.deviceID, fleetNs: $0.fleetNs, kind: $0.kind, detail: $0.detail)
                }
            }
        }

        enum CodingKeys: String, CodingKey {
            case id, name, state, directory, createdBy = "created_by", error, startFleetNs = "start_fleet_ns", preRollMs = "pre_roll_ms",
                stopFleetNs = "stop_fleet_ns", createdUnixMs = "created_unix_ms", startSpreadNs = "start_spread_ns", frames,
                bytes, sizeBytes = "size_bytes", store, agentHeldBytes = "agent_held_bytes", collectedBytes = "collected_bytes",
                collectError = "collect_error", offloads, codec, quality, bitrate, gop, stabilisation, devices, sensors, segments, events,
                syncReport = "sync_report"
        }
    }

    /// Drops by reason as JSON names them (proto-docs' DropCounts).
    static func dropsByReason(_ drops: Capfleet_V1_DropCounts) -> [String: UInt64] {
        ["late": drops.late, "out_of_buffers": drops.outOfBuffers, "discontinuity": drops.discontinuity, "encoder_late": drops.encoderLate]
    }

    public static func list(_ takes: [Capfleet_V1_TakeInfo]) -> String {
        guard !takes.isEmpty else { return "no takes yet: start one with `capfleet record start DEVICE...`" }
        return FleetTables.table(
            ["TAKE", "NAME", "STATE", "DEVICES", "FRAMES", "SIZE", "CODEC", "WHERE", "STARTED", "BY"],
            takes.map { take in
                [
                    take.id, take.name, take.state, String(take.devices.count), String(take.frames), bytes(take.sizeBytes),
                    (TakeEncoding(wire: take.encoding) ?? .raw).codec.rawValue, location(take), date(take.createdUnixMs), take.createdBy,
                ]
            })
    }

    /// Where a take's files are: on the coordinator, on the agents, or partly collected.
    static func location(_ take: Capfleet_V1_TakeInfo) -> String {
        guard take.store == "agent" else { return "coordinator" }
        if take.agentHeldBytes == 0, take.collectedBytes > 0 { return "agents, collected" }
        let offline = Set(take.devices.filter { !$0.nodeOnline }.map(\.nodeID))
        let base = take.collectedBytes > 0 ? "agents, \(bytes(take.collectedBytes)) collected" : "agents"
        return offline.isEmpty ? base : base + " (\(offline.count) node(s) offline)"
    }

    public static func show(_ take: Capfleet_V1_TakeInfo) -> String {
        var lines = [
            "take \(take.id) (\(take.name)): \(take.state)" + (take.error.isEmpty ? "" : " — \(take.error)"),
            "  started \(date(take.createdUnixMs)) by \(take.createdBy); fleet time \(take.startFleetNs)"
                + (take.stopFleetNs != 0
                    ? " to \(take.stopFleetNs) (\(seconds(take.stopFleetNs &- take.startFleetNs)))" : take.state == "recording" ? ", recording" : ""),
            take.store == "agent"
                ? "  \(take.frames) frames, \(bytes(take.sizeBytes)) written on the agents' disks (\(bytes(take.collectedBytes)) collected to \(take.directory))"
                : "  \(take.frames) frames, \(bytes(take.sizeBytes)) in \(take.directory)",
        ]
        let encoding = TakeEncoding(wire: take.encoding) ?? .raw
        lines.append(
            "  codec: " + (encoding.codec == .raw ? "raw (as captured)" : encoding.summary)
                + (take.bytes > 0 && take.frames > 0 ? ", \(bytes(take.bytes / take.frames)) a frame on average" : ""))
        if !take.collectError.isEmpty { lines.append("  last collect failed: \(take.collectError)") }
        for offload in take.offloads {
            let total = offload.verifiedBytes + offload.pendingBytes
            lines.append(
                "  on \(offload.destination): \(offload.verified) of \(offload.segments) segments proved (\(bytes(offload.verifiedBytes)) of \(bytes(total)))"
                    + (offload.running ? ", sending \(bytes(offload.sendingBytes))" : "")
                    + (offload.heldBack > 0 ? ", \(offload.heldBack) held back for consent" : "")
                    + (offload.indexPath.isEmpty ? "" : "; index \(offload.indexPath)"))
            if !offload.error.isEmpty {
                lines.append("    last offload failed" + (offload.destinationFull ? " (the destination is full)" : "") + ": \(offload.error)")
            }
        }
        if !take.sensorDeviceIds.isEmpty {
            lines.append("  sensor streams (in the cameras' files, sensor track): \(take.sensorDeviceIds.joined(separator: ", "))")
        }
        if take.devices.contains(where: { $0.firstFleetNs != 0 }) {
            lines.append("  start spread across devices: \(microseconds(take.startSpreadNs))")
        }
        if take.hasSyncReport { lines += TakeSyncViews.lines(take.syncReport) }
        lines.append("")
        lines.append(
            FleetTables.table(
                [
                    "DEVICE", "NODE", "STATE", "FORMAT", "FIRST", "LAST", "FRAMES", "BYTES", "LATE", "NO BUFFER", "DISCONT.",
                    "ENCODER LATE", "SEGMENTS",
                ],
                take.devices.map { device in
                    let hasFrames = device.frames > 0
                    let node = take.store == "agent" && !device.nodeOnline ? device.nodeID + " (offline)" : device.nodeID
                    let encoded = device.encoder.isEmpty ? "" : " (\(device.encoder) from \(device.sourcePixelFormat))"
                    // Deeper than 8 bits, or declaring its colour or depth: said after the format.
                    var depth: [String] = device.bitDepth > 8 ? ["\(device.bitDepth)-bit"] : []
                    if device.depthUnitMetres > 0 { depth.append("depth \(VideoFormat.trim(device.depthUnitMetres * 1000)) mm") }
                    if device.hasColour, let colour = ColourDescription(wire: device.colour) { depth.append(colour.label) }
                    let deeper = depth.isEmpty ? "" : ", " + depth.joined(separator: ", ")
                    return [
                        device.deviceID, node, device.state,
                        device.pixelFormat.isEmpty
                            ? "-"
                            : device.pixelFormat == "FLAC"
                                ? "FLAC (sound)" : "\(device.width)x\(device.height) \(device.pixelFormat)\(encoded)\(deeper)",
                        hasFrames ? "+" + seconds(device.firstFleetNs &- take.startFleetNs) : "-",
                        hasFrames ? "+" + seconds(device.lastFleetNs &- take.startFleetNs) : "-",
                        String(device.frames), bytes(device.bytes), String(device.drops.late), String(device.drops.outOfBuffers),
                        String(device.drops.discontinuity), String(device.drops.encoderLate), String(device.segments),
                    ]
                }))
        if !take.segments.isEmpty {
            lines.append("")
            lines.append(
                FleetTables.table(
                    ["DEVICE", "SEGMENT", "STATE", "FRAMES", "SIZE", "SEQUENCES", "WHERE", "PATH"],
                    take.segments.map { segment in
                        [
                            segment.deviceID, String(segment.number), segment.state, String(segment.frames), bytes(segment.sizeBytes),
                            segment.frames > 0 ? "\(segment.firstSequence)…\(segment.lastSequence)" : "-", where_(segment),
                            segment.collectedPath.isEmpty ? segment.path : segment.collectedPath,
                        ]
                    }))
        }
        if !take.events.isEmpty {
            lines.append("")
            lines.append(
                FleetTables.table(
                    ["AT", "DEVICE", "EVENT", "DETAIL"],
                    take.events.map { event in
                        ["+" + seconds(event.fleetNs &- take.startFleetNs), event.deviceID.isEmpty ? "-" : event.deviceID, event.kind, event.detail]
                    }))
        }
        return lines.joined(separator: "\n")
    }

    /// A segment's place: the coordinator, or its node (offline: missing until it is back).
    static func where_(_ segment: Capfleet_V1_TakeSegmentInfo) -> String {
        if segment.nodeID.isEmpty { return "coordinator" }
        if !segment.collectedPath.isEmpty { return "coordinator (collected from \(segment.nodeID))" }
        return segment.nodeOnline ? "node \(segment.nodeID)" : "node \(segment.nodeID), OFFLINE: missing until it is back"
    }

    public static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func seconds(_ nanoseconds: UInt64) -> String {
        nanoseconds > UInt64(Int64.max) ? "-" : String(format: "%.3f s", Double(nanoseconds) / 1e9)
    }

    static func microseconds(_ nanoseconds: UInt64) -> String { String(format: "%.1f µs", Double(nanoseconds) / 1e3) }

    static func date(_ unixMilliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000))
    }
}
