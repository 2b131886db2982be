import FleetCore
import FleetImaging
import FleetSystem
import Foundation
import Logging
import Synchronization

/// Turns full-rate frames into JPEGs for the dashboard's live view (a browser shows JPEGs,
/// not a camera's YUYV), on one thread the coordinator owns for all live views: a viewer
/// costs the coordinator pixels only while it watches, and at most one core however many
/// watch. A frame that arrives while the thread is busy is refused, so a viewer gets fewer
/// frames a second, never a growing delay.
final class LiveViewRenderer: Sendable {
    /// The live view's width at most (a browser's pane; the camera may be 4K).
    static let maximumWidth = 1280
    static let quality = 80

    enum Outcome: Sendable {
        case jpeg([UInt8])
        /// The thread had other viewers' frames queued: this one was not made.
        case busy
        /// The coordinator is stopping: live views end.
        case stopped
        case failed(ImagingError)
    }

    struct Job: Sendable {
        let frame: IngestedFrame
        let reply: @Sendable (Outcome) -> Void
    }

    private let worker: OwnedWorker<Job>
    private let stopping = Atomic<Bool>(false)

    init(logger: Logger) {
        worker = OwnedWorker(
            name: "cf-liveview", capacity: 2, whenFull: .refuseNewest,
            onDrop: { job in job.reply(.busy) },
            state: { LiveViewWorkshop() },
            handle: { workshop, job in job.reply(workshop.jpeg(of: job.frame)) })
    }

    /// The frame as a JPEG, made on the live-view thread.
    func jpeg(of frame: IngestedFrame) async -> Outcome {
        guard !stopping.load(ordering: .acquiring) else { return .stopped }
        return await withCheckedContinuation { continuation in
            // A refused job is answered `.busy` by onDrop: resumed exactly once either way.
            worker.offer(Job(frame: frame) { continuation.resume(returning: $0) })
        }
    }

    func stop() async {
        stopping.store(true, ordering: .releasing)
        await worker.stop()
    }
}

/// The live-view thread's own renderer and encoder (neither is thread-safe).
private struct LiveViewWorkshop {
    let renderer = FrameRenderer()
    var encoder: JPEGEncoder?

    mutating func jpeg(of frame: IngestedFrame) -> LiveViewRenderer.Outcome {
        let layout = frame.header.layout
        do throws(ImagingError) {
            let raw = RawFrame(
                bytes: frame.payload.bytes, pixelFormat: PixelFormat(layout.pixelFormat),
                width: Int(layout.width), height: Int(layout.height))
            let picture = try renderer.picture(of: raw, width: min(Int(layout.width), LiveViewRenderer.maximumWidth))
            if encoder == nil { encoder = try JPEGEncoder() }
            guard let encoder else { return .busy }
            return .jpeg(try encoder.encode(picture, quality: LiveViewRenderer.quality))
        } catch {
            return .failed(error)
        }
    }
}
