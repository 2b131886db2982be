import FleetProtocol

extension DeviceControl {
    public var wire: Capfleet_V1_DeviceControl {
        .with {
            $0.id = id
            $0.name = name
            $0.type = kind.rawValue
            $0.minimum = minimum
            $0.maximum = maximum
            $0.step = step
            $0.defaultValue = defaultValue
            $0.hasValue_p = value != nil
            $0.value = value ?? 0
            $0.menu = menu.map { item in
                .with {
                    $0.index = item.index; $0.name = item.name; $0.value = item.value
                }
            }
            $0.readOnly = isReadOnly
            $0.inactive = isInactive
        }
    }

    public init(wire: Capfleet_V1_DeviceControl) {
        self.init(
            id: wire.id, name: wire.name, kind: Kind(rawValue: wire.type) ?? .other, minimum: wire.minimum, maximum: wire.maximum,
            step: wire.step, defaultValue: wire.defaultValue, value: wire.hasValue_p ? wire.value : nil,
            menu: wire.menu.map { MenuItem(index: $0.index, name: $0.name, value: $0.value) },
            isReadOnly: wire.readOnly, isInactive: wire.inactive)
    }
}

extension PixelRectangle {
    public var wire: Capfleet_V1_Rectangle {
        .with {
            $0.left = Int32(left); $0.top = Int32(top); $0.width = UInt32(width); $0.height = UInt32(height)
        }
    }

    public init(wire: Capfleet_V1_Rectangle) {
        self.init(left: Int(wire.left), top: Int(wire.top), width: Int(wire.width), height: Int(wire.height))
    }
}

extension FocusMode {
    public var wire: Capfleet_V1_FocusMode {
        switch self {
        case .locked: .locked
        case .auto: .auto
        case .continuous: .continuous
        }
    }

    public init?(wire: Capfleet_V1_FocusMode) {
        switch wire {
        case .locked: self = .locked
        case .auto: self = .auto
        case .continuous: self = .continuous
        default: return nil
        }
    }
}

extension FocusRangeRestriction {
    public var wire: Capfleet_V1_FocusRange {
        switch self {
        case .none: .none
        case .near: .near
        case .far: .far
        }
    }

    public init?(wire: Capfleet_V1_FocusRange) {
        switch wire {
        case .none: self = .none
        case .near: self = .near
        case .far: self = .far
        default: return nil
        }
    }
}

extension FocusCapabilities {
    public var wire: Capfleet_V1_FocusCapabilities {
        .with {
            $0.modes = modes.map(\.wire)
            $0.lensPosition = lensPosition
            $0.pointOfInterest = pointOfInterest
            $0.rangeRestriction = rangeRestriction
            $0.smoothFocus = smoothFocus
            $0.minimumFocusDistanceMm = minimumFocusDistanceMillimetres ?? 0
        }
    }

    public init(wire: Capfleet_V1_FocusCapabilities) {
        self.init(
            modes: wire.modes.compactMap(FocusMode.init(wire:)), lensPosition: wire.lensPosition,
            pointOfInterest: wire.pointOfInterest, rangeRestriction: wire.rangeRestriction, smoothFocus: wire.smoothFocus,
            minimumFocusDistanceMillimetres: wire.minimumFocusDistanceMm > 0 && wire.minimumFocusDistanceMm.isFinite
                ? wire.minimumFocusDistanceMm : nil)
    }
}

extension FocusState {
    public var wire: Capfleet_V1_FocusState {
        .with {
            $0.mode = mode.wire
            $0.hasLensPosition_p = lensPosition != nil
            $0.lensPosition = lensPosition ?? 0
            $0.adjusting = isAdjusting
            $0.pointOfInterestX = pointOfInterest.x
            $0.pointOfInterestY = pointOfInterest.y
            $0.range = rangeRestriction.wire
            $0.smooth = smoothFocus
        }
    }

    public init(wire: Capfleet_V1_FocusState) {
        self.init(
            mode: FocusMode(wire: wire.mode) ?? .locked, lensPosition: wire.hasLensPosition_p ? wire.lensPosition : nil,
            isAdjusting: wire.adjusting, pointOfInterest: NormalizedPoint(x: wire.pointOfInterestX, y: wire.pointOfInterestY),
            rangeRestriction: FocusRangeRestriction(wire: wire.range) ?? .none, smoothFocus: wire.smooth)
    }
}

extension FocusRequest {
    public init(wire: Capfleet_V1_SetFocus) {
        self.init(
            mode: FocusMode(wire: wire.mode), lensPosition: wire.hasLensPosition ? wire.lensPosition : nil,
            pointOfInterest: wire.hasPointOfInterestX || wire.hasPointOfInterestY
                ? NormalizedPoint(
                    x: wire.hasPointOfInterestX ? wire.pointOfInterestX : 0.5,
                    y: wire.hasPointOfInterestY ? wire.pointOfInterestY : 0.5) : nil,
            rangeRestriction: FocusRangeRestriction(wire: wire.range), smoothFocus: wire.hasSmooth ? wire.smooth : nil)
    }

