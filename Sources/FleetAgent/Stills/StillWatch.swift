import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Synchronization

/// A frame kept for a still: a copy out of the capture buffer (the camera's buffer goes back
/// at once), with when it was captured.
struct StillFrame: Sendable {
    let pixels: FrameBuffer
    let byteCount: Int
    let layout: FrameLayout
    let sequence: UInt64
    let fleetTime: UInt64
    let uncertainty: UInt64
    let captureLocal: UInt64
    let zoomFactor: Double

    init(copying frame: CapturedFrame, fleetTime: UInt64, uncertainty: UInt64, captureLocal: UInt64) {
        pixels = FrameBuffer(unpooledCapacity: frame.byteCount)
        pixels.storage.copyMemory(from: frame.buffer.storage, byteCount: frame.byteCount)
        byteCount = frame.byteCount
        layout = frame.layout
        sequence = frame.sequence
        self.fleetTime = fleetTime
        self.uncertainty = uncertainty
        self.captureLocal = captureLocal
        zoomFactor = frame.zoomFactor
    }

    /// A frame kept for pre-roll (its pixels never change once kept: shared, not copied).
    init(kept pixels: FrameBuffer, byteCount: Int, layout: FrameLayout, header: Capfleet_V1_FrameHeader) {
        self.pixels = pixels
        self.byteCount = byteCount
        self.layout = layout
        sequence = header.sequence
        fleetTime = header.fleetTimeNs
        uncertainty = header.fleetTimeUncertaintyNs
        captureLocal = header.captureMonotonicNs
        zoomFactor = header.zoomFactor == 0 ? 1 : header.zoomFactor
    }
}

/// Waits for the frame captured nearest one fleet instant (`NearestFrameChoice`): the capture
/// thread offers every frame, the device's thread waits for the answer. A frame that is not
/// real (black for consent) ends the wait with a refusal: a still never holds pixels the
/// camera may not send.
final class StillWatch: Sendable {
    enum Outcome: Sendable {
        case frame(StillFrame)
        case refused(String)
    }

    private struct Guarded {
        var choice: NearestFrameChoice
        var held: StillFrame?
        var outcome: Outcome?
    }

    private let guarded: Mutex<Guarded>
    private let answered = DispatchSemaphore(value: 0)
    /// Frames of another format (the stream before a switch to the still format) do not count.
    private let layout: FrameLayout

    init(instant: UInt64, layout: FrameLayout) {
        guarded = Mutex(Guarded(choice: NearestFrameChoice(instant: instant)))
        self.layout = layout
    }

    var instant: UInt64 { guarded.withLock { $0.choice.instant } }

    /// On the capture thread, for every frame with a fleet time. Copies at most the frames
    /// within two intervals of the instant.
    func captured(
        _ frame: CapturedFrame, fleetTime: UInt64, uncertainty: UInt64, captureLocal: UInt64, real: Bool, period: UInt64,
        deviceID: String
    ) {
        guard frame.layout.pixelFormat == layout.pixelFormat, frame.layout.width == layout.width, frame.layout.height == layout.height else { return }
        let verdict: NearestFrameChoice.Verdict? = guarded.withLock { guarded in
            guard guarded.outcome == nil else { return nil }
            return guarded.choice.frame(at: fleetTime, period: period)
        }
        guard let verdict, verdict != .ignore else { return }
        if !real {
            finish(.refused("device \(deviceID)'s consent is not granted: it sends black frames, and a still holds only real pixels"))
            return
        }
        switch verdict {
        case .ignore:
            return
        case .hold:
            let copy = StillFrame(copying: frame, fleetTime: fleetTime, uncertainty: uncertainty, captureLocal: captureLocal)
            guarded.withLock { $0.held = copy }
        case .takeThis:
            finish(.frame(StillFrame(copying: frame, fleetTime: fleetTime, uncertainty: uncertainty, captureLocal: captureLocal)))
        case .takeHeld:
            if let held = guarded.withLock({ $0.held }) { finish(.frame(held)) }
        }
    }

    private func finish(_ outcome: Outcome) {
        let first = guarded.withLock { guarded -> Bool in
            guard guarded.outcome == nil else { return false }
            guarded.outcome = outcome
            guarded.held = nil
            return true
        }
        if first { answered.signal() }
    }

    /// Blocks the calling thread (the device's) for the answer, at most `nanoseconds`; nil
    /// when no frame came in time. A frame held before the instant is the answer then, if
    /// nothing came after it (the camera stopped or slowed down).
    func wait(nanoseconds: UInt64) -> Outcome? {
        if answered.wait(timeout: .now() + .nanoseconds(Int(min(nanoseconds, UInt64(Int.max))))) == .success {
            return guarded.withLock { $0.outcome }
        }
        return guarded.withLock { guarded in
            if guarded.outcome == nil, let held = guarded.held { guarded.outcome = .frame(held) }
            return guarded.outcome
        }
    }
}

/// The still a device is taking now, if any: the capture thread reads it for every frame.
final class StillTap: Sendable {
    private let current = Mutex<StillWatch?>(nil)

    var watch: StillWatch? { current.withLock { $0 } }

    func set(_ watch: StillWatch?) { current.withLock { $0 = watch } }
}
