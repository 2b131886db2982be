import CAravis
import FleetCapture
import FleetCore
import FleetSystem
import Foundation
import Synchronization

/// A GigE Vision or USB3 Vision camera as a camera source (device-model.md, "GenICam cameras"),
/// through Aravis: its GenICam pixel formats the fleet can carry, at the sensor's full size and
/// binned 2x2 where it bins, at the region it boots with (offered first) and as centred windows
/// of common sizes (its region of interest, which `setRegion` moves), over its
/// AcquisitionFrameRate range; its ExposureTime as the
/// exposure control. Frames come off Aravis's stream on a thread this source owns, copied into
/// a pool of its own so Aravis's buffers go straight back to the stream.
public final class GenICamCamera: CameraSource, SoftwareTrigger, TriggerLines {
    public let device: DeviceDescription
    public let info: GenICamDeviceInfo
    /// Each format's GenICam PixelFormat name and binning, by format index.
    private let modes: [Mode]
    private let bufferCount: Int
    /// It has TriggerSoftware (GenICam's standard trigger feature set).
    private let triggerable: Bool
    /// Trigger mode is on: each (re)start of the stream puts it back.
    private let triggerMode = Atomic<Bool>(false)

    struct Mode: Sendable {
        var pixelFormat: String
        var binning: Int
        /// Where its window sits until the operator moves it.
        var placement: SensorRegion.Placement
    }
    /// The sensor and the steps its region of interest moves in.
    private let geometry: SensorRegion

    /// The camera's handle: Aravis's objects are not thread-safe, so every call on them goes
    /// through `session` (the stream's pops excepted: Aravis's stream queue is thread-safe).
    private final class Handle: @unchecked Sendable {
        /// Replaced when the camera is opened again after it vanished (`reopen`).
        var camera: UnsafeMutablePointer<ArvCamera>
        var stream: UnsafeMutablePointer<ArvStream>?
        init(camera: UnsafeMutablePointer<ArvCamera>) { self.camera = camera }
        deinit {
            capfleet_arv_unref(stream)
            capfleet_arv_unref(camera)
        }
    }

    private struct Settings {
        var formatIndex: Int
        var frameRate: FrameRateRange
        var exposure: ExposureState?
        /// The operator's placement of the window, until the format changes (nil: the format's own).
        var placement: SensorRegion.Placement?
        /// The window the camera was last set to read.
        var region: PixelRectangle?
    }

    private let handle: Handle
    private let session = Mutex<Void>(())
    private let settings: Mutex<Settings>
    private let running = Atomic<Bool>(false)
    private let captureThread = Mutex<OwnedThread?>(nil)
    private let outOfBuffers = Atomic<UInt64>(0)
    /// Buffers the stream gave back incomplete (packets lost beyond resends, timeouts).
    private let failedBuffers = Atomic<UInt64>(0)
    /// The transport counts of the streams before the current one (each restart opens a new one).
    private let earlierTransport = Mutex(StreamTransportFigures())
    /// The current stream's setup: its packet size and what of it limits the rate.
    private let streamSetup = Mutex(StreamTransportFigures())
    /// Software triggers sent whose frames have not arrived, and a count of the times trigger
    /// mode changed, after which the capture thread lets the triggers' clock mapping go.
    private let triggersInFlight = Mutex(TriggersInFlight())
    private let triggerModeChanges = Atomic<UInt64>(0)
    /// When trigger mode last changed (CLOCK_MONOTONIC ns): frames arriving within a second
    /// of it may have been exposed free-running, and are paired with no trigger.
    private let triggerModeChangedAt = Atomic<UInt64>(0)
    /// A PTP camera that takes scheduled action commands: its features and this agent's keys.
    private let scheduledActions: GenICamScheduledActions?
    /// Such a camera's clock against the host's: the capture thread feeds it, triggers and
    /// reports read it.
    private let ptpClock: Mutex<PTPClockState>
    /// How triggers reach the camera while trigger mode is on.
    private let delivery = Mutex(TriggerDelivery.software(actionUnavailable: ""))
    /// Made on the trigger thread at the first action command.
    private let actionSender = Mutex<GVCPActionSender?>(nil)
    private let actionRequests = Atomic<UInt16>(0)
    /// Its I/O lines: the lines FrameStart can wait for, and the lines it can drive with its
    /// exposure signal (`LineSelector` entries, where `LineSource` offers ExposureActive).
    private let lineInputs: [String]
    private let lineOutputs: [String]
    /// The line it drives now, set again when the camera is opened again.
    private let drivenLine = Mutex<String?>(nil)
    /// The last frame sequence delivered: a new stream's frames follow on from it.
    private let lastSequence = Atomic<UInt64>(0)

    /// The GenICam pixel formats the fleet carries, and the FourCC each becomes.
    static let pixelFormats: [(genicam: String, fourCC: PixelFormat)] = [
        ("Mono8", .grey), ("Mono16", .y16), ("RGB8", PixelFormat("RGB3")), ("RGB8Packed", PixelFormat("RGB3")),
        ("BGR8", PixelFormat("BGR3")), ("BGR8Packed", PixelFormat("BGR3")), ("YUV422_8_UYVY", PixelFormat("UYVY")),
        ("YUV422Packed", PixelFormat("UYVY")), ("YUV422_8", PixelFormat("YUYV")), ("YUV422_YUYV_Packed", PixelFormat("YUYV")),
    ]

