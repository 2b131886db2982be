import FleetCore

/// One encoder a host records a codec with: libavcodec's name for it, and for a hardware
/// encoder the device node it drives.
public struct EncoderChoice: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// On the host's cores (ffv1, libx264, libx265).
        case software
        /// A V4L2 memory-to-memory encoder (h264_v4l2m2m on a Raspberry Pi).
        case memoryToMemory(device: String)
        /// VA-API on an Intel or AMD GPU's render node (h264_vaapi).
        case vaapi(device: String)
    }

    public var codec: VideoCodec
    public var name: String
    public var kind: Kind

    public init(codec: VideoCodec, name: String, kind: Kind) {
        self.codec = codec
        self.name = name
        self.kind = kind
    }

    public var isHardware: Bool { kind != .software }

    public var device: String? {
        switch kind {
        case .software: nil
        case let .memoryToMemory(device), let .vaapi(device): device
        }
    }

    public var description: String { device.map { "\(name) on \($0)" } ?? name }

    /// The software encoder FFmpeg has for `codec` (nil for raw).
    public static func software(for codec: VideoCodec) -> EncoderChoice? {
        switch codec {
        case .raw: nil
        case .ffv1: EncoderChoice(codec: .ffv1, name: "ffv1", kind: .software)
        case .h264: EncoderChoice(codec: .h264, name: "libx264", kind: .software)
        case .hevc: EncoderChoice(codec: .hevc, name: "libx265", kind: .software)
        }
    }
}
