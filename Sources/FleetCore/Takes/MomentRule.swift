/// A rule that takes a moment when something happens (recordings.md, "Moments by rule"): a
/// code or a face appearing in one camera's detections, or a sensor stream's sample crossing a
/// level or carrying a text, so that an inspection line keeps the seconds around each event
/// and nothing else. Pure: the coordinator stores rules and `MomentTriggerBook` decides when
/// one fires.
public struct MomentRule: Sendable, Hashable {
    /// What the rule waits for, on its source.
    public enum Condition: Sendable, Hashable {
        /// A code appears: of this symbology (nil: any), saying this (nil: any). Each distinct
        /// value counts as its own arrival, so two parts passing one camera are two events.
        case code(symbology: BarcodeSymbology?, value: String?)
        /// A face appears (any face: faces come and go as one presence).
        case face
        /// A sample's value of `channel` is above `level` (a GPIO line going high: level 0.5).
        case above(channel: String, level: Double)
        /// A sample's value of `channel` is below `level`.
        case below(channel: String, level: Double)
        /// A sample's text is exactly this (a cue's name).
        case text(String)

        /// Detections (a camera's) or samples (a sensor stream's).
        public var watchesSamples: Bool {
            switch self {
            case .code, .face: false
            case .above, .below, .text: true
            }
        }

        /// As the CLI writes it: `code qr "part-17"`, `face`, `ax above 2.5`, `text "go"`.
        public var spoken: String {
            switch self {
            case let .code(symbology, value):
                "code" + (symbology.map { " \($0.rawValue)" } ?? "") + (value.map { " \"\($0)\"" } ?? "")
            case .face: "face"
            case let .above(channel, level): "\(channel) above \(level)"
            case let .below(channel, level): "\(channel) below \(level)"
            case let .text(text): "text \"\(text)\""
            }
        }
    }

    public var name: String
    /// The camera whose detections, or the sensor stream whose samples, are watched.
    public var sourceDeviceID: String
    public var condition: Condition
    /// The cameras the moment takes; empty (and not `allCameras`): the source camera.
    public var cameras: [String]
    /// Every online camera whose consent is granted, at the moment's instant.
    public var allCameras: Bool
    public var beforeMs: UInt32
    public var afterMs: UInt32
    /// How long the condition must have been gone before it fires again (debounces a code the
    /// decoder misses in a frame or two).
    public var rearmMs: UInt32
    public var jpeg: Bool

    public static let defaultSideMs: UInt32 = 1_500
    public static let defaultRearmMs: UInt32 = 1_000
    public static let maximumSideMs = UInt32(PreRollSettings.maximumSeconds * 1000)
    public static let maximumRearmMs: UInt32 = 3_600_000

    public init(
        name: String, sourceDeviceID: String, condition: Condition, cameras: [String] = [], allCameras: Bool = false,
        beforeMs: UInt32 = MomentRule.defaultSideMs, afterMs: UInt32 = MomentRule.defaultSideMs, rearmMs: UInt32 = MomentRule.defaultRearmMs,
        jpeg: Bool = false
    ) {
        self.name = name
        self.sourceDeviceID = sourceDeviceID
        self.condition = condition
        self.cameras = cameras
        self.allCameras = allCameras
        self.beforeMs = beforeMs
        self.afterMs = afterMs
        self.rearmMs = rearmMs
        self.jpeg = jpeg
    }

    /// The cameras a moment of this rule names (empty: every online camera with consent).
    public var momentCameras: [String] {
        if allCameras { return [] }
        return cameras.isEmpty ? [sourceDeviceID] : cameras
    }

