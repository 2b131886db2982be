import FleetCore
import FleetProtocol
import Foundation

/// How stills are shown: tables for people, JSON (snake_case keys) for programs.
public enum StillViews {
    public struct Still: Encodable {
        struct Picture: Encodable {
            var number: UInt32
            var file, sha256, pixelFormat: String
            var sizeBytes: UInt64
            var stored: Bool
            var requestedFleetNs, fleetTimeNs: UInt64
            var spreadNs: Int64
            var ev: Double
            var width, height: UInt32
            var sidecar: String?

            enum CodingKeys: String, CodingKey {
                case number, file, sha256, pixelFormat = "pixel_format", sizeBytes = "size_bytes", stored, requestedFleetNs = "requested_fleet_ns",
                    fleetTimeNs = "fleet_time_ns", spreadNs = "spread_ns", ev, width, height, sidecar
            }
        }
        struct Camera: Encodable {
            var deviceId, nodeId, state: String
            var error: String?
            var awayNs: UInt64
            var pictures: [Picture]

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", nodeId = "node_id", state, error, awayNs = "away_from_streaming_ns", pictures
            }
        }
        var id, name, state, directory, createdBy, encoding: String
        var requestedFleetNs, spreadNs: UInt64
        var createdUnixMs, storedUnixMs: Int64
        var bracketEv: [Double]
        var cameras: [Camera]

        enum CodingKeys: String, CodingKey {
            case id, name, state, directory, createdBy = "created_by", encoding, requestedFleetNs = "requested_fleet_ns", spreadNs = "spread_ns",
                createdUnixMs = "created_unix_ms", storedUnixMs = "stored_unix_ms", bracketEv = "bracket_ev", cameras
        }

        public init(_ info: Capfleet_V1_StillInfo, detailed: Bool = false) {
            id = info.id
            name = info.name
            state = info.state
            directory = info.directory
            createdBy = info.createdBy
            encoding = info.encoding
            requestedFleetNs = info.requestedFleetNs
            spreadNs = info.spreadNs
            createdUnixMs = info.createdUnixMs
            storedUnixMs = info.storedUnixMs
            bracketEv = info.bracketEv
            cameras = info.devices.map { device in
                Camera(
                    deviceId: device.deviceID, nodeId: device.nodeID, state: device.state, error: device.error.isEmpty ? nil : device.error,
                    awayNs: device.awayNs,
                    pictures: device.images.map { image in
                        Picture(
                            number: image.number, file: image.fileName, sha256: image.sha256, pixelFormat: image.pixelFormat,
                            sizeBytes: image.sizeBytes,
                            stored: image.stored, requestedFleetNs: image.requestedFleetNs, fleetTimeNs: image.fleetTimeNs, spreadNs: image.spreadNs,
                            ev: image.ev, width: image.width, height: image.height, sidecar: detailed ? image.sidecarJson : nil)
                    })
            }
        }
    }

    public struct Export: Encodable {
        var still: Still
        var files: [String]
        var bytes: UInt64

        public init(still: Still, files: [String], bytes: UInt64) {
            self.still = still
            self.files = files
            self.bytes = bytes
        }
    }

    public static func list(_ stills: [Capfleet_V1_StillInfo]) -> String {
        guard !stills.isEmpty else { return "no stills; take one with: capfleet still CAMERAS… (or --all)" }
        return FleetTables.table(
            ["STILL", "NAME", "STATE", "CAMERAS", "PICTURES", "SPREAD", "BY"],
            stills.map { still in
                let pictures = still.devices.reduce(0) { $0 + $1.images.count }
                let taken = still.devices.filter { $0.state != "failed" }.count
                return [
                    still.id, still.name == still.id ? "" : still.name, still.state, "\(taken)/\(still.devices.count)", "\(pictures)",
                    milliseconds(Int64(clamping: still.spreadNs)), still.createdBy,
                ]
            })
    }

    /// Per camera and picture: its capture time against the instant, size, where it is.
    public static func show(_ still: Capfleet_V1_StillInfo) -> String {
        var lines = [
            "still \(still.id)\(still.name == still.id ? "" : " (\(still.name))"): \(still.state), instant fleet time \(still.requestedFleetNs), "
                + spread(still) + ", \(still.encoding)"
                + (still.bracketEv.isEmpty ? "" : ", bracket " + still.bracketEv.map { String(format: "%+.1f", $0) }.joined(separator: ",") + " EV")
        ]
        var rows: [[String]] = []
        for device in still.devices {
            if device.images.isEmpty {
                rows.append([device.deviceID, "-", device.state, "", "", "", device.error])
            }
            for image in device.images {
                rows.append([
                    device.deviceID, "\(image.number)", image.stored ? "stored" : device.state, "\(image.width)x\(image.height) \(image.pixelFormat)",
                    milliseconds(image.spreadNs), device.awayNs == 0 ? "" : milliseconds(Int64(clamping: device.awayNs)),
                    image.stored ? image.fileName : device.error,
                ])
            }
        }
        lines.append(FleetTables.table(["CAMERA", "#", "STATE", "FORMAT", "SPREAD", "AWAY", "FILE"], rows))
        return lines.joined(separator: "\n")
    }

    /// The header's spread, the rows' measure: each camera's first picture against the
    /// instant (one camera: its own; several: from the earliest to the latest), and with
    /// several cameras how close their pictures are to each other.
    public static func spread(_ still: Capfleet_V1_StillInfo) -> String {
        let firsts = still.devices.compactMap { $0.images.first?.spreadNs }
        guard let earliest = firsts.min(), let latest = firsts.max() else { return "no picture yet" }
        let fromInstant = earliest == latest ? milliseconds(earliest) : "\(milliseconds(earliest).dropLast(3)) to \(milliseconds(latest))"
        let across = firsts.count > 1 ? ", \(String(format: "%.3f ms", Double(still.spreadNs) / 1e6)) apart across the cameras" : ""
        return "spread \(fromInstant) from the instant\(across)"
    }

    /// Signed milliseconds with microseconds: +0.012 ms.
    public static func milliseconds(_ nanoseconds: Int64) -> String {
        String(format: "%+.3f ms", Double(nanoseconds) / 1e6)
    }
}
