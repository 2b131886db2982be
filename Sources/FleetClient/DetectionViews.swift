import FleetCore
import FleetProtocol
import Foundation

/// How detection settings and reports are shown: a line for people, JSON (snake_case keys)
/// for programs.
public enum DetectionViews {
    public struct Settings: Encodable {
        var deviceId: String
        var codes: [String]
        var faces: Bool
        var region: [Double]
        var framesPerSecond: Double
        /// Auto-framing's settings while it is on (detection.md, "Auto-framing").
        var framing: Framing?

        struct Framing: Encodable {
            var margin, maximumSpeed, holdSeconds, minimumCrop: Double
            /// "crop", or "optics": the camera's own zoom, pan and tilt.
            var by: String
            enum CodingKeys: String, CodingKey {
                case margin, maximumSpeed = "maximum_speed", holdSeconds = "hold_seconds", minimumCrop = "minimum_crop", by
            }
        }

        enum CodingKeys: String, CodingKey { case deviceId = "device_id", codes, faces, region, framesPerSecond = "frames_per_second", framing }

        public init(device: String, _ settings: DetectionSettings) {
            deviceId = device
            codes = settings.codes.map(\.rawValue)
            faces = settings.faces
            region = [settings.region.x, settings.region.y, settings.region.width, settings.region.height]
            framesPerSecond = settings.framesPerSecond
            framing = settings.framing.map {
                Framing(
                    margin: $0.margin, maximumSpeed: $0.maximumSpeed, holdSeconds: $0.holdSeconds, minimumCrop: $0.minimumCrop,
                    by: $0.optics ? "optics" : "crop")
            }
        }
    }

    public struct Report: Encodable {
        struct Object: Encodable {
            var kind: String
            var symbology, value: String?
            var corners: [[Double]]?
            var bounds: [Double]
            var faceId: UInt64?

            enum CodingKeys: String, CodingKey { case kind, symbology, value, corners, bounds, faceId = "face_id" }
        }
        var deviceId, nodeId: String
        var sequence, captureLocalNs: UInt64
        var fleetTimeNs: UInt64?
        var width, height: UInt32
        var objects: [Object]
        var skippedFrames, examinedFrames: UInt64

        enum CodingKeys: String, CodingKey {
            case deviceId = "device_id", nodeId = "node_id", sequence, captureLocalNs = "capture_local_ns", fleetTimeNs = "fleet_time_ns",
                width, height, objects, skippedFrames = "skipped_frames", examinedFrames = "examined_frames"
        }

        public init(_ report: Capfleet_V1_DetectionReport) {
            deviceId = report.deviceID
            nodeId = report.nodeID
            sequence = report.sequence
            captureLocalNs = report.captureLocalNs
            fleetTimeNs = report.fleetTimeNs == 0 ? nil : report.fleetTimeNs
            width = report.frameWidth
            height = report.frameHeight
            skippedFrames = report.skippedFrames
            examinedFrames = report.examinedFrames
            objects = report.objects.map { object in
                let bounds = [object.bounds.x, object.bounds.y, object.bounds.width, object.bounds.height]
                return object.kind == .face
                    ? Object(kind: "face", bounds: bounds, faceId: object.faceID)
                    : Object(
                        kind: "code", symbology: object.symbology, value: object.value, corners: object.corners.map { [$0.x, $0.y] }, bounds: bounds)
            }
        }
    }

    public static func summary(_ settings: DetectionSettings) -> String {
        var what: [String] = []
        if !settings.codes.isEmpty { what.append("codes (\(settings.codes.map(\.rawValue).joined(separator: ", ")))") }
        if settings.faces { what.append("faces") }
        let region =
            settings.region == .whole
            ? "the whole frame"
            : String(format: "the region %.2f,%.2f %.2fx%.2f", settings.region.x, settings.region.y, settings.region.width, settings.region.height)
        let framing = settings.framing.map {
            "; auto-framing them (margin \(VideoFormat.trim($0.margin)), \(VideoFormat.trim($0.maximumSpeed)) frame widths a second, hold \(VideoFormat.trim($0.holdSeconds)) s, \($0.optics ? "with the camera's zoom, pan and tilt, zooming in up to \(VideoFormat.trim(1 / $0.minimumCrop))x" : "crop down to \(VideoFormat.trim($0.minimumCrop))"))"
        }
        return what.joined(separator: " and ") + " in \(region), at most \(VideoFormat.trim(settings.framesPerSecond)) frames a second"
            + (framing ?? "")
    }

    /// `frame 1234 @ fleet 17…  qr "text" at 0.62,0.21 0.10x0.13 · face #3 at …`.
    public static func line(_ report: Capfleet_V1_DetectionReport) -> String {
        let when = report.fleetTimeNs == 0 ? "no fleet time" : "fleet \(report.fleetTimeNs)"
        let objects = report.objects.map { object -> String in
            let at = String(format: "at %.3f,%.3f %.3fx%.3f", object.bounds.x, object.bounds.y, object.bounds.width, object.bounds.height)
            return object.kind == .face ? "face #\(object.faceID) \(at)" : "\(object.symbology) \"\(object.value)\" \(at)"
        }
        let skipped = report.skippedFrames > 0 ? "  (\(report.skippedFrames) due frames skipped: detection was busy)" : ""
        return "\(report.deviceID) frame \(report.sequence) @ \(when)  " + (objects.isEmpty ? "nothing in view" : objects.joined(separator: " · "))
            + skipped
    }
}
