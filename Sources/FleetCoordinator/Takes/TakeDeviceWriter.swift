import FleetBus
import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem
import Foundation
import Logging

/// One device's part of a take on the coordinator, on a worker thread of its own (every step
/// is blocking disk I/O): takes the part's frames off the recording path in order, writes them
/// into its segments, and answers the agent with credit — what it consumed, what is on disk,
/// and how much more may come. Nothing async in here; the endpoint's thread hands messages
/// in, and what the director must know goes out through `onEvent`. The part's state
/// (`TakePartWriter`) is made on the worker's thread and lives only there.
final class TakeDeviceWriter: Sendable {
    enum Input: Sendable {
        case resume(routingID: [UInt8], Capfleet_V1_RecordResume)
        case frame(routingID: [UInt8], Capfleet_V1_RecordedFrame, ZMQMessage)
        case end(routingID: [UInt8], Capfleet_V1_RecordEnd)
        /// The take (or this part of it) ends at this fleet time.
        case stop(at: UInt64)
        case note(json: String, at: UInt64, track: MetadataTrack = .notes)
    }

    enum Event: Sendable {
        /// A new agent process sends this part: its sequence numbers go on from `offset`.
        case agentChanged(instance: String, restarted: Bool)
        case rebased(offset: Int64)
        /// Frames flow again after an interruption.
        case flowing
        /// The part is stored: its last segment is closed and every segment's SHA-256 is in the index.
        case ended(reason: String, withheld: UInt64)
        case failed(String)
    }

    struct Window: Sendable {
        var frames: Int = 8
        var bytes: Int = 64 << 20
    }

    /// What a part needs of the disk: where its files go, and the free space it never eats
    /// into (below it the part stops while its files can still be finished properly).
    struct DiskReserve: Sendable {
        var directory: String
        var bytes: Int64
    }

    let takeID: String
    let deviceID: String
    let nodeID: String
    private let worker: OwnedWorker<Input>

    /// - Parameter recorder: makes the part's recorder, on the worker's thread (it writes
    ///   files and the index, and is used there only).
    init(
        takeID: String, deviceID: String, nodeID: String, recorder makeRecorder: @escaping @Sendable () -> DeviceTakeRecorder,
        instance: String, offset: Int64, ended: Bool, frameRate: Double, window: Window = Window(), reserve: DiskReserve? = nil,
        logger: Logger, send: @escaping @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void, onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.takeID = takeID
        self.deviceID = deviceID
        self.nodeID = nodeID
        var logger = logger
        logger[metadataKey: "take.id"] = "\(takeID)"
        logger[metadataKey: "device.id"] = "\(deviceID)"
        // An agent ignoring its window gets no further than this many waiting messages.
        worker = OwnedWorker(
            name: "cf-take", capacity: 2 * window.frames + 16, whenFull: .refuseNewest, tickNanoseconds: 250_000_000,
            state: { [logger] in
                TakePartWriter(
                    takeID: takeID, deviceID: deviceID, recorder: makeRecorder(), instance: instance, offset: offset,
                    ended: ended, frameRate: frameRate, window: window, reserve: reserve, logger: logger,
                    send: send, onEvent: onEvent)
            },
            handle: { part, input in part.handle(input) },
            // Flushed at most every half second: a crash of the coordinator loses nothing the
            // agent was told is stored, and the agent keeps the rest until it is.
            onTick: { part in part.flushIfDue() },
            finish: { part in part.finishSegment() })
    }

    /// Queues a message for the part (resumes, ends, stops and notes are always taken).
    func post(_ input: Input) {
        _ = worker.post(input)
    }

    /// Posts a frame unless the part already has far more waiting than its credit allows
    /// (an agent ignoring its window): false then, and the frame is not taken.
    func post(frame: Capfleet_V1_RecordedFrame, payload: ZMQMessage, routingID: [UInt8]) -> Bool {
        worker.offer(.frame(routingID: routingID, frame, payload))
    }

    /// Handles what is queued, finishes the open segment and ends the thread; resumes once it has.
    func shutdown() async {
        await worker.stop()
    }
}
