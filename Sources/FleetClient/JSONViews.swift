import FleetCore
import FleetProtocol

/// The `--json` shapes of the listings: every field present, numbers as numbers, names
/// in snake_case matching the .proto field names where they correspond.
public enum JSONViews {
    public struct Node: Encodable {
        var nodeId, name, hostname, softwareVersion, address: String
        var online, revoked: Bool
        var deviceCount: UInt32
        var firstSeenUnixMs, lastSeenUnixMs: Int64

        public init(_ node: Capfleet_V1_NodeInfo) {
            nodeId = node.nodeID; name = node.name; hostname = node.hostname; softwareVersion = node.softwareVersion
            address = node.address; online = node.online; revoked = node.revoked; deviceCount = node.deviceCount
            firstSeenUnixMs = node.firstSeenUnixMs; lastSeenUnixMs = node.lastSeenUnixMs
        }

        enum CodingKeys: String, CodingKey {
            case nodeId = "node_id", name, hostname, softwareVersion = "software_version", address, online, revoked,
                deviceCount = "device_count", firstSeenUnixMs = "first_seen_unix_ms", lastSeenUnixMs = "last_seen_unix_ms"
        }
    }

    /// A node's clock against fleet time, nanoseconds and ppm (proto-docs/clock.md).
    public struct Clock: Encodable {
        var nodeId, name: String
        var online: Bool
        /// unsynchronised, synchronising, locked; nil if the node never reported its clock.
        var sync: String?
        var offsetNs, wallClockOffsetNs: Int64?
        var driftPpm: Double?
        var uncertaintyNs, roundTripNs: UInt64?
        var coordinatorId: String?
        var reportedUnixMs: Int64?

        public init(_ node: Capfleet_V1_NodeInfo) {
            nodeId = node.nodeID; name = node.name; online = node.online
            guard node.hasClock, node.clock.sync != .unspecified else { return }
            let clock = node.clock
            sync = clock.sync.name ?? "unsynchronised"
            offsetNs = clock.offsetNs; wallClockOffsetNs = clock.wallClockOffsetNs; driftPpm = clock.driftPpm
            uncertaintyNs = clock.uncertaintyNs; roundTripNs = clock.roundTripNs
            coordinatorId = clock.coordinatorID; reportedUnixMs = clock.reportedUnixMs
        }

        enum CodingKeys: String, CodingKey {
            case nodeId = "node_id", name, online, sync, offsetNs = "offset_ns", wallClockOffsetNs = "wall_clock_offset_ns",
                driftPpm = "drift_ppm", uncertaintyNs = "uncertainty_ns", roundTripNs = "round_trip_ns",
                coordinatorId = "coordinator_id", reportedUnixMs = "reported_unix_ms"
        }
    }

    /// A sync check: each device's first frame at or after the time asked for (ns).
    public struct SyncCheck: Encodable {
        struct Entry: Encodable {
            var deviceId, nodeId: String
            var ok: Bool
            var error: String?
            var sequence, fleetTimeNs, uncertaintyNs: UInt64?
            /// How long after the time asked for the frame was captured.
            var afterNs: UInt64?
            var frameRate: Double?

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", nodeId = "node_id", ok, error, sequence, fleetTimeNs = "fleet_time_ns",
                    uncertaintyNs = "uncertainty_ns", afterNs = "after_ns", frameRate = "frame_rate"
            }
        }
        var atFleetTimeNs, spreadNs, uncertaintyNs: UInt64
        var entries: [Entry]

        public init(_ result: Capfleet_V1_SyncCheckResult) {
            atFleetTimeNs = result.atFleetTimeNs; spreadNs = result.spreadNs; uncertaintyNs = result.uncertaintyNs
            entries = result.entries.map { entry in
                let frame = entry.hasFrame ? entry.frame : nil
                return Entry(
                    deviceId: entry.deviceID, nodeId: entry.nodeID, ok: frame != nil,
                    error: frame == nil ? entry.status.reason : nil, sequence: frame?.sequence, fleetTimeNs: frame?.fleetTimeNs,
                    uncertaintyNs: frame?.uncertaintyNs, afterNs: frame.map { $0.fleetTimeNs &- result.atFleetTimeNs },
                    frameRate: frame?.frameRate)
            }
        }

