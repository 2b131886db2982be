import FleetCore
import FleetProtocol

/// Exposure audits (proto-docs/clock.md, "Auditing exposures"): answered when the audit ends,
/// from the decoder's thread, with what the device's frames showed.
extension AgentService {
    func auditExposures(
        _ request: Capfleet_V1_AuditExposures, commandID: UInt64, on stream: CameraStream, clock: ClockSync
    ) -> Capfleet_V1_CommandReply? {
        @Sendable func reply(_ status: Capfleet_V1_Status, _ samples: Capfleet_V1_ExposureAuditSamples? = nil) -> Capfleet_V1_CommandReply {
            .with {
                $0.commandID = commandID
                $0.status = status
                if let samples { $0.exposureAudit = samples }
            }
        }
        guard clock.latest.estimate != nil else {
            return reply(
                .failure(
                    .unavailable, "node \(identity.nodeID)'s clock is not synchronised yet: its frames have no fleet time to compare with a timecode")
            )
        }
        guard stream.isCapturing else {
            return reply(.failure(.unavailable, "device \(stream.deviceID) is not capturing: start it (capfleet devices) and audit again"))
        }
        let source = stream.source
        let alignment = stream.alignment
        let started = stream.audits.begin(
            milliseconds: min(request.durationMs, ExposureAuditor.maximumDurationMilliseconds), maxSamples: request.maxSamples,
            conditions: { (source.activeFrameRate, source.exposure?.seconds ?? 0, alignment.wire.gridOriginFleetNs) },
            answer: { [self] samples in
                logger.info(
                    "exposure audit",
                    metadata: [
                        "device.id": "\(stream.deviceID)", "frames.seen": "\(samples.framesSeen)", "frames.decoded": "\(samples.framesDecoded)",
                        "timecodes": "\(samples.samples.count)",
                    ])
                control.post(reply: reply(.ok, samples))
            })
        guard started else {
            return reply(
                .failure(.unavailable, "device \(stream.deviceID) is being audited already: try again once that audit ends (at most a minute)"))
        }
        return nil
    }
}
