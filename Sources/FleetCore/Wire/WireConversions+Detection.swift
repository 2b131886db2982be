import FleetProtocol

extension NormalizedRect {
    public var wire: Capfleet_V1_NormalizedRect {
        .with {
            $0.x = x
            $0.y = y
            $0.width = width
            $0.height = height
        }
    }

    public init(wire: Capfleet_V1_NormalizedRect) {
        self.init(x: wire.x, y: wire.y, width: wire.width, height: wire.height)
    }
}

extension DetectionSettings {
    public var wire: Capfleet_V1_DetectionSettings {
        .with {
            $0.codes = codes.map(\.rawValue)
            $0.faces = faces
            if region != .whole { $0.region = region.wire }
            $0.framesPerSecond = framesPerSecond
            if let framing { $0.framing = framing.wire }
        }
    }

    /// Settings from the wire, or why they cannot be taken.
    public init(wire: Capfleet_V1_DetectionSettings) throws(DetectionSettingsError) {
        var codes: [BarcodeSymbology] = []
        for name in wire.codes {
            switch BarcodeSymbology.list(name) {
            case let .success(named): codes += named.filter { !codes.contains($0) }
            case let .failure(error): throw error
            }
        }
        self.init(
            codes: codes, faces: wire.faces, region: wire.hasRegion ? NormalizedRect(wire: wire.region) : .whole,
            framesPerSecond: wire.framesPerSecond == 0 ? DetectionSettings.defaultFramesPerSecond : wire.framesPerSecond,
            framing: wire.hasFraming ? FramingSettings(wire: wire.framing) : nil)
        if let problem { throw problem }
    }
}

extension FramingSettings {
    public var wire: Capfleet_V1_FramingSettings {
        .with {
            $0.margin = margin
            $0.maximumSpeed = maximumSpeed
            $0.holdSeconds = holdSeconds
            $0.minimumCrop = minimumCrop
            $0.optics = optics
        }
    }

    public init(wire: Capfleet_V1_FramingSettings) {
        self.init(
            margin: wire.margin, maximumSpeed: wire.maximumSpeed, holdSeconds: wire.holdSeconds, minimumCrop: wire.minimumCrop,
            optics: wire.optics)
    }

    /// `0.5/0.5/0.6/0.5`: margin, speed, hold, smallest crop (the index's column), then
    /// `/optics` when the camera's own zoom and pan frame.
    public var stored: String { "\(margin)/\(maximumSpeed)/\(holdSeconds)/\(minimumCrop)" + (optics ? "/optics" : "") }

    public init?(stored: String) {
        var parts = stored.split(separator: "/")
        let optics = parts.last == "optics"
        if optics { parts.removeLast() }
        let values = parts.compactMap { Double($0) }
        guard values.count == 4, parts.count == 4 else { return nil }
        self.init(margin: values[0], maximumSpeed: values[1], holdSeconds: values[2], minimumCrop: values[3], optics: optics)
    }
}