        enum CodingKeys: String, CodingKey {
            case atFleetTimeNs = "at_fleet_time_ns", spreadNs = "spread_ns", uncertaintyNs = "uncertainty_ns", entries
        }
    }

    public struct ConsentChange: Encodable {
        var unixMs: Int64
        var actor, action, from, to, reason, deviceId: String

        public init(_ record: Capfleet_V1_ConsentRecord) {
            unixMs = record.unixMs
            actor = record.actor
            action = ConsentAction(wire: record.action)?.rawValue ?? "unknown"
            from = (ConsentState(wire: record.fromState) ?? .notDetermined).rawValue
            to = (ConsentState(wire: record.toState) ?? .notDetermined).rawValue
            reason = record.reason
            deviceId = record.deviceID
        }

        enum CodingKeys: String, CodingKey {
            case unixMs = "unix_ms", actor, action, from, to, reason, deviceId = "device_id"
        }
    }

    public struct Operator: Encodable {
        var name, role, publicKey, addedBy: String
        var addedUnixMs: Int64

        public init(_ info: Capfleet_V1_OperatorInfo) {
            name = info.name
            role = OperatorRole(wire: info.role)?.rawValue ?? "none"
            publicKey = info.publicKey
            addedBy = info.addedBy
            addedUnixMs = info.addedUnixMs
        }

        enum CodingKeys: String, CodingKey {
            case name, role, publicKey = "public_key", addedBy = "added_by", addedUnixMs = "added_unix_ms"
        }
    }

    public struct FrameRate: Encodable {
        var minFps, maxFps: Double

        enum CodingKeys: String, CodingKey {
            case minFps = "min_fps", maxFps = "max_fps"
        }
    }

    public struct Format: Encodable {
        var pixelFormat: String
        var width, height: UInt32
        var frameRateRanges: [FrameRate]
        var fieldOfViewDegrees: Double?
        var maxZoomFactor: Double
        var upscaleThresholdZoomFactor: Double?
        var binned: Bool
        var bitDepth: UInt32
        /// As the camera declares it (frames.md, "Colour and depth"); null: not declared.
        var colour: Colour?
        var depthUnitMetres: Double?

        public init(_ format: Capfleet_V1_VideoFormat) {
            pixelFormat = format.pixelFormat; width = format.width; height = format.height
            frameRateRanges = format.frameRateRanges.map { FrameRate(minFps: $0.minFps, maxFps: $0.maxFps) }
            fieldOfViewDegrees = format.fieldOfViewDegrees > 0 ? format.fieldOfViewDegrees : nil
            maxZoomFactor = format.maxZoomFactor
            upscaleThresholdZoomFactor = format.upscaleThresholdZoomFactor > 0 ? format.upscaleThresholdZoomFactor : nil
            binned = format.binned; bitDepth = format.bitDepth
            colour = format.hasColour ? ColourDescription(wire: format.colour).map(Colour.init) : nil
            depthUnitMetres = format.depthUnitMetres > 0 ? format.depthUnitMetres : nil
        }

        // Unknown optics are written as null rather than left out.
        enum CodingKeys: String, CodingKey {
            case pixelFormat = "pixel_format", width, height, frameRateRanges = "frame_rate_ranges",
                fieldOfViewDegrees = "field_of_view_degrees", maxZoomFactor = "max_zoom_factor",
                upscaleThresholdZoomFactor = "upscale_threshold_zoom_factor", binned, bitDepth = "bit_depth", colour,
                depthUnitMetres = "depth_unit_metres"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pixelFormat, forKey: .pixelFormat)
            try container.encode(width, forKey: .width)
            try container.encode(height, forKey: .height)
            try container.encode(frameRateRanges, forKey: .frameRateRanges)
            // Unwrapped here: an Optional goes through the encoder's generic path, several type
            // checks per value, and a fleet's listing holds thousands of formats.
            if let fieldOfViewDegrees {
                try container.encode(fieldOfViewDegrees, forKey: .fieldOfViewDegrees)
            } else {
                try container.encodeNil(forKey: .fieldOfViewDegrees)
            }
            try container.encode(maxZoomFactor, forKey: .maxZoomFactor)
            if let upscaleThresholdZoomFactor {
                try container.encode(upscaleThresholdZoomFactor, forKey: .upscaleThresholdZoomFactor)
            } else {
                try container.encodeNil(forKey: .upscaleThresholdZoomFactor)
            }
            try container.encode(binned, forKey: .binned)
            try container.encode(bitDepth, forKey: .bitDepth)
            if let colour { try container.encode(colour, forKey: .colour) } else { try container.encodeNil(forKey: .colour) }
            if let depthUnitMetres {
                try container.encode(depthUnitMetres, forKey: .depthUnitMetres)
            } else {
                try container.encodeNil(forKey: .depthUnitMetres)
            }
        }
    }

    /// A colour description by its parts' names: `{"primaries": "bt2020", "transfer": "hlg", …}`.
    public struct Colour: Encodable, Equatable {
        var primaries, transfer, matrix, range: String

        public init(_ colour: ColourDescription) {
            primaries = colour.primaries.rawValue; transfer = colour.transfer.rawValue
            matrix = colour.matrix.rawValue; range = colour.range.rawValue
        }
    }

    public struct Device: Encodable {
        var deviceId, nodeId, name, driver, kind: String
        var online: Bool
        var activeFormat: Format
        var activeFrameRate: Double
        var formatCount: UInt32
        var activeMinFrameRate: Double?
        var leaseHolder: String?
        var leaseExpiresUnixMs: Int64?
        var interruption: InterruptionView?
        var zoomFactor: Double?
        var focus: FocusView?
        var dropRecovery: DropRecoveryView?
        var pressurePolicy: PressurePolicyView?
        var consent: String
        var consentReason: String?
        var recording, realFrames: Bool
        /// Who wants the device's full-rate frames now, and whether they flow to the coordinator.
        var liveConsumers: [String]
        var liveFlow: Bool
        /// As the agent last reported it; nil while the device is offline.
        var alignment: AlignmentView?
        /// Filled by `capfleet devices --json` so a script sees every format at once.
        public var formats: [Format]?

        public init(_ device: Capfleet_V1_DeviceInfo, formats: [Capfleet_V1_VideoFormat]? = nil) {
            consent = (ConsentState(wire: device.consent) ?? .notDetermined).rawValue
            consentReason = device.consentReason.isEmpty ? nil : device.consentReason
            recording = device.recording
            realFrames = device.realFrames
            liveConsumers = device.liveConsumers
            liveFlow = device.liveFlow
            alignment = device.hasAlignment ? AlignmentView(device.alignment) : nil
            activeMinFrameRate = device.activeMinFrameRate > 0 ? device.activeMinFrameRate : nil
            interruption = Interruption(wire: device.interruption).map(InterruptionView.init)
            zoomFactor = device.zoomFactor > 0 ? device.zoomFactor : nil
            focus = device.hasFocus ? FocusView(FocusState(wire: device.focus)) : nil
            dropRecovery = device.hasDropRecovery ? DropRecoveryView(DropRecoveryPolicy(wire: device.dropRecovery)) : nil
            pressurePolicy = device.hasPressurePolicy ? PressurePolicyView(device.pressurePolicy) : nil
            deviceId = device.deviceID; nodeId = device.nodeID; name = device.name; driver = device.driver
            kind = (SourceKind(wire: device.kind) ?? .v4l2).rawValue; online = device.online
            activeFormat = Format(device.activeFormat); activeFrameRate = device.activeFrameRate
            formatCount = device.formatCount
            leaseHolder = device.leaseHolder.isEmpty ? nil : device.leaseHolder
            leaseExpiresUnixMs = device.leaseHolder.isEmpty ? nil : device.leaseExpiresUnixMs
            self.formats = formats.map { $0.map(Format.init) }
        }

        enum CodingKeys: String, CodingKey {
            case deviceId = "device_id", nodeId = "node_id", name, driver, kind, online, activeFormat = "active_format",
                activeFrameRate = "active_frame_rate", formatCount = "format_count",
                activeMinFrameRate = "active_min_frame_rate", leaseHolder = "lease_holder",
                leaseExpiresUnixMs = "lease_expires_unix_ms", interruption, zoomFactor = "zoom_factor", focus,
                dropRecovery = "drop_recovery", pressurePolicy = "pressure_policy", consent, consentReason = "consent_reason",
                recording, realFrames = "real_frames", liveConsumers = "live_consumers", liveFlow = "live_flow", alignment,
                formats
        }
    }

    /// A device's captures against the fleet-time grid (proto-docs/clock.md, "Frame alignment"):
    /// state off, aligning, aligned or unaligned; phase and grid origin in ns, null while off;
    /// whether it is steered, why it is not aligned, its |phase| over the last minute, its drift
    /// and, steered, its oscillator and its latest spell out of phase (clock.md, "Frame alignment").
    public struct AlignmentView: Encodable {
        var state: String
        var phaseNs: Int64?
        var gridOriginFleetNs: UInt64?
        var steered: Bool
        var notAlignedReason: String?
        var phase: PhaseFigures?
        var driftNsPerS: Double?
        var frequencyErrorPpm: Double?
        var outOfPhaseNs: UInt64?
        var outOfPhaseEndFleetNs: UInt64?
        var outOfPhaseSinceFleetNs: UInt64?
        var triggered: Bool
        var triggers: TriggerFigures?
        /// The output line it drives with its exposure signal, for the cameras wired to it.
        var outputLine: String?

        struct PhaseFigures: Encodable {
            var medianNs, p99Ns, maxNs: UInt64
            var frames: UInt32
            enum CodingKeys: String, CodingKey { case medianNs = "median_ns", p99Ns = "p99_ns", maxNs = "max_ns", frames }
        }

        /// A triggered camera's triggers: how many, how late after their slots, the latest refusal.
        struct TriggerFigures: Encodable {
            var fired, missed: UInt64
            var latenessMedianNs, latenessP99Ns, latenessMaxNs: UInt64
            var error: String?
            /// "software" or "scheduled_action"; why not the latter on a camera that takes them.
            var delivery: String
            var actionUnavailableReason: String?
            /// Hardware line: the input line and the camera driving it ("external": a generator).
            var triggerLine, lineSource: String?
            enum CodingKeys: String, CodingKey {
                case fired, missed, latenessMedianNs = "lateness_median_ns", latenessP99Ns = "lateness_p99_ns", latenessMaxNs = "lateness_max_ns",
                    error, delivery, actionUnavailableReason = "action_unavailable_reason", triggerLine = "trigger_line", lineSource = "line_source"
            }
        }

        init(_ alignment: Capfleet_V1_FrameAlignment) {
            state = alignment.state.name ?? "unknown"
            let on = alignment.state != .off
            phaseNs = on ? alignment.phaseNs : nil
            gridOriginFleetNs = on ? alignment.gridOriginFleetNs : nil
            steered = alignment.steered
            notAlignedReason = alignment.notAlignedReason.isEmpty ? nil : alignment.notAlignedReason
            phase =
                alignment.phaseFrames > 0
                ? PhaseFigures(
                    medianNs: alignment.phaseMedianNs, p99Ns: alignment.phaseP99Ns, maxNs: alignment.phaseMaxNs, frames: alignment.phaseFrames)
                : nil
            driftNsPerS = alignment.phaseFrames > 0 ? alignment.driftNsPerS : nil
            frequencyErrorPpm = alignment.steered && alignment.phaseFrames > 0 ? alignment.frequencyErrorPpm : nil
            outOfPhaseNs = alignment.outOfPhaseNs == 0 ? nil : alignment.outOfPhaseNs
            outOfPhaseEndFleetNs = alignment.outOfPhaseEndFleetNs == 0 ? nil : alignment.outOfPhaseEndFleetNs
            outOfPhaseSinceFleetNs = alignment.outOfPhaseSinceFleetNs == 0 ? nil : alignment.outOfPhaseSinceFleetNs
            triggered = alignment.triggered
            triggers =
                alignment.triggered
                ? TriggerFigures(
                    fired: alignment.triggersFired, missed: alignment.triggersMissed, latenessMedianNs: alignment.triggerLatenessMedianNs,
                    latenessP99Ns: alignment.triggerLatenessP99Ns, latenessMaxNs: alignment.triggerLatenessMaxNs,
                    error: alignment.triggerError.isEmpty ? nil : alignment.triggerError,
                    delivery: alignment.triggerDelivery == .scheduledAction
                        ? "scheduled_action" : alignment.triggerDelivery == .hardwareLine ? "hardware_line" : "software",
                    actionUnavailableReason: alignment.actionUnavailableReason.isEmpty ? nil : alignment.actionUnavailableReason,
                    triggerLine: alignment.triggerDelivery == .hardwareLine ? alignment.triggerLine : nil,
                    lineSource: alignment.triggerDelivery == .hardwareLine
                        ? (alignment.lineSourceDeviceID.isEmpty ? "external" : alignment.lineSourceDeviceID) : nil) : nil
            outputLine = alignment.outputLine.isEmpty ? nil : alignment.outputLine
        }

        enum CodingKeys: String, CodingKey {
            case state, phaseNs = "phase_ns", gridOriginFleetNs = "grid_origin_fleet_ns", steered, notAlignedReason = "not_aligned_reason",
                phase, driftNsPerS = "drift_ns_per_s", frequencyErrorPpm = "frequency_error_ppm", outOfPhaseNs = "out_of_phase_ns",
                outOfPhaseEndFleetNs = "out_of_phase_end_fleet_ns", outOfPhaseSinceFleetNs = "out_of_phase_since_fleet_ns", triggered, triggers,
                outputLine = "output_line"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(state, forKey: .state)
            try container.encode(phaseNs, forKey: .phaseNs)
            try container.encode(gridOriginFleetNs, forKey: .gridOriginFleetNs)
            try container.encode(steered, forKey: .steered)
            try container.encode(notAlignedReason, forKey: .notAlignedReason)
            try container.encode(phase, forKey: .phase)
            try container.encode(driftNsPerS, forKey: .driftNsPerS)
            try container.encode(frequencyErrorPpm, forKey: .frequencyErrorPpm)
            try container.encode(outOfPhaseNs, forKey: .outOfPhaseNs)
            try container.encode(outOfPhaseEndFleetNs, forKey: .outOfPhaseEndFleetNs)
            try container.encode(outOfPhaseSinceFleetNs, forKey: .outOfPhaseSinceFleetNs)
            try container.encode(triggered, forKey: .triggered)
            try container.encode(triggers, forKey: .triggers)
            try container.encodeIfPresent(outputLine, forKey: .outputLine)
        }
    }

    public struct InterruptionView: Encodable {
        var reason, message: String
        var sinceUnixMs: Int64

        init(_ interruption: Interruption) {
            reason = interruption.reason.rawValue; message = interruption.message; sinceUnixMs = interruption.sinceUnixMilliseconds
        }

        enum CodingKeys: String, CodingKey {
            case reason, message, sinceUnixMs = "since_unix_ms"
        }
    }

    public struct FocusView: Encodable {
        var mode: String
        var lensPosition: Double?
        var adjusting: Bool
        var pointOfInterest: [Double]
        var range: String
        var smooth: Bool

        public init(_ focus: FocusState) {
            mode = focus.mode.rawValue; lensPosition = focus.lensPosition; adjusting = focus.isAdjusting
            pointOfInterest = [focus.pointOfInterest.x, focus.pointOfInterest.y]; range = focus.rangeRestriction.rawValue; smooth = focus.smoothFocus
        }

        enum CodingKeys: String, CodingKey {
            case mode, lensPosition = "lens_position", adjusting, pointOfInterest = "point_of_interest", range, smooth
        }
    }

    public struct DropRecoveryView: Encodable {
        var enabled: Bool
        var minimumFps, lateDropShare: Double
        var quietSeconds: Int

        init(_ policy: DropRecoveryPolicy) {
            enabled = policy.isEnabled; minimumFps = policy.minimumFramesPerSecond; lateDropShare = policy.lateDropShare
            quietSeconds = policy.quietIntervalsToRestore
        }

        enum CodingKeys: String, CodingKey {
            case enabled, minimumFps = "minimum_fps", lateDropShare = "late_drop_share", quietSeconds = "quiet_seconds"
        }
    }

    public struct PressurePolicyView: Encodable {
        var enabled: Bool
        var level: String
        var frameRate: Double
        /// The cap is in force now.
        var active: Bool

        init(_ wire: Capfleet_V1_PressurePolicy) {
            let policy = PressurePolicy(wire: wire)
            enabled = policy.isEnabled; level = policy.level.description; frameRate = policy.frameRate; active = wire.active
        }

        enum CodingKeys: String, CodingKey {
            case enabled, level, frameRate = "frame_rate", active
        }
    }

    public struct Control: Encodable {
        var id: UInt32
        var key, name, type: String
        var minimum, maximum, defaultValue: Int64
        var step: UInt64
        var value: Int64?
        var menu: [String: Int64]?
        var readOnly, inactive: Bool

        public init(_ control: DeviceControl) {
            id = control.id; key = control.key; name = control.name; type = control.kind.rawValue
            minimum = control.minimum; maximum = control.maximum; defaultValue = control.defaultValue; step = control.step
            value = control.value; readOnly = control.isReadOnly; inactive = control.isInactive
            menu = control.menu.isEmpty ? nil : Dictionary(control.menu.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        }

        enum CodingKeys: String, CodingKey {
            case id, key, name, type, minimum, maximum, defaultValue = "default_value", step, value, menu,
                readOnly = "read_only", inactive
        }
    }

    /// `capfleet region DEVICE --json`: a GenICam camera's window on its sensor.
    public struct Region: Encodable {
        var device: String
        var left, top, width, height: Int
        var sensorWidth, sensorHeight: Int?

        public init(device: String, left: Int, top: Int, width: Int, height: Int, sensorWidth: Int?, sensorHeight: Int?) {
            (self.device, self.left, self.top, self.width, self.height) = (device, left, top, width, height)
            (self.sensorWidth, self.sensorHeight) = (sensorWidth, sensorHeight)
        }

        enum CodingKeys: String, CodingKey {
            case device, left, top, width, height, sensorWidth = "sensor_width", sensorHeight = "sensor_height"
        }
    }

    /// `capfleet device DEVICE --json`: the listing plus what the device can be told to do.
    public struct DeviceDetails: Encodable {
        var device: Device
        var devicePath: String?
        var identitySource: String
        var controls: [Control]
        var cropBounds: [Int]?
        var cropDefault: [Int]?
        /// A GenICam camera's region of interest now: left, top, width, height.
        var region: [Int]?
        var focusCapabilities: [String]
        var minimumFocusDistanceMm: Double?
        var optics: ScanSetupViews.Optics?
        var detection: DetectionViews.Settings?
        var audioProcessing: AudioProcessingView?

        public init(_ info: Capfleet_V1_DeviceInfo) {
            device = Device(info)
            let description = DeviceDescription(wire: info.descriptor)
            devicePath = description.devicePath
            identitySource = description.identitySource
            controls = description.controls.map(Control.init)
            cropBounds = description.crop.map { [$0.bounds.left, $0.bounds.top, $0.bounds.width, $0.bounds.height] }
            cropDefault = description.crop.map {
                [$0.defaultRectangle.left, $0.defaultRectangle.top, $0.defaultRectangle.width, $0.defaultRectangle.height]
            }
            region = info.hasRegion ? [Int(info.region.left), Int(info.region.top), Int(info.region.width), Int(info.region.height)] : nil
            focusCapabilities = description.focus.isSupported ? description.focus.summary.components(separatedBy: "; ") : []
            minimumFocusDistanceMm = description.focus.minimumFocusDistanceMillimetres
            optics = info.hasOptics ? ScanSetupViews.Optics(device: info.deviceID, info.optics) : nil
            detection =
                info.hasDetection ? (try? DetectionSettings(wire: info.detection)).map { DetectionViews.Settings(device: info.deviceID, $0) } : nil
            audioProcessing =
                info.hasAudioProcessing ? AudioProcessingView(device: info.deviceID, AudioProcessingSettings(wire: info.audioProcessing)) : nil
        }

        enum CodingKeys: String, CodingKey {
            case device, devicePath = "device_path", identitySource = "identity_source", controls, cropBounds = "crop_bounds",
                cropDefault = "crop_default", region, focusCapabilities = "focus_capabilities", minimumFocusDistanceMm = "minimum_focus_distance_mm",
                optics, detection, audioProcessing = "audio_processing"
        }
    }

    /// `capfleet pressure --json`: one node's level, factors and readings.
    public struct Pressure: Encodable {
        var nodeId, name, level: String
        var online: Bool
        var factors: [String: String]
        var cpuStallPercent, memoryStallPercent, ioStallPercent, hottestCelsius, batteryPercent, lowestDiskFree: Double?
        var hottestZone: String?
        var underVoltage, throttled: Bool
        var dropRate, sendQueueFill: Double

        public init(_ node: Capfleet_V1_NodeStatus, report: Capfleet_V1_PressureReport?) {
            nodeId = node.nodeID; name = node.name; online = node.online
            level = PressureLevel(wire: node.pressureLevel)?.description ?? "unknown"
            factors = Dictionary(node.pressureFactors.map { ($0.factor, PressureLevel(wire: $0.level)?.description ?? "unknown") }) { first, _ in
                first
            }
            cpuStallPercent = report?.hasCpuStallPercent == true ? report?.cpuStallPercent : nil
            memoryStallPercent = report?.hasMemoryStallPercent == true ? report?.memoryStallPercent : nil
            ioStallPercent = report?.hasIoStallPercent == true ? report?.ioStallPercent : nil
            hottestCelsius = report?.hasHottestCelsius == true ? report?.hottestCelsius : nil
            hottestZone = report?.hasHottestCelsius == true ? report?.hottestZone : nil
            batteryPercent = report?.hasBatteryPercent == true ? report?.batteryPercent : nil
            lowestDiskFree = report?.hasLowestDiskFree == true ? report?.lowestDiskFree : nil
            underVoltage = report?.underVoltage ?? false; throttled = report?.throttled ?? false
            dropRate = report?.dropRate ?? 0; sendQueueFill = report?.sendQueueFill ?? 0
        }

        enum CodingKeys: String, CodingKey {
            case nodeId = "node_id", name, level, online, factors, cpuStallPercent = "cpu_stall_percent",
                memoryStallPercent = "memory_stall_percent", ioStallPercent = "io_stall_percent",
                hottestCelsius = "hottest_celsius", batteryPercent = "battery_percent", lowestDiskFree = "lowest_disk_free",
                hottestZone = "hottest_zone", underVoltage = "under_voltage", throttled, dropRate = "drop_rate",
                sendQueueFill = "send_queue_fill"
        }
    }

    public struct Drops: Encodable {
        var late, outOfBuffers, discontinuity, encoderLate: UInt64

        enum CodingKeys: String, CodingKey {
            case late, outOfBuffers = "out_of_buffers", discontinuity, encoderLate = "encoder_late"
        }
    }

    public struct DeviceStats: Encodable {
        var deviceId, nodeId, pixelFormat: String
        var online, streaming: Bool
        /// Captured: counted by the agent; received: full-rate frames that reached the coordinator,
        /// which flow only while someone wants them (`liveConsumers`).
        var framesCaptured, bytesCaptured, framesReceived, bytesReceived, lastSequence: UInt64
        var framesPerSecond, bytesPerSecond: Double
        var liveConsumers: UInt32
        var liveFlow: Bool
        /// Sent by the agent's current process on the live path.
        var liveFramesSent: UInt64
        var width, height: UInt32
        var drops: Drops
        var lastFrameUnixMs: Int64
        var interruption: InterruptionView?
        var zoomFactor: Double
        var alignment: AlignmentView?
        /// Why the device needs attention now (see `capfleet watch`); empty when all is well.
        var trouble: [String]
        /// Previews (frames.md, "Previews"), counted apart from frames.
        var previewsReceived: UInt64
        var previewsPerSecond: Double
        var lastPreviewUnixMs: Int64
        /// Frames the agent's detectors examined and skipped (detection.md).
        var detectionExamined, detectionSkipped: UInt64
        /// A sensor stream's samples (sensors.md, "Counters"); absent for cameras.
        var samples: SampleCounts?
        /// A microphone's levels, one per channel (microphones.md, "Levels"); absent for cameras.
        var audioLevels: [AudioLevel]?
        var audioFramesCaptured: UInt64?
        var audioClock: AudioClock?
        /// A GenICam camera's stream transport (device-model.md, "GenICam cameras"); absent otherwise.
        var streamTransport: StreamTransport?
        /// A GenICam camera's region of interest: left, top, width, height.
        var region: [Int]?

        struct StreamTransport: Encodable {
            var framesCompleted, framesIncomplete, underruns, packetsResent, packetsMissing: UInt64
            var packetSize: UInt32
            var rateLimit: String
            var clockPlacement: String?
            var ptp: PTPClock?
            enum CodingKeys: String, CodingKey {
                case framesCompleted = "frames_completed", framesIncomplete = "frames_incomplete", underruns, packetsResent = "packets_resent",
                    packetsMissing = "packets_missing", packetSize = "packet_size", rateLimit = "rate_limit", clockPlacement = "clock_placement", ptp
            }
        }

        /// A camera that takes action commands: its PTP state and clock against the host's.
        struct PTPClock: Encodable {
            var status: String
            var timescaleOffsetNs, residualNs: Int64?
            var refusal: String?
            enum CodingKeys: String, CodingKey {
                case status, timescaleOffsetNs = "timescale_offset_ns", residualNs = "residual_ns", refusal
            }
        }

        /// The microphone's clock (microphones.md, "The audio clock"); `rate_ppm` null until measured.
        struct AudioClock: Encodable {
            var timestampSource: String
            var ratePpm: Double?
            var jitterNs: UInt64
            var fittedSeconds: Double
            var restarts: UInt64
            enum CodingKeys: String, CodingKey {
                case timestampSource = "timestamp_source", ratePpm = "rate_ppm", jitterNs = "jitter_ns", fittedSeconds = "fitted_seconds", restarts
            }
        }

        struct AudioLevel: Encodable {
            var peakDbfs, rmsDbfs: Double
            var clipped: UInt64

            enum CodingKeys: String, CodingKey {
                case peakDbfs = "peak_dbfs", rmsDbfs = "rms_dbfs", clipped
            }
        }

        struct SampleCounts: Encodable {
            var received, refused, withheld, unsent: UInt64
        }

        public init(_ status: Capfleet_V1_DeviceStatus, trouble: [String] = []) {
            self.trouble = trouble
            if status.kind == .syntheticMicrophone || status.kind == .alsa {
                audioLevels = status.audioLevels.map { AudioLevel(peakDbfs: $0.peakDbfs, rmsDbfs: $0.rmsDbfs, clipped: $0.clipped) }
                audioFramesCaptured = status.audioFramesCaptured
                let clock = status.audioClock
                audioClock = AudioClock(
                    timestampSource: AudioClockNames.source(clock.timestampSource), ratePpm: clock.rateMeasured ? clock.ratePpm : nil,
                    jitterNs: clock.jitterNs, fittedSeconds: clock.fittedSeconds, restarts: clock.restarts)
            }
            if status.hasRegion {
                region = [Int(status.region.left), Int(status.region.top), Int(status.region.width), Int(status.region.height)]
            }
            if status.hasStreamTransport {
                let transport = status.streamTransport
                streamTransport = StreamTransport(
                    framesCompleted: transport.framesCompleted, framesIncomplete: transport.framesIncomplete, underruns: transport.underruns,
                    packetsResent: transport.packetsResent, packetsMissing: transport.packetsMissing, packetSize: transport.packetSize,
                    rateLimit: transport.rateLimit, clockPlacement: transport.clockPlacement.isEmpty ? nil : transport.clockPlacement,
                    ptp: transport.ptpStatus.isEmpty && transport.ptpRefusal.isEmpty
                        ? nil
                        : PTPClock(
                            status: transport.ptpStatus, timescaleOffsetNs: transport.clockPlacement == "ptp" ? transport.ptpTimescaleOffsetNs : nil,
                            residualNs: transport.clockPlacement == "ptp" ? transport.ptpResidualNs : nil,
                            refusal: transport.ptpRefusal.isEmpty ? nil : transport.ptpRefusal))
            }
            samples =
                status.kind == .sensor
                ? SampleCounts(
                    received: status.samplesReceived, refused: status.samplesRefused, withheld: status.samplesWithheld,
                    unsent: status.samplesUnsent) : nil
            detectionExamined = status.detectionExamined; detectionSkipped = status.detectionSkipped
            previewsReceived = status.previewsReceived; previewsPerSecond = status.previewsPerSecond
            lastPreviewUnixMs = status.lastPreviewUnixMs
            interruption = Interruption(wire: status.interruption).map(InterruptionView.init)
            zoomFactor = status.zoomFactor
            alignment = status.hasAlignment ? AlignmentView(status.alignment) : nil
            deviceId = status.deviceID; nodeId = status.nodeID; pixelFormat = status.pixelFormat
            online = status.online; streaming = status.streaming
            framesCaptured = status.framesCaptured; bytesCaptured = status.bytesCaptured
            framesReceived = status.framesReceived; bytesReceived = status.bytesReceived; lastSequence = status.lastSequence
            liveConsumers = status.liveConsumers; liveFlow = status.liveFlow; liveFramesSent = status.liveFramesSent
            framesPerSecond = status.framesPerSecond; bytesPerSecond = status.bytesPerSecond
            width = status.width; height = status.height
            drops = Drops(
                late: status.drops.late, outOfBuffers: status.drops.outOfBuffers, discontinuity: status.drops.discontinuity,
                encoderLate: status.drops.encoderLate)
            lastFrameUnixMs = status.lastFrameUnixMs
        }

        enum CodingKeys: String, CodingKey {
            case deviceId = "device_id", nodeId = "node_id", pixelFormat = "pixel_format", online, streaming,
                framesCaptured = "frames_captured", bytesCaptured = "bytes_captured", framesReceived = "frames_received",
                bytesReceived = "bytes_received", lastSequence = "last_sequence", framesPerSecond = "frames_per_second",
                bytesPerSecond = "bytes_per_second", liveConsumers = "live_consumers", liveFlow = "live_flow",
                liveFramesSent = "live_frames_sent", width, height, drops, lastFrameUnixMs = "last_frame_unix_ms", interruption,
                zoomFactor = "zoom_factor", alignment, trouble, previewsReceived = "previews_received",
                previewsPerSecond = "previews_per_second", lastPreviewUnixMs = "last_preview_unix_ms",
                detectionExamined = "detection_examined", detectionSkipped = "detection_skipped", samples,
                audioLevels = "audio_levels", audioFramesCaptured = "audio_frames_captured", audioClock = "audio_clock",
                streamTransport = "stream_transport", region
        }
    }

    public struct Rejection: Encodable {
        var endpoint, reason: String
        var count: UInt64

        public init(_ rejection: Capfleet_V1_RejectionCount) {
            endpoint = rejection.endpoint; reason = rejection.reason; count = rejection.count
        }

        enum CodingKeys: String, CodingKey {
            case endpoint, reason, count
        }
    }
}