    public init(info: GenICamDeviceInfo, bufferCount: Int = 8, frameRate: Double? = nil) throws(GenICamError) {
        self.info = info
        self.bufferCount = max(bufferCount, 3)
        let deviceID = info.deviceID
        guard
            let camera = try aravisCall(deviceID, "opening it (\(info.aravisID) at \(info.address))", { arv_camera_new(info.aravisID, $0) })
        else {
            throw GenICamError(device: deviceID, operation: "opening it", message: "Aravis returned no camera")
        }
        handle = Handle(camera: camera)
        var names: UInt32 = 0
        let offered = try aravisCall(deviceID, "listing its pixel formats") { arv_camera_dup_available_pixel_formats_as_strings(camera, &names, $0) }
        var available: [String] = []
        if let offered {
            for index in 0..<Int(names) { if let name = offered[index] { available.append(String(cString: name)) } }
            capfleet_arv_free(UnsafeMutableRawPointer(mutating: offered))
        }
        var minWidth: Int32 = 0, maxWidth: Int32 = 0, minHeight: Int32 = 0, maxHeight: Int32 = 0
        try aravisCall(deviceID, "reading its width range") { arv_camera_get_width_bounds(camera, &minWidth, &maxWidth, $0) }
        try aravisCall(deviceID, "reading its height range") { arv_camera_get_height_bounds(camera, &minHeight, &maxHeight, $0) }
        // The region it boots with: the size its maker chose, offered first.
        var bootX: Int32 = 0, bootY: Int32 = 0, bootWidth: Int32 = 0, bootHeight: Int32 = 0
        try aravisCall(deviceID, "reading its region") { arv_camera_get_region(camera, &bootX, &bootY, &bootWidth, &bootHeight, $0) }
        var minRate = 0.0, maxRate = 0.0
        let hasRate = try aravisCall(deviceID, "asking for its frame rate") { arv_camera_is_frame_rate_available(camera, $0) } != 0
        if hasRate { try aravisCall(deviceID, "reading its frame rate range") { arv_camera_get_frame_rate_bounds(camera, &minRate, &maxRate, $0) } }
        let bins = (try? aravisCall(deviceID, "asking for binning") { arv_camera_is_binning_available(camera, $0) }) ?? 0
        let rates = [FrameRateRange(min: max(minRate, 0.1), max: max(maxRate > 0 ? maxRate : 30, max(minRate, 0.1)))]
        // Cameras without the increments move in single pixels.
        func step(_ what: String, _ read: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> Int32) -> Int {
            Int((try? aravisCall(deviceID, "reading its \(what) step") { read($0) }) ?? 1)
        }
        let geometry = SensorRegion(
            sensorWidth: Int(maxWidth), sensorHeight: Int(maxHeight), widthStep: step("width") { arv_camera_get_width_increment(camera, $0) },
            heightStep: step("height") { arv_camera_get_height_increment(camera, $0) },
            leftStep: step("horizontal offset") { arv_camera_get_x_offset_increment(camera, $0) },
            topStep: step("vertical offset") { arv_camera_get_y_offset_increment(camera, $0) }, minimumWidth: Int(minWidth),
            minimumHeight: Int(minHeight))
        self.geometry = geometry
        var formats: [VideoFormat] = []
        var modes: [Mode] = []
        var seen: Set<String> = []
        for (genicam, fourCC) in Self.pixelFormats where available.contains(genicam) && !seen.contains(fourCC.description) {
            seen.insert(fourCC.description)
            var sizes: [(width: Int, height: Int, binning: Int, placement: SensorRegion.Placement)] = []
            if bootWidth > 0, bootHeight > 0, bootWidth != maxWidth || bootHeight != maxHeight {
                sizes.append((Int(bootWidth), Int(bootHeight), 1, .at(left: Int(bootX), top: Int(bootY))))
            }
            sizes.append((Int(maxWidth), Int(maxHeight), 1, .at(left: 0, top: 0)))
            if bins != 0 { sizes.append((Int(maxWidth) / 2, Int(maxHeight) / 2, 2, .at(left: 0, top: 0))) }
            let windows = geometry.windows(besides: sizes.filter { $0.binning == 1 }.map { ($0.width, $0.height) })
            sizes += windows.map { ($0.width, $0.height, 1, .centred) }
            for size in sizes {
                formats.append(
                    VideoFormat(
                        pixelFormat: fourCC, width: size.width, height: size.height, frameRateRanges: rates, isBinned: size.binning > 1,
                        bitDepth: fourCC == .y16 ? 16 : 8))
                modes.append(Mode(pixelFormat: genicam, binning: size.binning, placement: size.placement))
            }
        }
        guard !formats.isEmpty else {
            throw GenICamError(
                device: deviceID, operation: "choosing a pixel format",
                message:
                    "it offers \(available.joined(separator: ", ")), none of which the fleet carries (\(Self.pixelFormats.map(\.genicam).joined(separator: ", ")))"
            )
        }
        self.modes = modes
        triggerable = (try? aravisCall(deviceID, "asking for a software trigger") { arv_camera_is_software_trigger_supported(camera, $0) }) ?? 0 != 0
        let sources = GenICamLines.entries(camera, deviceID, "TriggerSource")
        lineInputs = sources.filter { $0.hasPrefix("Line") }
        lineOutputs =
            GenICamLines.entries(camera, deviceID, "LineSource").contains("ExposureActive")
            ? GenICamLines.entries(camera, deviceID, "LineSelector") : []
        let actions = GenICamScheduledActions.detect(camera, info: info)
        scheduledActions = actions
        ptpClock = Mutex(
            PTPClockState(status: actions.flatMap { $0.status(camera, deviceID: deviceID) }, kernelTAIOffsetSeconds: KernelTAIOffset.seconds))
        var exposure: ExposureState?
        if (try? aravisCall(deviceID, "asking for exposure") { arv_camera_is_exposure_time_available(camera, $0) }) ?? 0 != 0 {
            var low = 0.0, high = 0.0
            try aravisCall(deviceID, "reading its exposure range") { arv_camera_get_exposure_time_bounds(camera, &low, &high, $0) }
            let now = try aravisCall(deviceID, "reading its exposure time") { arv_camera_get_exposure_time(camera, $0) }
            exposure = ExposureState(automatic: false, seconds: now / 1e6, minimumSeconds: low / 1e6, maximumSeconds: high / 1e6)
        }
        device = DeviceDescription(
            deviceID: deviceID, name: "\(info.vendor) \(info.model) \(info.serial)", driver: "aravis \(info.protocolName)", kind: .genicam,
            formats: formats, controls: GenICamControls.read(camera, deviceID: deviceID),
            crop: CropCapabilities(
                bounds: geometry.bounds,
                defaultRectangle: PixelRectangle(left: Int(bootX), top: Int(bootY), width: Int(bootWidth), height: Int(bootHeight))),
            devicePath: info.address, identitySource: "genicam vendor, model and serial number")
        let rate = frameRate.map { min(max($0, rates[0].minFramesPerSecond), rates[0].maxFramesPerSecond) } ?? min(30, rates[0].maxFramesPerSecond)
        settings = Mutex(Settings(formatIndex: 0, frameRate: FrameRateRange(min: rate, max: rate), exposure: exposure))
    }

