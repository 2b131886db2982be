import FleetProtocol

extension MomentRule {
    public var wire: Capfleet_V1_MomentRule {
        .with {
            $0.name = name
            $0.sourceDeviceID = sourceDeviceID
            switch condition {
            case let .code(symbology, value):
                $0.on = .code
                $0.symbology = symbology?.rawValue ?? ""
                $0.value = value ?? ""
            case .face: $0.on = .face
            case let .above(channel, level):
                $0.on = .above
                $0.channel = channel
                $0.level = level
            case let .below(channel, level):
                $0.on = .below
                $0.channel = channel
                $0.level = level
            case let .text(text):
                $0.on = .text
                $0.text = text
            }
            $0.deviceIds = cameras
            $0.all = allCameras
            $0.beforeMs = beforeMs
            $0.afterMs = afterMs
            $0.rearmMs = rearmMs
            $0.encoding = jpeg ? .jpeg : .png
        }
    }

    /// A rule from the wire (zeros are the defaults), or why it cannot be read.
    public init(wire: Capfleet_V1_MomentRule) throws(MomentRuleError) {
        let condition: Condition
        switch wire.on {
        case .code:
            var symbology: BarcodeSymbology?
            if !wire.symbology.isEmpty {
                guard let named = BarcodeSymbology.named(wire.symbology) else {
                    throw .unreadable(
                        "\(wire.symbology) is not a symbology agents decode; choose from \(BarcodeSymbology.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                symbology = named
            }
            condition = .code(symbology: symbology, value: wire.value.isEmpty ? nil : wire.value)
        case .face: condition = .face
        case .above: condition = .above(channel: wire.channel, level: wire.level)
        case .below: condition = .below(channel: wire.channel, level: wire.level)
        case .text: condition = .text(wire.text)
        case .unspecified, .UNRECOGNIZED:
            throw .unreadable("say what the rule waits for: a code, a face, a channel above or below a level, or a text")
        }
        self.init(
            name: wire.name, sourceDeviceID: wire.sourceDeviceID, condition: condition, cameras: wire.deviceIds, allCameras: wire.all,
            beforeMs: wire.beforeMs == 0 ? Self.defaultSideMs : wire.beforeMs, afterMs: wire.afterMs == 0 ? Self.defaultSideMs : wire.afterMs,
            rearmMs: wire.rearmMs == 0 ? Self.defaultRearmMs : wire.rearmMs, jpeg: wire.encoding == .jpeg)
    }
}

public enum MomentRuleError: Error, Sendable, Equatable, CustomStringConvertible {
    case unreadable(String)

    public var description: String {
        switch self {
        case let .unreadable(reason): reason
        }
    }
}
