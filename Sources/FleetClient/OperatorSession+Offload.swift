import FleetProtocol
import Foundation

extension OperatorSession {
    /// Asks the coordinator to have `take` offloaded to the destination named and, with
    /// `wait`, follows it until every segment is proved there (or it failed, saying why).
    /// Progress is in bytes proved of the take's total, with the bytes being sent now.
    @discardableResult
    public func offloadTake(
        _ take: String, to destination: String, wait: Bool = true, progress: (TransferProgress) -> Void = { _ in }
    ) throws -> Capfleet_V1_TakeInfo {
        let reply = try call(
            .offloadRecording(
                .with {
                    $0.takeID = take
                    $0.destination = destination
                }), timeout: 30
        ).reply
        guard var info = reply.takes.first else { throw TransferError.noTake(take) }
        guard wait else { return info }
        func state(_ info: Capfleet_V1_TakeInfo) -> Capfleet_V1_TakeOffloadInfo? { info.offloads.first { $0.destination == destination } }
        let total = state(info).map { $0.verifiedBytes + $0.pendingBytes } ?? 0
        progress(.started(total: total))
        while let offload = state(info), offload.running {
            progress(.advanced(done: offload.verifiedBytes + offload.sendingBytes))
            usleep(250_000)
            guard let next = try call(.getRecording(.with { $0.takeID = take })).reply.takes.first else { throw TransferError.noTake(take) }
            info = next
        }
        if let offload = state(info), offload.pendingBytes > 0 || !offload.error.isEmpty {
            throw TransferError.offloadFailed(
                take: take, destination: destination,
                reason: offload.error.isEmpty ? "\(offload.pendingBytes) bytes not proved there" : offload.error,
                full: offload.destinationFull)
        }
        progress(.advanced(done: total))
        progress(.finished)
        return info
    }
}
