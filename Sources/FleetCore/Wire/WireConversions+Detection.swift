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
            framesPerSecond: wire.framesPerSecond == 0 ? DetectionSettings.defaultFramesPerSecond : wire.framesPerSecond)
        if let problem { throw problem }
    }
}
