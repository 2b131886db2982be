import FleetCore
import FleetRecording
import FleetStorage
import FleetStore
import FleetSystem
import Foundation
import Glibc

/// Reading a take back from a storage destination (recordings.md, "Reading back"): a segment
/// whose host is gone, or whose host removed it once it was safe there, is checked and copied
/// from its proved copy. Each rclone call blocks, on a thread of its own.
struct DestinationCopies: Sendable {
    let store: FleetDatabase
    let secrets: StorageSecrets

    /// A proved copy of a segment, on a destination still defined.
    struct Copy: Sendable {
        let destination: StorageDestination
        let objectPath: String
        var label: String { "\(destination.name):\(objectPath)" }
    }

    /// The first proved copy of the segment on a destination this coordinator can reach (its
    /// secrets held), by the destinations' names.
    func provedCopy(of segment: SegmentRecord) async throws(StoreError) -> Copy? {
        let copies = try await store.segmentCopies(takeID: segment.takeId).filter {
            $0.deviceId == segment.deviceId && $0.number == segment.number && $0.state == .verified
        }
        guard !copies.isEmpty else { return nil }
        let destinations = try await store.storageDestinations()
        for copy in copies {
            guard let record = destinations.first(where: { $0.name == copy.destination }),
                let kept = try? secrets.load(record.name), record.secretKeyList.allSatisfy({ kept[$0] != nil }),
                let destination = try? StorageDestination(
                    name: record.name, backend: record.backend, options: record.options, secrets: kept, root: record.root)
            else { continue }
            return Copy(destination: destination, objectPath: copy.objectPath)
        }
        return nil
    }

    /// The copy read back and hashed, against the index's SHA-256: the problems (none: it is
    /// the segment's).
    func check(_ copy: Copy, against segment: SegmentRecord) async -> [String] {
        await OwnedThread.run("cf-offload") {
            do throws(RcloneError) {
                let found = try Rclone(destination: copy.destination).readBackChecksum(of: copy.objectPath)
                return found == segment.sha256.lowercased()
                    ? [] : ["the copy at \(copy.label) has SHA-256 \(found), the index \(segment.sha256): it is not the segment's"]
            } catch {
                return ["the copy at \(copy.label) could not be read back: \(error)"]
            }
        }
    }

    /// Copies the segment from the destination to `path` on this disk (through `path.partial`,
    /// checked against the index's SHA-256 before it takes its name); returns `path`.
    func download(_ copy: Copy, of segment: SegmentRecord, to path: String) async -> Result<String, CollectFailure> {
        await OwnedThread.run("cf-offload") {
            let partial = path + ".partial"
            do {
                try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            } catch {
                return .failure(CollectFailure("cannot make the folder of \(path): \(error)"))
            }
            do throws(RcloneError) {
                try Rclone(destination: copy.destination).download(copy.objectPath, to: partial)
            } catch {
                unlink(partial)
                return .failure(CollectFailure("segment \(segment.number) of \(segment.deviceId) could not be read from \(copy.label): \(error)"))
            }
            let found: String
            do {
                found = try SegmentDigest.sha256(ofFile: partial)
            } catch {
                unlink(partial)
                return .failure(
                    CollectFailure("the copy of segment \(segment.number) of \(segment.deviceId) read from \(copy.label) cannot be hashed: \(error)"))
            }
            guard found == segment.sha256.lowercased() else {
                unlink(partial)
                return .failure(
                    CollectFailure(
                        "the copy of segment \(segment.number) of \(segment.deviceId) at \(copy.label) has SHA-256 \(found), the index \(segment.sha256)"
                    ))
            }
            guard rename(partial, path) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(partial)
                return .failure(CollectFailure("cannot move the copy read from \(copy.label) to \(path): \(reason)"))
            }
            return .success(path)
        }
    }
}
