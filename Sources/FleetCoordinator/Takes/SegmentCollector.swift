import FleetBus
import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem
import Foundation
import Glibc
import Logging
import Synchronization

/// Copies files held on the agents to the coordinator's disk — take segments (`recordings
/// collect`) and stills' pictures — on a worker thread of its own (every step is blocking disk
/// I/O): each copy is a `SegmentTransfer`
/// (credit-controlled, resumable from its `.partial` file), checked against the index's
/// SHA-256 before it takes its final name. Chunks come in from the record endpoint's thread;
/// requests go out through the agents' recordings links.
final class SegmentCollector: Sendable {
    /// A take's segment, or a still's picture (`takeID` is then the still's id).
    enum Kind: Hashable, Sendable { case segment, still }

    struct Key: Hashable, Sendable {
        var kind: Kind = .segment
        let takeID: String
        let deviceID: String
        let number: UInt32
    }

    /// A file on an agent's disk, as the index describes it.
    struct AgentFile: Sendable {
        let key: Key
        let sizeBytes: UInt64
        let sha256: String
        /// How the failures name it.
        var label: String {
            key.kind == .segment ? "segment \(key.number) of \(key.deviceID)" : "picture \(key.number) of \(key.deviceID) in still \(key.takeID)"
        }
    }

    enum Input: Sendable {
        case start(Job)
        case chunk(nodeID: String, Key, Capfleet_V1_SegmentChunk, ZMQMessage)
    }

    struct Job: Sendable {
        let file: AgentFile
        let nodeID: String
        let destination: String
        /// The links its requests go out through.
        let links: AgentRecordLinks
        let done: @Sendable (Result<String, CollectFailure>) -> Void
    }

    private let worker: OwnedWorker<Input>
    /// Bytes on the coordinator's disk of each copy in progress, so that a collect's progress
    /// moves as bytes arrive rather than a whole segment at a time.
    private let arriving: CopiesArriving

    init(logger: Logger) {
        let arriving = CopiesArriving()
        self.arriving = arriving
        worker = OwnedWorker(
            name: "cf-collect", tickNanoseconds: 250_000_000,
            state: { CollectorState(arriving: arriving, logger: logger) },
            handle: { state, input in state.handle(input) },
            onTick: { state in state.tick() },
            finish: { state in state.abandonAll() })
    }

    /// Copies one segment to `destination`; returns its path once verified.
    func collect(
        _ segment: SegmentRecord, from nodeID: String, to destination: String, through links: AgentRecordLinks
    ) async -> Result<String, CollectFailure> {
        await collect(
            AgentFile(
                key: Key(takeID: segment.takeId, deviceID: segment.deviceId, number: UInt32(segment.number)),
                sizeBytes: UInt64(max(segment.sizeBytes, 0)), sha256: segment.sha256), from: nodeID, to: destination, through: links)
    }

    /// Copies one file held on `nodeID` to `destination`; returns its path once verified.
    func collect(
        _ file: AgentFile, from nodeID: String, to destination: String, through links: AgentRecordLinks
    ) async -> Result<String, CollectFailure> {
        await withCheckedContinuation { continuation in
            let posted = worker.post(
                .start(Job(file: file, nodeID: nodeID, destination: destination, links: links, done: { continuation.resume(returning: $0) })))
            if !posted { continuation.resume(returning: .failure(CollectFailure("the coordinator is stopping"))) }
        }
    }

    /// From the record endpoint's thread.
    func received(
        _ chunk: Capfleet_V1_SegmentChunk, bytes: ZMQMessage, of kind: Kind = .segment, from nodeID: String, takeID: String,
        deviceID: String
    ) {
        _ = worker.post(.chunk(nodeID: nodeID, Key(kind: kind, takeID: takeID, deviceID: deviceID, number: chunk.number), chunk, bytes))
    }

    func stop() async { await worker.stop() }

    /// Bytes copied so far of a take's segments still being copied.
    func bytesArriving(takeID: String) -> UInt64 {
        arriving.bytes.withLock { copies in copies.filter { $0.key.kind == .segment && $0.key.takeID == takeID }.values.reduce(0, +) }
    }
}

/// What the collector's thread has written of each copy in progress, read by the operator path.
final class CopiesArriving: Sendable {
    let bytes = Mutex<[SegmentCollector.Key: UInt64]>([:])
}

struct CollectFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The collector's thread's own state: the copies in progress.
private final class CollectorState {
    private let logger: Logger

    private final class Copy {
        let job: SegmentCollector.Job
        let key: SegmentCollector.Key
        var transfer: SegmentTransfer
        let fd: Int32
        /// The copy's SHA-256 so far, from its first byte, updated as chunks are written in order.
        let digest: RunningDigest
        var partial: String { job.destination + ".partial" }

        init(job: SegmentCollector.Job, key: SegmentCollector.Key, transfer: SegmentTransfer, fd: Int32, digest: RunningDigest) {
            self.job = job
            self.key = key
            self.transfer = transfer
            self.fd = fd
            self.digest = digest
        }
    }

    private var copies: [SegmentCollector.Key: Copy] = [:]
    private let arriving: CopiesArriving

    init(arriving: CopiesArriving, logger: Logger) {
        self.arriving = arriving
        self.logger = logger
    }

