import FleetCapture
import FleetCore
import FleetEncoding
import FleetProtocol
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
        // An instant already past comes from what the camera kept (a rule's moment: the frame
        // that showed what it waits for); a moment late by a frame or two is still live.
        let period = UInt64(1e9 / max(source.activeFrameRate, 0.1))
        if instant < fleetNow, preRoll.isOn || fleetNow - instant > 2 * period {
            return try stillFromPreRoll(at: instant, fleetNow: fleetNow, period: period, request: request, clock: clock)
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

    /// A still at an instant already past, from the frames kept for pre-roll: the kept frame
    /// nearest it, once the frame after it would have been kept. Device thread only.
    private func stillFromPreRoll(
        at instant: UInt64, fleetNow: UInt64, period: UInt64, request: StillRequest, clock: any CaptureClock
    ) throws(StillFailure) -> StillTaken {
        let late = TakeStartWindow.spoken(fleetNow - instant)
        guard request.streamingFormat, request.bracketEV.isEmpty else {
            throw StillFailure(
                "device \(deviceID): fleet time \(instant) is \(late) past; only a still from the stream (no bracket, no other size) reaches back into its pre-roll"
            )
        }
        guard preRoll.isOn else {
            throw StillFailure(
                "device \(deviceID) keeps no pre-roll, so fleet time \(instant), \(late) past, is gone: capfleet preroll \(deviceID) 5s keeps its last seconds"
            )
        }
        if let encoding = preRoll.settings.encoding {
            return try stillFromEncodedPreRoll(at: instant, period: period, late: late, codec: encoding.codec, clock: clock)
        }
        let settled = instant + 2 * period
        if fleetNow < settled { Thread.sleep(forTimeInterval: Double(settled - fleetNow) / 1e9) }
        let (found, oldest) = preRoll.nearest(to: instant, within: 2 * period)
        guard let kept = found else {
            let reach = oldest.map { "it keeps frames from fleet time \($0) on" } ?? "it has kept no frame yet"
            throw StillFailure("device \(deviceID) kept no frame near fleet time \(instant) (\(late) past): \(reach)", unavailable: true)
        }
        let index = source.activeFormatIndex
        let format = source.device.formats[index]
        let layout = FrameLayout(format)
        try checkKept(kept.header, pixelFormat: kept.header.layout.pixelFormat, at: instant, against: format)
        let frame = StillFrame(kept: kept.pixels, byteCount: kept.count, layout: layout, header: kept.header)
        return StillTaken(
            pictures: [.init(frame: frame, requestedFleetTime: instant, ev: 0, exposure: source.exposure)], awayNanoseconds: 0, stillFormat: format,
            stillFormatIndex: index, streamingFormatIndex: index, frameRate: source.activeFrameRate)
    }

    /// A kept frame (or packet) is a still's only if it is real and of the format streamed now.
    private func checkKept(
        _ header: Capfleet_V1_FrameHeader, pixelFormat: String, at instant: UInt64, against format: VideoFormat
    ) throws(StillFailure) {
        guard header.flags & UInt32(Capfleet_V1_FrameFlag.black.rawValue) == 0 else {
            throw StillFailure(
                "device \(deviceID)'s consent was not granted at fleet time \(instant): it kept a black frame, and a still holds only real pixels")
        }
        guard pixelFormat == format.pixelFormat.fourCC, Int(header.layout.width) == format.width, Int(header.layout.height) == format.height else {
            throw StillFailure(
                "device \(deviceID) streamed another format at fleet time \(instant) (\(header.layout.width)x\(header.layout.height) \(pixelFormat)) than now: that frame is not its streaming format's"
            )
        }
    }

    /// A still at an instant already past from an encoded pre-roll: the packets from the key
    /// frame before the kept frame nearest it through that frame, decoded here on the device's
    /// thread (a second of frames at most; the camera is busy for a still anyway, and capture
    /// runs on) and repacked into the camera's format, once the encoder has put out the frames
    /// after it (its look-ahead holds a few back).
    private func stillFromEncodedPreRoll(
        at instant: UInt64, period: UInt64, late: String, codec: VideoCodec, clock: any CaptureClock
    ) throws(StillFailure) -> StillTaken {
        let settled = instant + 2 * period
        let patience = MonotonicTime.now() + 2_000_000_000
        while (preRoll.newestFleetTime ?? 0) < settled, MonotonicTime.now() < patience { Thread.sleep(forTimeInterval: 0.02) }
        let packets = preRoll.decodable(nearest: instant, within: 2 * period)
        guard let target = packets.last else {
            let reach = preRoll.oldestFleetTime.map { "it keeps packets from fleet time \($0) on" } ?? "it has kept no packet yet"
            throw StillFailure("device \(deviceID) kept no frame near fleet time \(instant) (\(late) past): \(reach)", unavailable: true)
        }
        let index = source.activeFormatIndex
        let format = source.device.formats[index]
        let fourCC = format.pixelFormat.fourCC
        try checkKept(target.header, pixelFormat: target.header.encoded.sourcePixelFormat, at: instant, against: format)
        guard let bytes = VideoDecoder.Picture.frameBytes(fourCC, width: format.width, height: format.height) else {
            throw StillFailure(
                "device \(deviceID) keeps its pre-roll encoded (\(codec.rawValue)) from \(fourCC) frames, and a still from the past is decoded only for 8-bit NV12, YUYV, UYVY and GREY cameras: keep its pre-roll raw (capfleet preroll \(deviceID) 5s, without --codec)"
            )
        }
        let started = MonotonicTime.now()
        let pixels = FrameBuffer(unpooledCapacity: bytes)
        var made = false
        do throws(EncodingError) {
            let decoder = try VideoDecoder(
                codec: codec, codecConfig: Array(packets[0].header.encoded.codecConfig), width: format.width, height: format.height)
            let wanted = Int64(packets.count - 1)
            let keep = { (picture: VideoDecoder.Picture) throws(EncodingError) in
                guard picture.pts == wanted, picture.width == format.width, picture.height == format.height else { return }
                try picture.repack(into: pixels.storage, pixelFormat: fourCC)
                made = true
            }
            for (number, packet) in packets.enumerated() {
                try decoder.decode(UnsafeRawBufferPointer(start: packet.pixels.storage, count: packet.count), pts: Int64(number), deliver: keep)
            }
            if !made { try decoder.drain(deliver: keep) }
        } catch {
            throw StillFailure("device \(deviceID) could not decode its pre-roll's frame at fleet time \(target.header.fleetTimeNs): \(error)")
        }
        guard made else {
            throw StillFailure(
                "device \(deviceID) could not decode its pre-roll's frame at fleet time \(target.header.fleetTimeNs): the decoder gave no picture for it from \(packets.count) packets"
            )
        }
        logger.info(
            "still.decoded",
            metadata: [
                "device.id": "\(deviceID)", "packets": "\(packets.count)", "codec": "\(codec.rawValue)",
                "ms": "\((MonotonicTime.now() - started) / 1_000_000)",
            ])
        let frame = StillFrame(kept: pixels, byteCount: bytes, layout: FrameLayout(format), header: target.header)
        return StillTaken(
            pictures: [.init(frame: frame, requestedFleetTime: instant, ev: 0, exposure: source.exposure)], awayNanoseconds: 0, stillFormat: format,
            stillFormatIndex: index, streamingFormatIndex: index, frameRate: source.activeFrameRate)
    }
}
