import FleetCapture
import FleetCore
import FleetSystem
import Foundation

/// Why a camera gave no still, as the operator reads it.
struct StillFailure: Error, CustomStringConvertible, Sendable {
    let description: String
    /// The device cannot now (not capturing, no clock, busy): a retry may work.
    let unavailable: Bool

    init(_ description: String, unavailable: Bool = false) {
        self.description = description
        self.unavailable = unavailable
    }
}

/// What one camera captured for a still: each picture's frame and how it was exposed, and
/// how long the camera was away from its streaming format.
struct StillTaken: Sendable {
    struct Picture: Sendable {
        let frame: StillFrame
        let requestedFleetTime: UInt64
        let ev: Double
        let exposure: ExposureState?
    }

    let pictures: [Picture]
    let awayNanoseconds: UInt64
    let stillFormat: VideoFormat
    let stillFormatIndex: Int
    let streamingFormatIndex: Int
    let frameRate: Double
}

/// Synchronised stills (stills.md), on the device's own thread: it may switch to the still
/// format and back and set the exposure of each picture of a bracket, and waits for each
/// picture's frame while the capture thread offers them (`StillWatch`). Nothing else runs on
/// the device meanwhile, which is what a still means: the camera is busy for it.
extension CameraStream {
    func takeStill(
        at instant: UInt64, request: StillRequest, patience: UInt64, clock: any CaptureClock,
        pressure: @escaping @Sendable () -> PressureReading, done: @escaping @Sendable (Result<StillTaken, StillFailure>) -> Void
    ) {
        onDeviceThread { [self] in
            done(
                Result { () throws(StillFailure) in
                    try captureStill(at: instant, request: request, patience: patience, clock: clock, pressure: pressure())
                })
        }
    }

    /// Device thread only.
    private func captureStill(
        at instant: UInt64, request: StillRequest, patience: UInt64, clock: any CaptureClock,
        pressure: PressureReading
    ) throws(StillFailure) -> StillTaken {
        precondition(device.thread.isCurrent, "device \(deviceID) takes stills on its own thread only")
        let state = self.state
        guard state.isCapturing else { throw StillFailure("device \(deviceID) is not capturing", unavailable: true) }
        guard state.consent.allowsRealFrames else {
            throw StillFailure("device \(deviceID)'s consent is \(state.consent.rawValue): its pictures do not leave the host")
        }
        let streamingIndex = source.activeFormatIndex
        let plan: StillPlan
        switch StillPlan.plan(formats: source.device.formats, activeIndex: streamingIndex, request: request, deviceID: deviceID) {
        case let .success(chosen): plan = chosen
        case let .failure(refusal): throw StillFailure(refusal.description)
        }
        if plan.switchesFormat, state.isRecording {
            let streaming = source.device.formats[streamingIndex]
            throw StillFailure(
                "device \(deviceID) is recording: a still at another format would change the take's; ask for its streaming size (\(streaming.width)x\(streaming.height)) or stop the take first"
            )
        }
        let baseExposure = source.exposure
        var exposures: [Double?] = request.bracketEV.isEmpty ? [nil] : []
        if !request.bracketEV.isEmpty {
            guard let baseExposure else {
                throw StillFailure("device \(deviceID) has no exposure control: it cannot take a bracket; take the still without --bracket")
            }
            do {
                exposures = try ExposureBracket(base: baseExposure, offsets: request.bracketEV).steps.map { $0.seconds }
            } catch {
                throw StillFailure("device \(deviceID) cannot take that bracket: \(error)")
            }
        }
        guard let fleetNow = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet else {
            throw StillFailure("device \(deviceID)'s node has no fleet time yet (its clock is not synchronised)", unavailable: true)
        }
        let rateBefore = source.activeFrameRateRange
        let switchedAt = MonotonicTime.now()
        if plan.switchesFormat {
            do { try apply(.format(index: plan.formatIndex), pressure: pressure) } catch {
                throw StillFailure("device \(deviceID) cannot switch to its still format: \(error)", unavailable: error.isUnavailable)
            }
        }
        let stillFormat = source.device.formats[source.activeFormatIndex]
        let frameRate = source.activeFrameRate
        var pictures: [StillTaken.Picture] = []
        var failure: StillFailure?
        for (index, when) in request.instants(from: instant).enumerated() {
            if let seconds = exposures[index] {
                do { try source.setExposure(.manual(seconds: seconds)) } catch {
                    failure = StillFailure("device \(deviceID) cannot set its exposure to \(seconds) s: \(error)")
                    break
                }
            }
            let watch = StillWatch(instant: when, layout: FrameLayout(stillFormat))
            stillTap.set(watch)
            let now = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet ?? fleetNow
            let period = UInt64(1e9 / max(source.activeFrameRate, 0.1))
            let outcome = watch.wait(nanoseconds: (when > now ? when - now : 0) + 3 * period + patience)
            stillTap.set(nil)
            switch outcome {
            case let .frame(frame)?:
                pictures.append(
                    .init(
                        frame: frame, requestedFleetTime: when, ev: request.bracketEV.isEmpty ? 0 : request.bracketEV[index],
                        exposure: source.exposure))
            case let .refused(reason)?:
                failure = StillFailure(reason)
            case nil:
                failure = StillFailure("device \(deviceID) captured no frame near fleet time \(when) in time", unavailable: true)
            }
            if failure != nil { break }
        }
        // Back as it was, whatever happened: exposure, then format, then its rates.
        var restoreProblems: [String] = []
        if let baseExposure, !request.bracketEV.isEmpty {
            do { try source.setExposure(baseExposure.automatic ? .automatic : .manual(seconds: baseExposure.seconds)) } catch {
                restoreProblems.append("its exposure could not be restored: \(error)")
            }
        }
        var away: UInt64 = 0
        if plan.switchesFormat {
            do {
                try apply(.format(index: streamingIndex), pressure: pressure)
                if source.activeFrameRateRange != rateBefore { try apply(.frameRate(rateBefore), pressure: pressure) }
            } catch {
                restoreProblems.append("it could not return to its streaming format: \(error)")
            }
            away = MonotonicTime.now() - switchedAt
        }
        if !restoreProblems.isEmpty {
            logger.error("a still left the device changed", metadata: ["problems": "\(restoreProblems.joined(separator: "; "))"])
        }
        if let failure { throw failure }
        return StillTaken(
            pictures: pictures, awayNanoseconds: away, stillFormat: stillFormat, stillFormatIndex: plan.formatIndex,
            streamingFormatIndex: streamingIndex, frameRate: frameRate)
    }
}
