import FleetCore
import FleetProtocol

extension RecordedVideoFormat {
    /// What a frame's header says its payload is: the camera's format, or the agent
    /// encoder's codec with its configuration.
    public init(header: Capfleet_V1_FrameHeader, frameRate: Double) {
        if header.hasAudio, let audio = AudioFormat(wire: header.audio.format), header.audio.frames > 0 {
            // A microphone's FLAC packets: as many a second as its blocks make.
            self.init(
                pixelFormat: PixelFormat(Self.flacFourCC), width: 0, height: 0,
                frameRate: Double(audio.sampleRate) / Double(header.audio.frames), codecConfig: Array(header.encoded.codecConfig),
                encoder: header.encoded.encoder, audio: audio)
            return
        }
        self.init(
            pixelFormat: PixelFormat(header.layout.pixelFormat), width: Int(header.layout.width), height: Int(header.layout.height),
            frameRate: frameRate, codecConfig: header.hasEncoded ? Array(header.encoded.codecConfig) : [],
            encoder: header.hasEncoded ? header.encoded.encoder : "",
            sourcePixelFormat: header.hasEncoded ? header.encoded.sourcePixelFormat : "",
            stabilisation: header.hasEncoded ? VideoStabilisation(wire: header.encoded.stabilisation) : .off,
            bitDepth: header.layout.bitDepth == 0 ? 8 : Int(header.layout.bitDepth),
            colour: header.layout.hasColour ? ColourDescription(wire: header.layout.colour) : nil,
            depthUnitMetres: header.layout.depthUnitMetres > 0 && header.layout.depthUnitMetres.isFinite ? header.layout.depthUnitMetres : nil)
    }
}

extension Capfleet_V1_FrameHeader {
    /// A microphone's block: the take's note of its processing (recordings.md, "Sound"),
    /// "off" included; nil for a camera's frame.
    public var processingNote: String? {
        guard hasAudio else { return nil }
        return AudioProcessingSettings(wire: audio.processing).noteJSON(delayFrames: Int(audio.processingDelayFrames))
    }

    /// The camera's auto-framing crop on this frame (detection.md, "Auto-framing"); nil: not framing.
    public var framingCrop: NormalizedRect? { hasFraming ? NormalizedRect(wire: framing.crop) : nil }
    /// The camera's optics framed this frame: `framingCrop` is where in its whole view it is.
    public var framingOptical: Bool { hasFraming && framing.optical }

    /// Whether a decoder can start at this payload: every camera frame can, an encoded
    /// packet only where the encoder said so.
    public var isKeyFrame: Bool {
        !hasEncoded || flags & UInt32(Capfleet_V1_FrameFlag.keyFrame.rawValue) != 0
    }
}
