import FleetCore

/// Performs one segment's `SegmentOffload` with rclone: the machine decides, this only asks
/// rclone. Blocks for the whole copy; run it on a thread of the caller's own.
public struct SegmentUploader: Sendable {
    public let rclone: Rclone
    /// The upload's limit in bytes a second (0: none): the host's collect rate, so that
    /// capture and the takes being written keep the disk and the link they need.
    public let bytesPerSecond: UInt64

    public init(rclone: Rclone, bytesPerSecond: UInt64) {
        self.rclone = rclone
        self.bytesPerSecond = bytesPerSecond
    }

    public struct Report: Sendable, Equatable {
        public let outcome: SegmentOffload.Outcome
        /// Set when a copy already there was not the segment's and was sent again.
        public let replacedCorruptCopy: String?
    }

    /// Copies `file` (of `sizeBytes`, SHA-256 `sha256` in the index) to `path` and proves it.
    public func offload(
        file: String, sizeBytes: UInt64, sha256: String, to path: String, progress: ((UInt64) -> Void)? = nil
    ) -> Report {
        var machine = SegmentOffload(sizeBytes: sizeBytes, sha256: sha256)
        var action = machine.handle(.started)
        while true {
            let event: SegmentOffload.Event
            do throws(RcloneError) {
                switch action {
                case .finish(let outcome):
                    return Report(outcome: outcome, replacedCorruptCopy: machine.replacedCorruptCopy)
                case .stat:
                    event = .found(size: try rclone.size(of: path))
                case .upload:
                    try rclone.upload(file, to: path, bytesPerSecond: bytesPerSecond, progress: progress)
                    event = .uploaded
                case .readStoreChecksum:
                    event = .storeChecksum(try rclone.storeChecksum(of: path))
                case .readBack:
                    event = .readBack(sha256: try rclone.readBackChecksum(of: path))
                case .removeRemote:
                    try rclone.remove(path)
                    event = .removed
                }
            } catch {
                if !error.destinationFull, let room = lackOfRoom(after: error, action, sizeBytes) {
                    event = .stepFailed(reason: "\(error.description); \(room)", destinationFull: true)
                } else {
                    event = .stepFailed(reason: error.description, destinationFull: error.destinationFull)
                }
            }
            action = machine.handle(event)
        }
    }

    /// A send that failed for a reason rclone did not name (two copies at once into a full SFTP
    /// server end as "closed pipe"): full, said so, if the destination says it has less room
    /// than the file; nil when it has room or does not say.
    private func lackOfRoom(after error: RcloneError, _ action: SegmentOffload.Action, _ sizeBytes: UInt64) -> String? {
        guard action == .upload, case .failed = error, let free = try? rclone.freeBytes(), free < sizeBytes else { return nil }
        return "the destination is full: it has \(free) bytes free, the segment needs \(sizeBytes)"
    }
}