    public var wire: Capfleet_V1_SetFocus {
        .with {
            if let mode { $0.mode = mode.wire }
            if let lensPosition { $0.lensPosition = lensPosition }
            if let pointOfInterest {
                $0.pointOfInterestX = pointOfInterest.x
                $0.pointOfInterestY = pointOfInterest.y
            }
            if let rangeRestriction { $0.range = rangeRestriction.wire }
            if let smoothFocus { $0.smooth = smoothFocus }
        }
    }
}

extension InterruptionReason {
    public var wire: Capfleet_V1_InterruptionReason {
        switch self {
        case .deviceDisconnected: .deviceDisconnected
        case .deviceInUse: .deviceInUse
        case .pressureShutdown: .pressureShutdown
        case .deviceError: .deviceError
        }
    }

    public init?(wire: Capfleet_V1_InterruptionReason) {
        switch wire {
        case .deviceDisconnected: self = .deviceDisconnected
        case .deviceInUse: self = .deviceInUse
        case .pressureShutdown: self = .pressureShutdown
        case .deviceError: self = .deviceError
        default: return nil
        }
    }
}

extension Interruption {
    public var wire: Capfleet_V1_Interruption {
        .with {
            $0.reason = reason.wire; $0.message = message; $0.sinceUnixMs = sinceUnixMilliseconds
        }
    }

    /// Nil for reason NONE: not interrupted.
    public init?(wire: Capfleet_V1_Interruption) {
        guard let reason = InterruptionReason(wire: wire.reason) else { return nil }
        self.init(reason: reason, message: wire.message, sinceUnixMilliseconds: wire.sinceUnixMs)
    }
}

extension DropRecoveryPolicy {
    public var wire: Capfleet_V1_DropRecoveryPolicy {
        .with {
            $0.enabled = isEnabled
            $0.minimumFps = minimumFramesPerSecond
            $0.lateDropShare = lateDropShare
            $0.quietSeconds = UInt32(quietIntervalsToRestore)
        }
    }

    /// Zero values take the defaults.
    public init(wire: Capfleet_V1_DropRecoveryPolicy) {
        let defaults = DropRecoveryPolicy()
        self.init(
            isEnabled: wire.enabled, minimumFramesPerSecond: wire.minimumFps > 0 ? wire.minimumFps : defaults.minimumFramesPerSecond,
            lateDropShare: wire.lateDropShare > 0 ? wire.lateDropShare : defaults.lateDropShare,
            quietIntervalsToRestore: wire.quietSeconds > 0 ? Int(wire.quietSeconds) : defaults.quietIntervalsToRestore)
    }
}

extension PressurePolicy {
    public func wire(active: Bool = false) -> Capfleet_V1_PressurePolicy {
        .with {
            $0.enabled = isEnabled
            $0.level = level.wire
            $0.frameRate = frameRate
            $0.active = active
        }
    }

    /// An unset level reads as serious; an unset rate as 15 fps.
    public init(wire: Capfleet_V1_PressurePolicy) {
        let defaults = PressurePolicy()
        self.init(
            isEnabled: wire.enabled, level: PressureLevel(wire: wire.level) ?? defaults.level,
            frameRate: wire.frameRate > 0 ? wire.frameRate : defaults.frameRate)
    }
}

extension DeviceDescription {
    /// The descriptor an agent sends in HELLO (without the active settings, which the agent adds).
    public var wire: Capfleet_V1_DeviceDescriptor {
        .with {
            $0.deviceID = deviceID
            $0.name = name
            $0.driver = driver
            $0.kind = kind.wire
            $0.formats = formats.map(\.wire)
            $0.controls = controls.map(\.wire)
            if let crop {
                $0.crop = .with {
                    $0.bounds = crop.bounds.wire; $0.defaultRect = crop.defaultRectangle.wire
                }
            }
            $0.focus = focus.wire
            $0.devicePath = devicePath ?? ""
            $0.identitySource = identitySource
        }
    }

    public init(wire: Capfleet_V1_DeviceDescriptor) {
        self.init(
            deviceID: wire.deviceID, name: wire.name, driver: wire.driver, kind: SourceKind(wire: wire.kind) ?? .v4l2,
            formats: wire.formats.map(VideoFormat.init(wire:)), controls: wire.controls.map(DeviceControl.init(wire:)),
            crop: wire.hasCrop
                ? CropCapabilities(
                    bounds: PixelRectangle(wire: wire.crop.bounds),
                    defaultRectangle: PixelRectangle(wire: wire.crop.defaultRect)) : nil,
            focus: FocusCapabilities(wire: wire.focus), devicePath: wire.devicePath.isEmpty ? nil : wire.devicePath,
            identitySource: wire.identitySource)
    }
}

