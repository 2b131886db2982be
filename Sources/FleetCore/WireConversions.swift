import FleetProtocol

extension VideoFormat {
    public var wire: Capfleet_V1_VideoFormat {
        .with {
            $0.pixelFormat = pixelFormat.fourCC
            $0.width = UInt32(width)
            $0.height = UInt32(height)
            $0.frameRateRanges = frameRateRanges.map { range in
                .with {
                    $0.minFps = range.minFramesPerSecond
                    $0.maxFps = range.maxFramesPerSecond
                }
            }
            $0.fieldOfViewDegrees = fieldOfViewDegrees ?? 0
            $0.maxZoomFactor = maxZoomFactor
            $0.upscaleThresholdZoomFactor = upscaleThresholdZoomFactor ?? 0
            $0.binned = isBinned
            $0.bitDepth = UInt32(bitDepth)
        }
    }

    public init(wire: Capfleet_V1_VideoFormat) {
        self.init(
            pixelFormat: PixelFormat(wire.pixelFormat), width: Int(wire.width), height: Int(wire.height),
            frameRateRanges: wire.frameRateRanges.map { FrameRateRange(min: $0.minFps, max: $0.maxFps) },
            fieldOfViewDegrees: wire.fieldOfViewDegrees > 0 ? wire.fieldOfViewDegrees : nil,
            maxZoomFactor: wire.maxZoomFactor, upscaleThresholdZoomFactor: wire.upscaleThresholdZoomFactor > 0 ? wire.upscaleThresholdZoomFactor : nil,
            isBinned: wire.binned, bitDepth: Int(wire.bitDepth))
    }
}

extension SourceKind {
    public var wire: Capfleet_V1_SourceKind {
        switch self {
        case .synthetic: .synthetic
        case .v4l2: .v4L2
        case .external: .external
        }
    }

    public init?(wire: Capfleet_V1_SourceKind) {
        switch wire {
        case .synthetic: self = .synthetic
        case .v4L2: self = .v4l2
        case .external: self = .external
        default: return nil
        }
    }
}

extension DropTally {
    public var wire: Capfleet_V1_DropCounts {
        .with {
            $0.late = late
            $0.outOfBuffers = outOfBuffers
            $0.discontinuity = discontinuity
        }
    }

    /// Counts from a peer, capped where SQLite's integers end (a larger one would not read back).
    public init(wire: Capfleet_V1_DropCounts) {
        let cap = UInt64(Int64.max)
        self.init(late: min(wire.late, cap), outOfBuffers: min(wire.outOfBuffers, cap), discontinuity: min(wire.discontinuity, cap))
    }
}