    public var activeFormatIndex: Int { settings.withLock { $0.formatIndex } }
    public var activeFrameRateRange: FrameRateRange { settings.withLock { $0.frameRate } }
    public var outOfBufferDrops: UInt64 { outOfBuffers.load(ordering: .relaxed) }
    /// Buffers the stream handed back incomplete, since the camera was opened.
    public var incompleteFrames: UInt64 { failedBuffers.load(ordering: .relaxed) }
    public var interruption: Interruption? { currentInterruptionState.withLock { $0 } }

    public var streamTransport: StreamTransportFigures? {
        let earlier = earlierTransport.withLock { $0 }
        var current = session.withLock { _ in
            if let scheduledActions {
                let status = scheduledActions.status(handle.camera, deviceID: device.deviceID)
                ptpClock.withLock { $0.status = status }
            }
            return Self.transport(of: handle.stream)
        }
        let setup = streamSetup.withLock { $0 }
        (current.packetSize, current.rateLimit) = (setup.packetSize, setup.rateLimit)
        var figures = current + earlier
        if scheduledActions != nil {
            let clock = ptpClock.withLock { $0 }
            figures.clockPlacement = clock.timescaleOffset != nil ? "ptp" : triggerMode.load(ordering: .relaxed) ? "triggers" : "arrivals"
            figures.ptpStatus = clock.status ?? ""
            if case let .agrees(offset, residual) = clock.verdict {
                (figures.ptpTimescaleOffset, figures.ptpResidual) = (offset, residual)
            }
            figures.ptpRefusal = clock.refusal ?? ""
        }
        return figures
    }

    /// What in a GigE Vision stream's setup costs it frames or CPU, in words; empty when nothing.
    static func rateLimit(packetSize: UInt32, packetSocket: Bool) -> String {
        var limits: [String] = []
        if packetSize > 0, packetSize <= 1500 {
            limits.append(
                "packets of \(packetSize) bytes: the camera's link has no jumbo frames (an MTU of 9000 on the host's interface and the camera's link cuts the packets, and the CPU they cost, about six times)"
            )
        }
        if !packetSocket {
            limits.append(
                "no packet socket: the agent lacks CAP_NET_RAW, so each packet goes through the UDP stack (give it the capability: AmbientCapabilities=CAP_NET_RAW)"
            )
        }
        return limits.joined(separator: "; ")
    }

