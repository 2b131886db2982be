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
            if let colour { $0.colour = colour.wire }
            $0.depthUnitMetres = depthUnitMetres ?? 0
        }
    }

    public init(wire: Capfleet_V1_VideoFormat) {
        self.init(
            pixelFormat: PixelFormat(wire.pixelFormat), width: Int(wire.width), height: Int(wire.height),
            frameRateRanges: wire.frameRateRanges.map { FrameRateRange(min: $0.minFps, max: $0.maxFps) },
            fieldOfViewDegrees: wire.fieldOfViewDegrees > 0 ? wire.fieldOfViewDegrees : nil,
            maxZoomFactor: wire.maxZoomFactor,
            upscaleThresholdZoomFactor: wire.upscaleThresholdZoomFactor > 0 ? wire.upscaleThresholdZoomFactor : nil,
            isBinned: wire.binned, bitDepth: Int(wire.bitDepth), colour: wire.hasColour ? ColourDescription(wire: wire.colour) : nil,
            depthUnitMetres: wire.depthUnitMetres > 0 && wire.depthUnitMetres.isFinite ? wire.depthUnitMetres : nil)
    }
}

extension ColourDescription {
    public var wire: Capfleet_V1_ColourDescription {
        .with {
            $0.primaries = Capfleet_V1_ColourPrimaries(rawValue: primaries.h273Code) ?? .unspecified
            $0.transfer = Capfleet_V1_TransferFunction(rawValue: transfer.h273Code) ?? .unspecified
            $0.matrix = Capfleet_V1_ColourMatrix(rawValue: matrix.h273Code) ?? .unspecified
            $0.range = range == .full ? .full : .limited
        }
    }

    /// nil when a part is unspecified or unknown: a description is whole or not given.
    public init?(wire: Capfleet_V1_ColourDescription) {
        guard let primaries = Primaries.allCases.first(where: { $0.h273Code == wire.primaries.rawValue }),
            let transfer = Transfer.allCases.first(where: { $0.h273Code == wire.transfer.rawValue }),
            let matrix = Matrix.allCases.first(where: { $0.h273Code == wire.matrix.rawValue }),
            wire.range == .limited || wire.range == .full
        else { return nil }
        self.init(primaries: primaries, transfer: transfer, matrix: matrix, range: wire.range == .full ? .full : .limited)
    }
}

extension SourceKind {
    public var wire: Capfleet_V1_SourceKind {
        switch self {
        case .synthetic: .synthetic
        case .v4l2: .v4L2
        case .external: .external
        case .sensor: .sensor
        case .syntheticMicrophone: .syntheticMicrophone
        case .alsa: .alsa
        case .genicam: .genicam
        }
    }

    public init?(wire: Capfleet_V1_SourceKind) {
        switch wire {
        case .synthetic: self = .synthetic
        case .v4L2: self = .v4l2
        case .external: self = .external
        case .sensor: self = .sensor
        case .syntheticMicrophone: self = .syntheticMicrophone
        case .alsa: self = .alsa
        case .genicam: self = .genicam
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
            $0.encoderLate = encoderLate
        }
    }

    /// Counts from a peer, capped where SQLite's integers end (a larger one would not read back).
    public init(wire: Capfleet_V1_DropCounts) {
        let cap = UInt64(Int64.max)
        self.init(
            late: min(wire.late, cap), outOfBuffers: min(wire.outOfBuffers, cap), discontinuity: min(wire.discontinuity, cap),
            encoderLate: min(wire.encoderLate, cap))
    }
}

extension VideoCodec {
    /// nil for UNSPECIFIED (the setting decides) and for codecs of a newer peer.
    public init?(wire: Capfleet_V1_VideoCodec) {
        switch wire {
        case .raw: self = .raw
        case .ffv1: self = .ffv1
        case .h264: self = .h264
        case .hevc: self = .hevc
        default: return nil
        }
    }

    public var wire: Capfleet_V1_VideoCodec {
        switch self {
        case .raw: .raw
        case .ffv1: .ffv1
        case .h264: .h264
        case .hevc: .hevc
        }
    }
}

extension TakeEncoding {
    public var wire: Capfleet_V1_Encoding {
        .with {
            $0.codec = codec.wire
            if let quality { $0.quality = UInt32(quality) }
            $0.bitrate = UInt64(bitrate)
            $0.gop = UInt32(gop)
            $0.stabilisation = stabilisation.wire
        }
    }

    /// nil when the codec is unspecified or unknown: the caller decides (a setting, or raw).
    public init?(wire: Capfleet_V1_Encoding) {
        guard let codec = VideoCodec(wire: wire.codec) else { return nil }
        self.init(
            codec: codec, quality: wire.hasQuality ? Int(clamping: wire.quality) : nil,
            bitrate: Int(clamping: min(wire.bitrate, UInt64(Int32.max))), gop: Int(clamping: wire.gop),
            stabilisation: VideoStabilisation(wire: wire.stabilisation))
    }
}

extension VideoStabilisation {
    /// Off for OFF and for a method of a newer peer: it never alters pixels it was not asked to.
    public init(wire: Capfleet_V1_VideoStabilisation) {
        switch wire {
        case .deshake: self = .deshake
        default: self = .off
        }
    }

    public var wire: Capfleet_V1_VideoStabilisation {
        switch self {
        case .off: .off
        case .deshake: .deshake
        }
    }
}

extension HostEncoder {
    public init?(wire: Capfleet_V1_EncoderInfo) {
        guard let codec = VideoCodec(wire: wire.codec), !wire.name.isEmpty else { return nil }
        self.init(codec: codec, name: wire.name, hardware: wire.hardware, device: wire.device)
    }

    public var wire: Capfleet_V1_EncoderInfo {
        .with {
            $0.codec = codec.wire
            $0.name = name
            $0.hardware = hardware
            $0.device = device
        }
    }
}
