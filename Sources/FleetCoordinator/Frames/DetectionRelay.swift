import FleetBus
import FleetProtocol
import Foundation
import Logging

/// Where agents' detection reports go (detection.md): on telemetry under `meta.<device_id>`,
/// and into the timed-metadata track of a take recording the device, at their frame's fleet
/// time. Nothing is stored in the index per detection: hundreds of cameras reporting five
/// times a second must cost the coordinator a publish and a dictionary lookup each.
final class DetectionRelay: Sendable {
    private let telemetry: TelemetryPublisherSocket
    private let takes: TakeDirector
    private let logger: Logger

    init(telemetry: TelemetryPublisherSocket, takes: TakeDirector, logger: Logger) {
        self.telemetry = telemetry
        self.takes = takes
        self.logger = logger
    }

    /// Follows the fleet's node events until the feed ends, relaying each detection report.
    func follow(_ nodeEvents: AsyncStream<NodeEvent>) async {
        for await event in nodeEvents {
            guard case let .detection(report) = event else { continue }
            await received(report)
        }
    }

    /// A report the control handler accepted (from the node that has the device).
    func received(_ report: Capfleet_V1_DetectionReport) async {
        do {
            telemetry.publish(topic: TelemetryTopic.meta(report.deviceID), payload: try report.serializedBytes())
        } catch {
            logger.error("a detection report could not be encoded", metadata: ["device.id": "\(report.deviceID)", "error": "\(error)"])
        }
        guard report.fleetTimeNs != 0 else { return }
        await takes.detected(deviceID: report.deviceID, json: Self.trackEntry(report), at: report.fleetTimeNs)
    }

    /// The JSON object a take's timed-metadata track holds for a report (recordings.md,
    /// "Timed metadata"): kind "detection", the frame, and each object with its corners and
    /// bounds as [x, y] and [x, y, width, height] in normalised frame coordinates.
    static func trackEntry(_ report: Capfleet_V1_DetectionReport) -> String {
        func box(_ rect: Capfleet_V1_NormalizedRect) -> [Double] { [rect.x, rect.y, rect.width, rect.height] }
        let objects: [[String: Any]] = report.objects.map { object in
            switch object.kind {
            case .face:
                return ["kind": "face", "face_id": object.faceID, "bounds": box(object.bounds)]
            default:
                return [
                    "kind": "code", "symbology": object.symbology, "value": object.value,
                    "corners": object.corners.map { [$0.x, $0.y] }, "bounds": box(object.bounds),
                ]
            }
        }
        return TakeDirector.json(any: [
            "kind": "detection", "device_id": report.deviceID, "sequence": report.sequence,
            "fleet_ns": report.fleetTimeNs, "width": report.frameWidth, "height": report.frameHeight,
            "objects": objects,
        ])
    }
}