extension PressureLevel {
    public var wire: Capfleet_V1_PressureLevel {
        switch self {
        case .nominal: .nominal
        case .fair: .fair
        case .serious: .serious
        case .critical: .critical
        case .shutdown: .shutdown
        }
    }

    public init?(wire: Capfleet_V1_PressureLevel) {
        switch wire {
        case .nominal: self = .nominal
        case .fair: self = .fair
        case .serious: self = .serious
        case .critical: self = .critical
        case .shutdown: self = .shutdown
        default: return nil
        }
    }
}

extension PressureAssessment {
    /// The report an agent sends: the level, its factors and the sample behind them.
    public func wire(nodeID: String, sample: PressureSample, unixMilliseconds: Int64) -> Capfleet_V1_PressureReport {
        .with {
            $0.nodeID = nodeID
            $0.level = level.wire
            $0.factors = factors.sorted { $0.key < $1.key }.map { factor, level in
                .with {
                    $0.factor = factor.rawValue; $0.level = level.wire
                }
            }
            $0.unixMs = unixMilliseconds
            if let value = sample.cpuStallPercent { $0.cpuStallPercent = value }
            if let value = sample.memoryStallPercent { $0.memoryStallPercent = value }
            if let value = sample.ioStallPercent { $0.ioStallPercent = value }
            if let hottest = sample.thermal.max(by: { $0.celsius < $1.celsius }) {
                $0.hottestCelsius = hottest.celsius
                $0.hottestZone = hottest.zone
            }
            if let value = sample.batteryPercent { $0.batteryPercent = value }
            $0.underVoltage = sample.underVoltage
            $0.throttled = sample.throttled
            if let value = sample.diskFree.values.min() { $0.lowestDiskFree = value }
            $0.dropRate = sample.dropRate ?? 0
            $0.sendQueueFill = sample.sendQueueFill ?? 0
            if let rate = sample.detectionSkipRate { $0.detectionSkipRate = rate }
            $0.intervalDrops = sample.intervalDrops.wire
            $0.intervalFrames = sample.intervalFrames
        }
    }
}

extension Capfleet_V1_ClockState.Sync {
    /// The state as people and JSON read it; nil for UNSPECIFIED and unknown values.
    public var name: String? {
        switch self {
        case .unsynchronised: "unsynchronised"
        case .synchronising: "synchronising"
        case .locked: "locked"
        default: nil
        }
    }
}

extension Capfleet_V1_FrameAlignment.State {
    /// The state as people and JSON read it: off, aligning, aligned, unaligned; nil for
    /// UNSPECIFIED and unknown values.
    public var name: String? {
        switch self {
        case .off: "off"
        case .aligning: "aligning"
        case .aligned: "aligned"
        case .unaligned: "unaligned"
        default: nil
        }
    }
}

extension PreRollSettings {
    /// As set (recordings.md, "Pre-roll"); a budget of 0 is the default budget.
    public init(wire: Capfleet_V1_PreRoll) {
        self =
            wire.milliseconds > 0
            ? PreRollSettings(
                seconds: Double(wire.milliseconds) / 1000,
                budgetBytes: wire.budgetBytes > 0 ? Int(clamping: wire.budgetBytes) : Self.defaultBudgetBytes,
                encoding: wire.hasEncoding ? TakeEncoding(wire: wire.encoding) : nil, diskBudgetBytes: Int(clamping: wire.diskBudgetBytes))
            : .off
    }

    public var wire: Capfleet_V1_PreRoll {
        .with {
            $0.milliseconds = UInt32((seconds * 1000).rounded())
            $0.budgetBytes = isOn ? UInt64(budgetBytes) : 0
            if isOn, let encoding { $0.encoding = encoding.wire }
            if isOn { $0.diskBudgetBytes = UInt64(diskBudgetBytes) }
        }
    }

    /// The command that sets it on an agent (control.proto, `SetPreRoll`).
    public var command: Capfleet_V1_SetPreRoll {
        let wire = wire
        return .with {
            $0.milliseconds = wire.milliseconds
            $0.budgetBytes = wire.budgetBytes
            if wire.hasEncoding { $0.encoding = wire.encoding }
            $0.diskBudgetBytes = wire.diskBudgetBytes
        }
    }

    public init(command: Capfleet_V1_SetPreRoll) {
        self.init(
            wire: .with {
                $0.milliseconds = command.milliseconds
                $0.budgetBytes = command.budgetBytes
                if command.hasEncoding { $0.encoding = command.encoding }
                $0.diskBudgetBytes = command.diskBudgetBytes
            })
    }

    /// As an operator asked for it (operator.proto, `ChangePreRoll`).
    public init(change: Capfleet_V1_ChangePreRoll) {
        self.init(
            wire: .with {
                $0.milliseconds = change.milliseconds
                $0.budgetBytes = change.budgetBytes
                if change.hasEncoding { $0.encoding = change.encoding }
                $0.diskBudgetBytes = change.diskBudgetBytes
            })
    }
}
