import FleetCore
import FleetProtocol

/// Frames as operators see them: previews as the coordinator keeps them (frames.md,
/// "Previews"), the latest of a device or of every device for a contact sheet, answered from
/// memory; a device's next frame; the dashboard's full-rate live view.
struct FrameHandler: Sendable {
    let ingest: FrameIngest
    /// Who wants which devices' full-rate frames: a snapshot or a live view wakes its device's flow.
    let liveFlow: LiveFlowKeeper
    let clock: CoordinatorClock

    func preview(of deviceID: String, into reply: inout Capfleet_V1_OperatorReply) {
        guard ingest.state(of: deviceID) != nil else {
            reply.status = .failure(.notFound, "no device \(deviceID) is registered; see capfleet devices")
            return
        }
        guard let shelved = ingest.previews.latest(of: deviceID) else {
            reply.status = .failure(
                .notFound,
                "device \(deviceID) has sent no preview since the coordinator started: its agent sends "
                    + "one a second while the device captures, unless its previews are off (agent setting preview) or its pixel format "
                    + "cannot be pictured (the agent's log says so)")
            return
        }
        reply.previews = [shelved.wire(atUnixMilliseconds: clock.unixMilliseconds())]
        reply.status = .ok
    }

    /// Every device's latest preview (of `nodeID`'s devices), by device id.
    func listPreviews(nodeID: String?, into reply: inout Capfleet_V1_OperatorReply) {
        let now = clock.unixMilliseconds()
        reply.previews = ingest.previews.all()
            .filter { nodeID == nil || $0.value.header.nodeID == nodeID }
            .sorted { $0.key < $1.key }
            .map { $0.value.wire(atUnixMilliseconds: now) }
        reply.status = .ok
    }

    /// The device's next frame to arrive: fresh by construction. Nobody may be watching the
    /// device, so its flow is woken for as long as the snapshot waits.
    func nextFrame(of deviceID: String, into reply: inout Capfleet_V1_OperatorReply) async -> [UInt8]? {
        guard ingest.state(of: deviceID) != nil else {
            reply.status = .failure(.notFound, "no device \(deviceID) is registered; see capfleet devices")
            return nil
        }
        let ingest = self.ingest
        guard let frame = await liveFlow.whileWanting(deviceID, { await ingest.nextFrame(of: deviceID, timeout: .seconds(3)) }) else {
            reply.status = .failure(
                .notFound, "no frame from device \(deviceID) arrived within 3 s of asking its agent for one: is it streaming? (capfleet watch)")
            return nil
        }
        reply.frameHeader = frame.header
        reply.status = .ok
        return frame.payload.array
    }

    /// Wants the device's full-rate frames and hands each to `each` until it returns false
    /// (the page closed) or no frame has come for `patience`. Frames arrive as the agent sends
    /// them: black while the device's consent is not granted. The caller is authorised first
    /// (OperatorRouter.watchLive).
    func watchLive(
        _ deviceID: String, patience: Duration, each: @escaping @Sendable (IngestedFrame) async -> Bool
    ) async -> Capfleet_V1_Status {
        guard ingest.state(of: deviceID) != nil else {
            return .failure(.notFound, "no device \(deviceID) is registered; see capfleet devices")
        }
        let ingest = self.ingest
        let quietLimit = patience
        let heard = await liveFlow.whileWanting(deviceID, dashboard: true) { () async -> Bool in
            var heardAny = false
            var quiet: Duration = .zero
            while !Task.isCancelled {
                guard let frame = await ingest.nextFrame(of: deviceID, timeout: .seconds(1)) else {
                    quiet += .seconds(1)
                    if quiet >= quietLimit { break }
                    continue
                }
                heardAny = true
                quiet = .zero
                guard await each(frame) else { break }
            }
            return heardAny
        }
        return heard
            ? .ok
            : .failure(
                .unavailable, "no frame from device \(deviceID) arrived within \(patience) of asking its agent: is it streaming? (capfleet watch)")
    }
}