    /// What Aravis counted on one stream.
    private static func transport(of stream: UnsafeMutablePointer<ArvStream>?) -> StreamTransportFigures {
        var figures = StreamTransportFigures()
        guard let stream else { return figures }
        var completed: UInt = 0, failures: UInt = 0, underruns: UInt = 0, resent: UInt = 0, missing: UInt = 0
        arv_stream_get_statistics(stream, &completed, &failures, &underruns)
        capfleet_arv_gv_stream_statistics(stream, &resent, &missing)
        figures.framesCompleted = UInt64(completed)
        figures.framesIncomplete = UInt64(failures)
        figures.underruns = UInt64(underruns)
        figures.packetsResent = UInt64(resent)
        figures.packetsMissing = UInt64(missing)
        return figures
    }

    // MARK: Triggered exposures

    public var softwareTrigger: (any SoftwareTrigger)? { triggerable ? self : nil }

    @discardableResult
    public func setTriggerMode(_ on: Bool) throws(CaptureError) -> TriggerDelivery {
        try changeTriggerMode(on, line: nil)
    }

    /// Trigger mode on, from `line` or else as `deliveryNow` says, or off.
    private func changeTriggerMode(_ on: Bool, line: String?) throws(CaptureError) -> TriggerDelivery {
        let deviceID = device.deviceID
        let rate = activeFrameRate
        var chosen = line.map { TriggerDelivery.hardwareLine(line: $0, sourceDeviceID: "") } ?? .software(actionUnavailable: "")
        do {
            try session.withLock { _ throws(GenICamError) in
                let camera = handle.camera
                if on {
                    if let scheduledActions, line == nil {
                        let status = scheduledActions.status(camera, deviceID: deviceID)
                        ptpClock.withLock { $0.status = status }
                        chosen = deliveryNow
                    }
                    try enterTriggerMode(camera, chosen)
                    delivery.withLock { $0 = chosen }
                } else {
                    try aravisCall(deviceID, "leaving trigger mode") { arv_camera_clear_triggers(camera, $0) }
                    // Free-running again at the rate it was given (trigger mode may have set the rate aside).
                    if arv_camera_is_frame_rate_available(camera, nil) != 0 {
                        try aravisCall(deviceID, "setting \(rate) fps") { arv_camera_set_frame_rate(camera, rate, $0) }
                    }
                }
            }
        } catch {
            throw .triggerFailed(device: deviceID, reason: error.message)
        }
        triggersInFlight.withLock { $0.removeAll() }
        triggerModeChangedAt.store(MonotonicTime.now(), ordering: .relaxed)
        triggerModeChanges.add(1, ordering: .releasing)
        triggerMode.store(on, ordering: .releasing)
        return chosen
    }

    /// FrameStart waits for TriggerSoftware, or for action 1 (Aravis's `arv_camera_set_trigger`
    /// sets the selector, the source and the mode, and turns the frame-rate limit off).
    private func enterTriggerMode(_ camera: UnsafeMutablePointer<ArvCamera>, _ delivery: TriggerDelivery) throws(GenICamError) {
        if case .scheduledAction = delivery, let scheduledActions {
            try scheduledActions.enterActionMode(camera, deviceID: device.deviceID)
        } else if case let .hardwareLine(line, _) = delivery {
            try aravisCall(device.deviceID, "giving FrameStart to \(line)") { arv_camera_set_trigger(camera, line, $0) }
        } else {
            try aravisCall(device.deviceID, "entering software trigger mode") { arv_camera_set_trigger(camera, "Software", $0) }
        }
    }

    public var deliveryNow: TriggerDelivery {
        guard scheduledActions != nil else { return .software(actionUnavailable: "") }
        if let refusal = ptpClock.withLock({ $0.refusal }) { return .software(actionUnavailable: refusal) }
        // Ahead by more than a busy host's wake-up and the network's delay, and by less than
        // half an interval, so that the command for a slot leaves after the previous slot.
        return .scheduledAction(lead: min(10_000_000, UInt64(0.5e9 / max(activeFrameRate, 0.1))))
    }

    public func fire(dueMonotonic: UInt64) throws(CaptureError) {
        if case .scheduledAction = delivery.withLock({ $0 }) {
            try sendAction(dueMonotonic: dueMonotonic)
            return
        }
        let deviceID = device.deviceID
        do {
            try session.withLock { _ throws(GenICamError) in
                let camera = handle.camera
                // The instant it goes out: the camera's stamp of the frame it starts comes after.
                // Noted before the write, whose acknowledgement a busy host may see only after
                // the frame itself; a frame that found its trigger missing would take the one before.
                let sent = MonotonicTime.now()
                triggersInFlight.withLock { $0.recordSent(sent) }
                do throws(GenICamError) {
                    try aravisCall(deviceID, "firing a software trigger") { arv_camera_software_trigger(camera, $0) }
                } catch {
                    triggersInFlight.withLock { $0.forget(sent) }
                    throw error
                }
            }
        } catch {
            throw .triggerFailed(device: deviceID, reason: error.message)
        }
    }

