import FleetProtocol
import Foundation

extension OperatorSession {
    /// Asks the coordinator to copy `take`'s agent-held segments to itself and, with `wait`,
    /// follows the copying until every segment is there (or it failed, saying why). Progress is
    /// in bytes collected of the agent-held total. Returns the take as the index has it then.
    @discardableResult
    public func collectTake(_ take: String, wait: Bool = true, progress: (TransferProgress) -> Void = { _ in }) throws -> Capfleet_V1_TakeInfo {
        guard var info = try call(.collectRecording(.with { $0.takeID = take }), timeout: 30).reply.takes.first else {
            throw TransferError.noTake(take)
        }
        guard wait else { return info }
        let total = info.agentHeldBytes + info.collectedBytes
        progress(.started(total: total))
        while info.agentHeldBytes > 0 {
            if !info.collectError.isEmpty { throw TransferError.collectFailed(take: take, reason: info.collectError) }
            progress(.advanced(done: info.collectedBytes))
            usleep(250_000)
            guard let next = try call(.getRecording(.with { $0.takeID = take })).reply.takes.first else { throw TransferError.noTake(take) }
            info = next
        }
        progress(.advanced(done: total))
        progress(.finished)
        return info
    }
}