    func handle(_ input: SegmentCollector.Input) {
        switch input {
        case let .start(job):
            start(job)
        case let .chunk(nodeID, key, chunk, bytes):
            guard let copy = copies[key], copy.job.nodeID == nodeID else { return }
            guard chunk.error.isEmpty else { return end(copy, .failure(CollectFailure("node \(nodeID): \(chunk.error)"))) }
            switch copy.transfer.received(offset: chunk.offset, count: bytes.count, fileSize: chunk.size) {
            case .ignore:
                return
            case let .fail(reason):
                return end(copy, .failure(CollectFailure("\(copy.job.file.label): \(reason)")))
            case let .write(offset):
                let written = bytes.count
                let wrote = withExtendedLifetime(bytes) {
                    Result { () throws(SystemCallError) in try FileDescriptorIO.writeAll(copy.fd, bytes.bytes, at: offset, target: copy.partial) }
                }
                if case let .failure(error) = wrote {
                    return end(copy, .failure(CollectFailure("cannot write \(copy.partial): \(error)")))
                }
                do {
                    try withExtendedLifetime(bytes) { () throws(RecordingError) in try copy.digest.update(bytes.bytes) }
                } catch {
                    return end(copy, .failure(CollectFailure("cannot checksum \(copy.partial): \(error)")))
                }
                copy.transfer.written(count: written, now: MonotonicTime.now())
                arriving.bytes.withLock { $0[copy.key] = copy.transfer.have }
                if copy.transfer.isComplete {
                    complete(copy)
                } else {
                    ask(copy, copy.transfer.requests())
                }
            }
        }
    }

    func tick() {
        let now = MonotonicTime.now()
        for copy in Array(copies.values) {
            let again = copy.transfer.tick(now: now)
            if let failure = copy.transfer.failure {
                end(
                    copy,
                    .failure(
                        CollectFailure(
                            "\(copy.job.file.label) from node \(copy.job.nodeID): \(failure); ask again to go on from \(copy.transfer.have) bytes")))
            } else if !again.isEmpty {
                ask(copy, again)
            }
        }
    }

    func abandonAll() {
        for copy in Array(copies.values) { end(copy, .failure(CollectFailure("the coordinator stopped; run collect again to go on"))) }
    }

    private func start(_ job: SegmentCollector.Job) {
        let key = job.file.key
        guard copies[key] == nil else { return job.done(.failure(CollectFailure("\(job.file.label) is being collected already"))) }
        let directory = (job.destination as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            return job.done(.failure(CollectFailure("cannot create \(directory): \(error)")))
        }
        let partial = job.destination + ".partial"
        let fd = open(partial, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return job.done(.failure(CollectFailure("cannot open \(partial): \(String(cString: strerror(errno)))"))) }
        // What an earlier collect left is kept: the copy goes on from there.
        var status = stat()
        let size = job.file.sizeBytes
        var have = fstat(fd, &status) == 0 ? UInt64(max(status.st_size, 0)) : 0
        if have > size {
            ftruncate(fd, 0)
            have = 0
        }
        let digest: RunningDigest
        do {
            digest = try RunningDigest()
            // What an earlier collect wrote is hashed once, here; the rest as it arrives.
            if have > 0 { try digest.update(fromFile: partial, length: have) }
        } catch {
            close(fd)
            return job.done(.failure(CollectFailure("cannot checksum \(partial): \(error)")))
        }
        let copy = Copy(job: job, key: key, transfer: SegmentTransfer(size: size, have: have, now: MonotonicTime.now()), fd: fd, digest: digest)
        copies[key] = copy
        arriving.bytes.withLock { $0[key] = have }
        if have > 0, have <= size { logger.info("collect goes on from a partial copy", metadata: ["path": "\(partial)", "bytes": "\(have)"]) }
        if copy.transfer.isComplete { return complete(copy) }
        ask(copy, copy.transfer.requests())
    }

    private func ask(_ copy: Copy, _ requests: [SegmentTransfer.Request]) {
        for request in requests {
            let fetch = Capfleet_V1_FetchSegment.with {
                $0.number = copy.key.number
                $0.offset = request.offset
                $0.length = UInt32(request.length)
            }
            let sent = copy.job.links.send(
                to: copy.job.nodeID, takeID: copy.key.takeID, deviceID: copy.key.deviceID,
                copy.key.kind == .segment ? .fetch(fetch) : .fetchStill(fetch))
            if !sent {
                return end(
                    copy,
                    .failure(
                        CollectFailure("node \(copy.job.nodeID) is not reachable: its agent's recordings link has not attached to this coordinator")))
            }
        }
    }

    /// Every byte is there: durable, checked against the index's SHA-256 (computed as the bytes
    /// were written), then given its name.
    private func complete(_ copy: Copy) {
        guard fsync(copy.fd) == 0 else {
            return end(copy, .failure(CollectFailure("cannot flush \(copy.partial): \(String(cString: strerror(errno)))")))
        }
        let sha: String
        do {
            sha = try copy.digest.finish()
        } catch {
            return end(copy, .failure(CollectFailure("cannot checksum \(copy.partial): \(error)")))
        }
        guard sha == copy.job.file.sha256 else {
            // A copy that is not the file indexed is worth nothing: the next collect starts over.
            unlink(copy.partial)
            return end(
                copy,
                .failure(
                    CollectFailure(
                        "\(copy.job.file.label): the copy's SHA-256 is \(sha), the index says \(copy.job.file.sha256); it was removed, ask again")))
        }
        guard rename(copy.partial, copy.job.destination) == 0 else {
            return end(copy, .failure(CollectFailure("cannot rename \(copy.partial): \(String(cString: strerror(errno)))")))
        }
        end(copy, .success(copy.job.destination))
    }

    private func end(_ copy: Copy, _ result: Result<String, CollectFailure>) {
        copies[copy.key] = nil
        arriving.bytes.withLock { $0[copy.key] = nil }
        close(copy.fd)
        copy.job.done(result)
    }
}
