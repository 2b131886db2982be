import FleetCapture
import FleetCore
import FleetImaging
import FleetProtocol
import Synchronization

/// A device's side of its previews, on its capture thread: whether the frame going out now is
/// the next preview (`PreviewCadence`), and whether the last one is still being made.
final class PreviewTap: Sendable {
    struct State {
        var cadence: PreviewCadence?
        var inTheMaking = false
        /// A pixel format that cannot be pictured was logged (once per format).
        var reportedFormats: Set<String> = []
    }
    let state = Mutex(State())
}

extension CameraStream {
    /// Hands the frame leaving the capture path (real or black) to the preview maker when a
    /// preview is due. On the capture thread: a lock and a comparison per frame; the pixels are
    /// read on the preview thread, and a format that cannot be pictured gives no preview,
    /// counted and said once in the log.
    func offerPreview(_ frame: CapturedFrame, header: Capfleet_V1_FrameHeader, black: Bool, to maker: PreviewMaker) {
        let settings = maker.settings
        guard settings.enabled else { return }
        let format = frame.layout.pixelFormat
        enum Outcome { case notDue, busy, unsupported(firstTime: Bool), offer }
        let outcome = previews.state.withLock { state -> Outcome in
            if state.cadence == nil { state.cadence = PreviewCadence(framesPerSecond: settings.framesPerSecond) }
            guard state.cadence!.isDue(at: frame.captureMonotonicNanoseconds) else { return .notDue }
            guard FrameRenderer.canRender(format) else { return .unsupported(firstTime: state.reportedFormats.insert(format.fourCC).inserted) }
            guard !state.inTheMaking else { return .busy }
            state.inTheMaking = true
            return .offer
        }
        switch outcome {
        case .notDue:
            return
        case .busy:
            statistics.previewsSkipped.add(1, ordering: .relaxed)
        case let .unsupported(firstTime):
            statistics.previewsUnsupported.add(1, ordering: .relaxed)
            if firstTime {
                logger.warning(
                    "this device's pixel format cannot be pictured: it sends no previews while it uses it",
                    metadata: ["pixel_format": "\(format)", "supported": "\(FrameConversion.supportedFourCCs.joined(separator: " ")) MJPG JPEG"])
            }
        case .offer:
            let previews = self.previews
            maker.offer(
                PreviewJob(
                    frame: frame, header: header, black: black, statistics: statistics,
                    done: { previews.state.withLock { $0.inTheMaking = false } }))
        }
    }
}