    /// Why the rule cannot be kept, or nil. `sourceIsSensor`: the source is a sensor stream.
    public func refusal(sourceIsSensor: Bool) -> String? {
        if !Self.isValidName(name) {
            return "a rule's name is 1 to 64 characters of a-z, 0-9, - and _, starting with a letter or digit, not \(name.isEmpty ? "empty" : name)"
        }
        if beforeMs > Self.maximumSideMs || afterMs > Self.maximumSideMs {
            return "a moment reaches at most \(Self.maximumSideMs / 1000) s either side of its instant"
        }
        if rearmMs > Self.maximumRearmMs { return "a rule re-arms within an hour at most" }
        if allCameras, !cameras.isEmpty { return "--all or cameras, not both" }
        switch condition {
        case let .code(_, value?) where value.isEmpty:
            return "a code's value to match cannot be empty: leave it out to match any code"
        case let .above(channel, level), let .below(channel, level):
            if channel.isEmpty { return "name the sample's channel the level applies to" }
            if !level.isFinite { return "the level must be a finite number" }
        case let .text(text) where text.isEmpty || text.utf8.count > 1024:
            return "a sample's text to match is 1 to 1024 bytes"
        default: break
        }
        if condition.watchesSamples != sourceIsSensor {
            return sourceIsSensor
                ? "\(sourceDeviceID) is a sensor stream: its rules wait for samples (--above, --below, --text), not detections"
                : "\(sourceDeviceID) is a camera: its rules wait for detections (--code, --face); samples come from sensor streams"
        }
        if sourceIsSensor, cameras.isEmpty, !allCameras {
            return "a sensor stream takes no pictures: name the cameras its moments take, or --all"
        }
        return nil
    }

    public static func isValidName(_ name: String) -> Bool {
        guard (1...64).contains(name.utf8.count), let first = name.unicodeScalars.first, first.isLowerAlphanumeric else { return false }
        return name.unicodeScalars.allSatisfy { $0.isLowerAlphanumeric || $0 == "-" || $0 == "_" }
    }
}

extension Unicode.Scalar {
    fileprivate var isLowerAlphanumeric: Bool { ("a"..."z").contains(self) || ("0"..."9").contains(self) }
}

/// What a rule's source reported, in the terms rules read: one camera's detection report of
/// one examined frame, or one sample of a sensor stream.
public enum MomentObservation: Sendable, Equatable {
    public struct Code: Sendable, Equatable {
        public var symbology: String
        public var value: String

        public init(symbology: String, value: String) {
            self.symbology = symbology
            self.value = value
        }
    }

    /// Every object found in the frame (none: they are all gone).
    case detection(deviceID: String, fleetTimeNs: UInt64, codes: [Code], faces: Int)
    /// One sample: its values by channel name, and its text.
    case sample(deviceID: String, fleetTimeNs: UInt64, values: [String: Double], text: String)

    public var deviceID: String {
        switch self {
        case let .detection(deviceID, _, _, _), let .sample(deviceID, _, _, _): deviceID
        }
    }

    public var fleetTimeNs: UInt64 {
        switch self {
        case let .detection(_, time, _, _), let .sample(_, time, _, _): time
        }
    }
}

extension MomentRule.Condition {
    /// What the condition sees in the observation: the keys present (a code's value, "face",
    /// the channel), empty when it holds for none, nil when the observation says nothing of it
    /// (a sample without the channel, a detection for a sample rule).
    public func presentKeys(in observation: MomentObservation) -> Set<String>? {
        switch (self, observation) {
        case let (.code(symbology, value), .detection(_, _, codes, _)):
            return Set(
                codes.filter { code in
                    (symbology.map { BarcodeSymbology.named(code.symbology) == $0 } ?? true) && (value.map { code.value == $0 } ?? true)
                }.map { "\($0.symbology):\($0.value)" })
        case let (.face, .detection(_, _, _, faces)):
            return faces > 0 ? ["face"] : []
        case let (.above(channel, level), .sample(_, _, values, _)):
            guard let reading = values[channel] else { return nil }
            return reading > level ? [channel] : []
        case let (.below(channel, level), .sample(_, _, values, _)):
            guard let reading = values[channel] else { return nil }
            return reading < level ? [channel] : []
        case let (.text(wanted), .sample(_, _, _, text)):
            return text == wanted ? ["text"] : []
        default:
            return nil
        }
    }
}
