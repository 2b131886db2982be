import FleetCapture
import FleetCore
import FleetProtocol
import Foundation

/// CaptureStill (stills.md): the device takes its pictures on its own thread, the still
/// writer encodes and writes them, and the reply goes when they are on this host's disk.
extension AgentService {
    func captureStill(
        _ request: Capfleet_V1_CaptureStill, commandID: UInt64, on stream: CameraStream,
        parts: AgentParts
    ) -> Capfleet_V1_CommandReply? {
        let (clock, writer) = (parts.clock, parts.stills)
        @Sendable func reply(_ status: Capfleet_V1_Status, _ still: Capfleet_V1_StillCaptured? = nil) -> Capfleet_V1_CommandReply {
            .with {
                $0.commandID = commandID
                $0.status = status
                if let still { $0.still = still }
            }
        }
        guard StillWriter.isSafeName(request.stillID) else {
            return reply(.failure(.badRequest, "still id \(request.stillID) cannot name a directory"))
        }
        guard request.bracketEv.count <= 16, request.bracketEv.allSatisfy({ $0.isFinite && abs($0) <= 10 }) else {
            return reply(.failure(.badRequest, "a bracket has at most 16 steps, each between -10 and +10 EV"))
        }
        if request.streamingFormat, request.width != 0 || !request.pixelFormat.isEmpty {
            return reply(.failure(.badRequest, "a still from the streaming format takes no size or pixel format"))
        }
        guard (request.width == 0) == (request.height == 0) else {
            return reply(.failure(.badRequest, "give both width and height, or neither for the largest format"))
        }
        let interval = UInt64(request.bracketIntervalMs == 0 ? 300 : min(request.bracketIntervalMs, 10_000)) * 1_000_000
        let stillRequest = StillRequest(
            width: request.width == 0 ? nil : Int(request.width), height: request.height == 0 ? nil : Int(request.height),
            pixelFormat: request.pixelFormat.isEmpty ? nil : PixelFormat(request.pixelFormat),
            bracketEV: request.bracketEv, bracketIntervalNanoseconds: interval, streamingFormat: request.streamingFormat)
        let patience = UInt64(request.timeoutMs == 0 ? 3000 : min(request.timeoutMs, 60_000)) * 1_000_000
        let subject = StillSubject(
            stillID: request.stillID, deviceID: stream.deviceID, deviceName: stream.source.device.name, nodeID: identity.nodeID,
            nodeName: request.nodeName, jpeg: request.encoding == .jpeg,
            jpegQuality: Int(request.jpegQuality == 0 ? 92 : min(max(request.jpegQuality, 1), 100)),
            zoomMethod: stream.source.zoomMethod?.rawValue ?? "none", focus: stream.source.focus, consent: stream.consent,
            clockSync: clock.latest.estimate?.state.rawValue ?? "unsynchronised")
        let logger = self.logger, control = self.control
        stream.takeStill(
            at: request.fleetTimeNs, request: stillRequest, patience: patience, clock: clock,
            pressure: { parts.pressure }
        ) { taken in
            switch taken {
            case let .failure(failure):
                logger.warning("no still", metadata: ["device.id": "\(subject.deviceID)", "still.id": "\(subject.stillID)", "reason": "\(failure)"])
                control.post(reply: reply(.failure(failure.unavailable ? .unavailable : .unsupported, failure.description)))
            case let .success(taken):
                writer.write(taken, of: subject) { written in
                    switch written {
                    case let .failure(failure):
                        logger.error("a still could not be written", metadata: ["still.id": "\(subject.stillID)", "error": "\(failure)"])
                        control.post(reply: reply(.failure(.internal, failure.description)))
                    case let .success(images):
                        logger.notice(
                            "still written",
                            metadata: [
                                "device.id": "\(subject.deviceID)", "still.id": "\(subject.stillID)", "pictures": "\(images.count)",
                                "away_ms": "\(taken.awayNanoseconds / 1_000_000)",
                            ])
                        control.post(
                            reply: reply(
                                .ok,
                                .with {
                                    $0.images = images
                                    $0.awayNs = taken.awayNanoseconds
                                    $0.stillFormatIndex = UInt32(taken.stillFormatIndex)
                                    $0.streamingFormatIndex = UInt32(taken.streamingFormatIndex)
                                }))
                    }
                }
            }
        }
        return nil
    }
}