    /// A scheduled action command for `dueMonotonic`, put on the camera's PTP clock through
    /// the host's CLOCK_REALTIME, which keeps the same time (`PTPHostClockCheck`).
    private func sendAction(dueMonotonic: UInt64) throws(CaptureError) {
        let deviceID = device.deviceID
        guard let scheduledActions, let offset = ptpClock.withLock({ $0.timescaleOffset }) else {
            throw .triggerFailed(
                device: deviceID, reason: ptpClock.withLock { $0.refusal } ?? "the host's clock no longer keeps the camera's PTP time")
        }
        let realtimeMinusMonotonic = Int64(bitPattern: WallClockNow.nanoseconds() &- MonotonicTime.now())
        let cameraTime = UInt64(clamping: Int64(dueMonotonic) &+ realtimeMinusMonotonic &+ offset)
        let command = scheduledActions.command(at: cameraTime, requestID: actionRequests.add(1, ordering: .relaxed).newValue)
        do throws(GenICamError) {
            let sender = try actionSender.withLock { sender throws(GenICamError) -> GVCPActionSender in
                if let sender { return sender }
                let made = try GVCPActionSender(destination: info.address)
                sender = made
                return made
            }
            _ = try sender.send(command, timeout: .zero)
        } catch {
            throw .triggerFailed(device: deviceID, reason: error.message)
        }
    }

    // MARK: I/O lines

    public var triggerLines: (any TriggerLines)? { lineInputs.isEmpty && lineOutputs.isEmpty ? nil : self }

    public func setLineTrigger(_ line: String?) throws(CaptureError) {
        guard let line else {
            try changeTriggerMode(false, line: nil)
            return
        }
        guard lineInputs.contains(line) else {
            throw .triggerFailed(
                device: device.deviceID,
                reason:
                    "its FrameStart cannot wait for \(line): the lines it can are \(lineInputs.isEmpty ? "none" : lineInputs.joined(separator: ", "))"
            )
        }
        try changeTriggerMode(true, line: line)
    }

    public func setExposureOutput(_ line: String?) throws(CaptureError) {
        let deviceID = device.deviceID
        if let line, !lineOutputs.contains(line) {
            throw .triggerFailed(
                device: deviceID,
                reason:
                    "it cannot drive \(line) with its exposure signal: its lines are \(lineOutputs.isEmpty ? "none that carry ExposureActive" : lineOutputs.joined(separator: ", "))"
            )
        }
        do {
            try session.withLock { _ throws(GenICamError) in
                if let line {
                    try GenICamLines.drive(handle.camera, deviceID, line: line, source: "ExposureActive")
                } else if let driven = drivenLine.withLock({ $0 }) {
                    try GenICamLines.drive(handle.camera, deviceID, line: driven, source: "Off")
                }
            }
        } catch {
            throw .triggerFailed(device: deviceID, reason: error.message)
        }
        drivenLine.withLock { $0 = line }
    }

    public var zoomMethod: ZoomMethod? { nil }
    public var zoomFactor: Double { 1 }
    public var focus: FocusState? { nil }
    public var exposure: ExposureState? { settings.withLock { $0.exposure } }

    public func zoom(_ command: ZoomCommand) throws(CaptureError) {
        throw .unsupportedZoom(device: device.deviceID, requested: 1, maximum: 1)
    }

    public func focus(_ request: FocusRequest) throws(CaptureError) { try checkFocus(request) }

    public func setControl(id: UInt32, value: Int64) throws(CaptureError) -> DeviceControl {
        let deviceID = device.deviceID
        guard let control = device.controls.first(where: { $0.id == id }) else {
            throw .controlRefused(device: deviceID, control: DeviceControl.hexadecimal(id), reason: "the camera has no such control")
        }
        if let reason = control.refusal(of: value) { throw .controlRefused(device: deviceID, control: control.name, reason: reason) }
        do {
            return try session.withLock { _ throws(GenICamError) in
                try GenICamControls.set(control, to: value, on: handle.camera, deviceID: deviceID)
            }
        } catch {
            throw .controlRefused(device: deviceID, control: control.name, reason: error.message)
        }
    }

    public func setExposure(_ request: ExposureRequest) throws(CaptureError) {
        try checkExposure(request, against: exposure)
        guard case let .manual(seconds) = request else {
            throw .unsupportedExposure(device: device.deviceID, reason: "its exposure is set by time, not automatically, here")
        }
        let deviceID = device.deviceID
        do {
            try session.withLock { _ throws(GenICamError) in
                let camera = handle.camera
                try aravisCall(deviceID, "setting its exposure time") { arv_camera_set_exposure_time(camera, seconds * 1e6, $0) }
            }
        } catch {
            throw .unsupportedExposure(device: deviceID, reason: error.description)
        }
        settings.withLock { $0.exposure?.seconds = seconds }
    }

    @discardableResult
    public func setActiveFormat(index: Int) throws(CaptureError) -> ZoomFormatChange? {
        try checkFormat(index)
        // A new format's window sits where that format puts it.
        try restarting {
            settings.withLock {
                $0.formatIndex = index
                ($0.placement, $0.region) = (nil, nil)
            }
        }
        return nil
    }

