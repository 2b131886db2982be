import FleetCapture
import FleetCore
import FleetImaging
import FleetProtocol
import FleetSystem
import Foundation
import Logging

/// A frame to make a preview of: the frame as it left the capture path (its real pixels, or
/// the black frame sent in their place), with its header.
struct PreviewJob: Sendable {
    let frame: CapturedFrame
    let header: Capfleet_V1_FrameHeader
    /// The device's consent withheld the pixels: the preview is black, whatever `frame` holds.
    let black: Bool
    let statistics: DeviceStatistics
    /// Told once the job is done or dropped: the device may offer its next preview.
    let done: @Sendable () -> Void
}

/// Makes every camera's previews (frames.md, "Previews") on one thread the agent owns, never
/// on a capture thread: shrinks the frame to the preview's width first (a few samples per
/// output pixel, or TurboJPEG's scaled decoding for MJPEG), lets go of the capture buffer,
/// then encodes the JPEG and hands it to the publisher's preview slot. Each device has at most
/// one preview in the making (`CameraStream.offerPreview`), so a slow thread costs previews,
/// never a camera's buffers.
final class PreviewMaker: Sendable {
    let settings: PreviewSettings
    private let worker: OwnedWorker<PreviewJob>

    init(settings: PreviewSettings, publisher: FramePublisher, logger: Logger) {
        self.settings = settings
        worker = OwnedWorker(
            name: "cf-preview", onDrop: { job in job.done() },
            state: { PreviewWorkshop(settings: settings, publisher: publisher, logger: logger) },
            handle: { workshop, job in
                defer { job.done() }
                workshop.make(job)
            })
    }

    /// Never blocks: the job is queued for the preview thread.
    func offer(_ job: PreviewJob) { worker.post(job) }

    func stop() async { await worker.stop() }
}

/// The preview thread's own tools: a renderer (with its JPEG decoder) and an encoder, which
/// are not thread-safe, and the black previews already made, by size.
private struct PreviewWorkshop {
    let settings: PreviewSettings
    let publisher: FramePublisher
    let logger: Logger
    let renderer = FrameRenderer()
    var encoder: JPEGEncoder?
    var blackPreviews: [Int: [UInt8]] = [:]
    /// Devices whose failure to make a preview was logged already (once each, not per preview).
    var reported: Set<String> = []

    init(settings: PreviewSettings, publisher: FramePublisher, logger: Logger) {
        self.settings = settings
        self.publisher = publisher
        self.logger = logger
    }

    /// The crop's outline: amber, seen against most scenes.
    static let cropColour = RGB(255, 191, 0)

    mutating func make(_ job: PreviewJob) {
        let layout = job.frame.layout
        do {
            let jpeg: [UInt8], width: Int, height: Int
            if job.black {
                // Never reads the frame: a black preview is made from its size alone.
                (width, height) = FrameConversion.scaledSize(width: layout.width, height: layout.height, toWidth: settings.width)
                let key = width << 16 | height
                jpeg = blackPreviews[key] ?? BlackJPEG.encode(width: width, height: height)
                blackPreviews[key] = jpeg
            } else {
                let frame = job.frame
                var picture = try renderer.picture(
                    of: RawFrame(
                        bytes: UnsafeRawBufferPointer(start: frame.buffer.storage, count: frame.byteCount),
                        pixelFormat: layout.pixelFormat, width: layout.width, height: layout.height),
                    width: settings.width)
                // The whole sensor with the auto-framing crop drawn on it (detection.md, "Auto-framing");
                // framed by the optics, the picture is the crop itself.
                if job.header.hasFraming, job.header.framing.active, !job.header.framing.optical {
                    picture.outline(NormalizedRect(wire: job.header.framing.crop), with: Self.cropColour)
                }
                if encoder == nil { encoder = try JPEGEncoder() }
                jpeg = try encoder!.encode(picture, quality: settings.quality)
                (width, height) = (picture.width, picture.height)
            }
            var header = job.header
            header.layout = .with {
                $0.pixelFormat = "JPEG"
                $0.width = UInt32(width)
                $0.height = UInt32(height)
            }
            header.payloadSize = UInt64(jpeg.count)
            header.flags |= UInt32(Capfleet_V1_FrameFlag.preview.rawValue)
            publisher.submitPreview(header: header, jpeg: jpeg, statistics: job.statistics)
        } catch {
            job.statistics.previewsFailed.add(1, ordering: .relaxed)
            if reported.insert(job.header.deviceID).inserted {
                logger.warning(
                    "cannot make a preview; previews of this device are counted as failed from now on, not logged again",
                    metadata: ["device.id": "\(job.header.deviceID)", "error": "\(error)"])
            }
        }
    }
}
