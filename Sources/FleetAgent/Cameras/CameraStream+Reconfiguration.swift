import FleetCapture
import FleetCore
import FleetDetection

/// What an operator or a policy changes on a device. Each runs on the device's own thread:
/// a format change restarts the stream (several ioctls, and a V4L2 driver may answer busy
/// for a while), and nothing else may wait on that.
enum Reconfiguration: Sendable {
    case format(index: Int)
    case frameRate(FrameRateRange)
    case zoom(ZoomCommand)
    case focus(FocusRequest)
    case dropRecovery(DropRecoveryPolicy)
    case pressurePolicy(PressurePolicy)
}

extension CameraStream {
    /// Queues `change` on the device's thread and returns at once; `answer` is called on that
    /// thread once the device has taken the change, or refused it. `pressure` is read when the
    /// change runs, so policies apply at the level the node is at then.
    func reconfigure(
        _ change: Reconfiguration, pressure: @escaping @Sendable () -> PressureReading,
        answer: @escaping @Sendable (Result<Void, CaptureError>) -> Void
    ) {
        onDeviceThread { [self] in
            answer(Result { () throws(CaptureError) in try apply(change, pressure: pressure()) })
        }
    }

    /// Device thread only.
    func apply(_ change: Reconfiguration, pressure: PressureReading) throws(CaptureError) {
        precondition(device.thread.isCurrent, "device \(deviceID) is reconfigured on its own thread only")
        switch change {
        case let .format(index):
            let before = source.activeFrameRateRange
            let zoom = try source.setActiveFormat(index: index)
            step(.formatChanged(rateBefore: before, running: source.activeFrameRateRange, pressure: pressure, format: activeFormat, zoom: zoom))
        case let .frameRate(range):
            try source.setFrameRateRange(range)
            step(.operatorSetRate(running: source.activeFrameRateRange, pressure: pressure, format: activeFormat))
        case let .zoom(command):
            try refuseWhileOpticsFrame(control: "zoom")
            try source.zoom(command)
        case let .focus(request):
            try source.focus(request)
        case let .dropRecovery(policy):
            step(.dropRecoveryPolicyChanged(policy))
        case let .pressurePolicy(policy):
            step(.pressurePolicyChanged(policy, pressure: pressure, running: source.activeFrameRateRange, format: activeFormat))
        }
    }

    /// Auto-framing with the camera's optics owns its zoom, pan and tilt: an operator's own
    /// setting would fight it frame by frame.
    func refuseWhileOpticsFrame(control: String) throws(CaptureError) {
        guard detection.framesWithOptics else { return }
        throw .controlRefused(
            device: deviceID, control: control,
            reason: "auto-framing steers it (capfleet detect \(deviceID) --framing --optics): turn framing off, or frame with the crop, first")
    }

    /// Detection settings, on the device's thread: framing with the optics only on a camera
    /// that has them; a camera they framed goes back to its whole view when they stop.
    func applyDetection(_ settings: DetectionSettings) throws(DetectionError) {
        precondition(device.thread.isCurrent, "device \(deviceID): detection is set on its own thread")
        if settings.framing?.optics == true, let reason = OpticsSteering.unavailableReason(of: source) {
            throw .opticsUnavailable(device: deviceID, reason: reason)
        }
        let framedWithOptics = detection.framesWithOptics
        try detection.apply(settings)
        if framedWithOptics, settings.framing?.optics != true { optics.goHome(source, logger: logger) }
    }

    /// The node's pressure level changed: the cap comes into force or is lifted, on the device's thread.
    func pressureChanged(_ pressure: PressureReading) {
        preRoll.pressureChanged(to: pressure.level)
        onDeviceThread { [self] in
            step(.pressureChanged(pressure, running: source.activeFrameRateRange, format: activeFormat))
        }
    }

    /// Once a second (with the status report): lets drop recovery act, on the device's thread.
    func endDropInterval() {
        onDeviceThread { [self] in
            // Frames lost downstream — late (the send queue was full), out of buffers (frames
            // still held by a slow consumer) or encoder late (a take's encoder behind) — are
            // what a lower rate can cure; sensor discontinuities are not.
            let late = statistics.late.load(ordering: .relaxed) + source.outOfBufferDrops + statistics.encoderLate.load(ordering: .relaxed)
            step(
                .dropIntervalEnded(
                    framesCaptured: statistics.framesCaptured.load(ordering: .relaxed), lateDrops: late,
                    running: source.activeFrameRateRange, format: activeFormat))
        }
    }

    private var activeFormat: VideoFormat { source.device.formats[source.activeFormatIndex] }
}