    public var region: PixelRectangle? {
        settings.withLock { settings in
            settings.region ?? window(index: settings.formatIndex, placement: settings.placement)
        }
    }

    public func setRegion(_ placement: SensorRegion.Placement) throws(CaptureError) -> PixelRectangle {
        let index = settings.withLock { $0.formatIndex }
        let format = device.formats[index]
        let placed: PixelRectangle
        do {
            placed = try geometry.place(placement, width: format.width, height: format.height, binning: modes[index].binning)
        } catch {
            throw .regionRefused(device: device.deviceID, reason: error.description)
        }
        try restarting { settings.withLock { ($0.placement, $0.region) = (.at(left: placed.left, top: placed.top), nil) } }
        return region ?? placed
    }

    /// The window format `index` reads when placed so (or where the format puts it).
    private func window(index: Int, placement: SensorRegion.Placement?) -> PixelRectangle? {
        let format = device.formats[index]
        return try? geometry.place(placement ?? modes[index].placement, width: format.width, height: format.height, binning: modes[index].binning)
    }

    public func setFrameRateRange(_ range: FrameRateRange) throws(CaptureError) {
        try checkFrameRateRange(range)
        try restarting { settings.withLock { $0.frameRate = range } }
    }

    /// Applies a change with the stream stopped, and starts it again if it ran.
    private func restarting(_ change: () -> Void) throws(CaptureError) {
        guard let deliver = currentDeliver.withLock({ $0 }), running.load(ordering: .acquiring) else {
            change()
            return
        }
        stop()
        change()
        let stored = currentInterruption.withLock { $0 }
        let onInterruption: @Sendable (Interruption?) -> Void = stored ?? { _ in }
        try start(deliver: deliver, onInterruption: onInterruption)
    }

    private let currentDeliver = Mutex<(@Sendable (CapturedFrame) -> Void)?>(nil)
    private let currentInterruption = Mutex<(@Sendable (Interruption?) -> Void)?>(nil)
    /// The camera is gone now (since when, and why).
    private let currentInterruptionState = Mutex<Interruption?>(nil)

    public func start(
        deliver: @escaping @Sendable (CapturedFrame) -> Void, onInterruption: @escaping @Sendable (Interruption?) -> Void
    ) throws(CaptureError) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { throw .alreadyStreaming(device: device.deviceID) }
        currentDeliver.withLock { $0 = deliver }
        currentInterruption.withLock { $0 = onInterruption }
        let (index, rate) = settings.withLock { ($0.formatIndex, $0.frameRate) }
        let format = device.formats[index]
        let deviceID = device.deviceID
        let frameBytes: Int
        do {
            frameBytes = try session.withLock { _ throws(GenICamError) -> Int in try configureAndStream(index: index, rate: rate) }
        } catch {
            running.store(false, ordering: .releasing)
            throw .unsupportedFormat(
                device: deviceID, requested: "\(format.label) at \(rate.maxFramesPerSecond) fps (\(error.message))",
                supported: device.formats.map(\.label))
        }
        let layout = FrameLayout(format)
        let pool = FrameBufferPool(bufferSize: max(frameBytes, layout.bytesPerLine * layout.height), capacity: bufferCount)
        let thread = OwnedThread(name: "cf-genicam")
        captureThread.withLock { $0 = thread }
        thread.start { [self] in captureLoop(layout: layout, pool: pool, deliver: deliver) }
    }

    /// Sets the camera to the format and rate, opens a stream with its buffers and starts
    /// acquisition; the payload's size. Under `session`.
    private func configureAndStream(index: Int, rate: FrameRateRange) throws(GenICamError) -> Int {
        let format = device.formats[index]
        let mode = modes[index]
        let deviceID = device.deviceID
        let camera = handle.camera
        try aravisCall(deviceID, "setting pixel format \(mode.pixelFormat)") {
            arv_camera_set_pixel_format_from_string(camera, mode.pixelFormat, $0)
        }
        if arv_camera_is_binning_available(camera, nil) != 0 {
            try aravisCall(deviceID, "setting binning \(mode.binning)") {
                arv_camera_set_binning(camera, Int32(mode.binning), Int32(mode.binning), $0)
            }
        }
        let placement = settings.withLock { $0.placement } ?? mode.placement
        let window: PixelRectangle
        do {
            window = try geometry.place(placement, width: format.width, height: format.height, binning: mode.binning)
        } catch {
            throw GenICamError(device: deviceID, operation: "placing its region of interest", message: error.description)
        }
        try aravisCall(deviceID, "setting the region \(format.width)x\(format.height) at \(window.left),\(window.top)") {
            arv_camera_set_region(camera, Int32(window.left), Int32(window.top), Int32(format.width), Int32(format.height), $0)
        }
        settings.withLock { $0.region = window }
        if arv_camera_is_frame_rate_available(camera, nil) != 0 {
            try aravisCall(deviceID, "setting \(rate.maxFramesPerSecond) fps") {
                arv_camera_set_frame_rate(camera, rate.maxFramesPerSecond, $0)
            }
        }
        if triggerMode.load(ordering: .acquiring) { try enterTriggerMode(camera, delivery.withLock { $0 }) }
        if let driven = drivenLine.withLock({ $0 }) { try GenICamLines.drive(camera, deviceID, line: driven, source: "ExposureActive") }
        try aravisCall(deviceID, "choosing continuous acquisition") {
            arv_camera_set_acquisition_mode(camera, ARV_ACQUISITION_MODE_CONTINUOUS, $0)
        }
        let payload = try aravisCall(deviceID, "reading the payload size") { arv_camera_get_payload(camera, $0) }
        // GigE Vision: the largest packet that reaches this host, as Aravis's documentation
        // advises; Aravis sizes the socket buffer to a frame and uses a packet socket if it may.
        var setup = StreamTransportFigures()
        if arv_camera_is_gv_device(camera) != 0 {
            setup.packetSize = UInt32(try aravisCall(deviceID, "negotiating its packet size") { arv_camera_gv_auto_packet_size(camera, $0) })
            setup.rateLimit = Self.rateLimit(packetSize: setup.packetSize, packetSocket: HostCapabilities.hasNetRaw)
        }
        streamSetup.withLock { $0 = setup }
        let stream = try aravisCall(deviceID, "opening its stream") { arv_camera_create_stream(camera, nil, nil, $0) }
        guard let stream else { throw GenICamError(device: deviceID, operation: "opening its stream", message: "Aravis returned none") }
        handle.stream = stream
        for _ in 0..<bufferCount { arv_stream_push_buffer(stream, arv_buffer_new(Int(payload), nil)) }
        try aravisCall(deviceID, "starting acquisition") { arv_camera_start_acquisition(camera, $0) }
        return Int(payload)
    }

    /// Pops buffers until stopped: each complete one copied out and delivered, each incomplete
    /// one counted, every one given back to the stream at once. A camera that falls silent and
    /// stops answering is reported gone, and opened again by its id once a second until it is
    /// back (`reopen`).
    private func captureLoop(layout: FrameLayout, pool: FrameBufferPool, deliver: @Sendable (CapturedFrame) -> Void) {
        // Set before this thread started; replaced only here, by `reopen`.
        guard var stream = session.withLock({ _ in handle.stream }) else { return }
        // The camera's clock on the host's, learned from the frames as they arrive.
        var clock = CameraClockMapping()
        // Its block ids, which wrap at 16 bits on GigE Vision 1.x, as an ever-growing sequence.
        var sequences = BlockIDSequence(continuingAfter: lastSequence.load(ordering: .relaxed))
        var modeChangesSeen = triggerModeChanges.load(ordering: .acquiring)
        var lastHeard = MonotonicTime.now()
        while running.load(ordering: .acquiring) {
            guard let buffer = arv_stream_timeout_pop_buffer(stream, 100_000) else {
                guard MonotonicTime.now() &- lastHeard > silenceBeforeProbe(), !answers() else { continue }
                // Gone: said once, then opened again until it is back (or the stream is stopped).
                report(
                    Interruption(
                        reason: .deviceDisconnected,
                        message:
                            "the camera stopped sending frames and answering (\(info.address)): unplugged, powered off or its link down; opened again by its id once a second",
                        sinceUnixMilliseconds: Int64(WallClockNow.nanoseconds() / 1_000_000)))
                guard let reopened = reopen() else { return }
                stream = reopened
                clock = CameraClockMapping()
                ptpClock.withLock { $0.reset() }
                sequences.restart()
                lastHeard = MonotonicTime.now()
                report(nil)
                continue
            }
            lastHeard = MonotonicTime.now()
            defer { arv_stream_push_buffer(stream, buffer) }
            guard arv_buffer_get_status(buffer) == ARV_BUFFER_STATUS_SUCCESS else {
                failedBuffers.add(1, ordering: .relaxed)
                continue
            }
            var size = 0
            guard let data = arv_buffer_get_data(buffer, &size), let target = pool.take() else {
                outOfBuffers.add(1, ordering: .relaxed)
                continue
            }
            let count = min(size, target.capacity)
            target.storage.copyMemory(from: data, byteCount: count)
            // When it arrived (Aravis stamps that on the real-time clock), on CLOCK_MONOTONIC;
            // the frame is placed by the camera's own timestamp, mapped through the arrivals (and
            // the triggers sent, when triggered: CameraClockMapping).
            let received = UInt64(arv_buffer_get_system_timestamp(buffer))
            let realNow = WallClockNow.nanoseconds()
            let monotonicNow = MonotonicTime.now()
            let age = realNow > received ? realNow - received : 0
            let arrival = monotonicNow > age ? monotonicNow - age : monotonicNow
            var capture = arrival
            let cameraTime = UInt64(arv_buffer_get_timestamp(buffer))
            // A PTP camera whose clock the host's keeps: its stamp is its exposure on the host's
            // clock (CLOCK_REALTIME, then CLOCK_MONOTONIC as read with it).
            let ptpOffset =
                cameraTime == 0 || scheduledActions == nil
                ? nil : ptpClock.withLock { $0.add(cameraNs: cameraTime, arrivalRealtimeNs: received) }
            if let ptpOffset {
                let exposure = Int64(bitPattern: cameraTime) &- ptpOffset &- Int64(bitPattern: realNow &- monotonicNow)
                capture = UInt64(clamping: exposure)
                // The arrivals' line kept up, should the host's clock stop keeping the camera's time.
                clock.add(cameraNs: cameraTime, arrivalNs: arrival)
            } else if cameraTime != 0 {
                clock.add(cameraNs: cameraTime, arrivalNs: arrival)
                let modeChanges = triggerModeChanges.load(ordering: .acquiring)
                if modeChanges != modeChangesSeen {
                    modeChangesSeen = modeChanges
                    clock.forgetTriggers()
                }
                if triggerMode.load(ordering: .acquiring), arrival > triggerModeChangedAt.load(ordering: .relaxed) &+ 1_000_000_000,
                    let exposure = clock.capture(cameraNs: cameraTime)
                {
                    let interval = 1e9 / max(activeFrameRate, 0.1)
                    // Frames paired with the trigger before (or after) their own put the triggers'
                    // line a whole interval off the arrivals': start the pairing again.
                    if let bracket = clock.bracketNanoseconds, bracket > interval / 2 || bracket < -interval / 4 { clock.forgetTriggers() }
                    // Placed by the arrivals, the exposure is known to within the delay to arrival
                    // (and the arrivals' line's noise, which may put it a little early); placed by
                    // the triggers, to within their latency's jitter, well under a quarter interval.
                    let tolerance = UInt64(clock.placedByTriggers ? interval / 4 : interval / 2)
                    if let sent = triggersInFlight.withLock({ $0.pair(exposureNs: exposure, toleranceNs: tolerance) }) {
                        clock.addTrigger(sentNs: sent, cameraNs: cameraTime)
                    }
                }
                capture = clock.capture(cameraNs: cameraTime) ?? arrival
            }
            let sequence = sequences.sequence(of: UInt64(arv_buffer_get_frame_id(buffer)))
            lastSequence.store(sequence, ordering: .relaxed)
            deliver(
                CapturedFrame(
                    buffer: target, byteCount: count, sequence: sequence,
                    captureMonotonicNanoseconds: capture, layout: layout, deviceTimestamp: cameraTime))
        }
    }

    /// How long without a frame before the camera is asked whether it is still there: three
    /// frame intervals (a triggered camera's are the grid's), at least two seconds.
    private func silenceBeforeProbe() -> UInt64 { max(2_000_000_000, UInt64(3e9 / max(activeFrameRate, 0.1))) }

    /// Whether the camera answers a register read (its payload size) now.
    private func answers() -> Bool {
        session.withLock { _ in
            var error: UnsafeMutablePointer<GError>?
            _ = arv_camera_get_payload(handle.camera, &error)
            guard let message = capfleet_arv_error_message(error) else { return true }
            free(message)
            return false
        }
    }

    private func report(_ interruption: Interruption?) {
        currentInterruptionState.withLock { $0 = interruption }
        currentInterruption.withLock { $0 }?(interruption)
    }

    /// Opens the camera again by its id once a second, with the format, rate and trigger mode
    /// it had, until it answers and streams; nil if the stream was stopped meanwhile.
    private func reopen() -> UnsafeMutablePointer<ArvStream>? {
        let (index, rate) = settings.withLock { ($0.formatIndex, $0.frameRate) }
        while running.load(ordering: .acquiring) {
            Thread.sleep(forTimeInterval: 1)
            let reopened = session.withLock { _ -> UnsafeMutablePointer<ArvStream>? in
                arv_camera_stop_acquisition(handle.camera, nil)
                let counted = Self.transport(of: handle.stream)
                earlierTransport.withLock { $0 = $0 + counted }
                capfleet_arv_unref(handle.stream)
                handle.stream = nil
                // Discovery again: a GigE Vision camera may come back at another address.
                arv_update_device_list()
                var error: UnsafeMutablePointer<GError>?
                guard let camera = arv_camera_new(info.aravisID, &error) else {
                    if let message = capfleet_arv_error_message(error) { free(message) }
                    return nil
                }
                capfleet_arv_unref(handle.camera)
                handle.camera = camera
                do {
                    _ = try configureAndStream(index: index, rate: rate)
                } catch {
                    return nil
                }
                return handle.stream
            }
            if let reopened { return reopened }
        }
        return nil
    }

    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        captureThread.withLock { $0 }?.joinBlocking()
        captureThread.withLock { $0 = nil }
        session.withLock { _ in
            let camera = handle.camera
            arv_camera_stop_acquisition(camera, nil)
            let counted = Self.transport(of: handle.stream)
            earlierTransport.withLock { $0 = $0 + counted }
            capfleet_arv_unref(handle.stream)
            handle.stream = nil
        }
    }

    deinit { stop() }
}

/// CLOCK_REALTIME now, ns: what Aravis stamps buffers with.
enum WallClockNow {
    static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
