import CAVCodec
import FleetCore
import Foundation

/// The encoders this host records takes with, found once at the agent's start: the software
/// ones FFmpeg has (ffv1, libx264, libx265), and hardware ones where the host has them, each
/// of those tried with a real frame before it is listed (a device node can be there and its
/// driver or firmware not work). Hardware comes first for its codec; a take
/// falls back to the next one when it cannot open (and says so).
public struct EncoderCatalog: Sendable {
    /// Per codec, in the order a take tries them.
    public let encoders: [EncoderChoice]
    /// What the search found or turned down, for the agent's log.
    public let findings: [String]

    public init(encoders: [EncoderChoice], findings: [String] = []) {
        self.encoders = encoders
        self.findings = findings
    }

    /// A memory-to-memory encoder node (FleetCapture's `V4L2Discovery.memoryToMemoryEncoders`).
    public struct MemoryToMemoryNode: Sendable {
        public var path: String
        public var codecs: [VideoCodec]

        public init(path: String, codecs: [VideoCodec]) {
            self.path = path
            self.codecs = codecs
        }
    }

    /// - Parameters:
    ///   - memoryToMemory: the V4L2 encoder nodes found.
    ///   - renderNodes: DRM render nodes for VA-API (`renderNodes(devRoot:)`).
    ///   - useHardware: false keeps to software (setting `hardware_encoders = off`).
    public static func discover(memoryToMemory: [MemoryToMemoryNode], renderNodes: [String], useHardware: Bool) -> EncoderCatalog {
        capfleet_codec_quiet()
        var hardware: [EncoderChoice] = []
        var findings: [String] = []
        if useHardware {
            for node in memoryToMemory {
                for codec in node.codecs where codec.isLossy {
                    hardware.append(EncoderChoice(codec: codec, name: "\(codec.rawValue)_v4l2m2m", kind: .memoryToMemory(device: node.path)))
                }
            }
            for node in renderNodes {
                for codec in [VideoCodec.h264, .hevc] {
                    hardware.append(EncoderChoice(codec: codec, name: "\(codec.rawValue)_vaapi", kind: .vaapi(device: node)))
                }
            }
        }
        var usable: [EncoderChoice] = []
        for candidate in hardware {
            if let problem = trial(candidate) {
                findings.append("\(candidate) cannot encode here: \(problem)")
            } else {
                findings.append("\(candidate): hardware \(candidate.codec.rawValue) encoder")
                usable.append(candidate)
            }
        }
        // FFmpeg's software encoders are listed when it has them, without a trial: opening
        // x265 costs a fleet of hundreds of agents starting at once more than it tells.
        for codec in [VideoCodec.ffv1, .h264, .hevc] {
            guard let software = EncoderChoice.software(for: codec) else { continue }
            if avcodec_find_encoder_by_name(software.name) == nil {
                findings.append("this host's FFmpeg has no \(software.name): \(codec.rawValue) takes cannot be recorded here")
            } else {
                usable.append(software)
            }
        }
        if useHardware, !usable.contains(where: \.isHardware) {
            findings.append("no hardware encoder on this host: h264 and hevc takes encode in software (libx264, libx265)")
        }
        return EncoderCatalog(encoders: usable, findings: findings)
    }

    /// The encoders for `codec`, in the order a take tries them.
    public func encoders(for codec: VideoCodec) -> [EncoderChoice] { encoders.filter { $0.codec == codec } }

    /// DRM render nodes (/dev/dri/renderD128, …): where VA-API would run.
    public static func renderNodes(devRoot: String = "/dev") -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: devRoot + "/dri")) ?? []
        return names.filter { $0.hasPrefix("renderD") }.sorted().map { devRoot + "/dri/" + $0 }
    }

    /// Opens the encoder for a small picture and encodes one frame: nil when it works.
    static func trial(_ choice: EncoderChoice) -> String? {
        let source = VideoEncoder.Source(pixelFormat: "NV12", width: 320, height: 240, frameRate: 30)
        let grey = UnsafeMutableRawBufferPointer.allocate(byteCount: 320 * 240 * 3 / 2, alignment: 64)
        defer { grey.deallocate() }
        grey.initializeMemory(as: UInt8.self, repeating: 128)
        do throws(EncodingError) {
            let encoder = try VideoEncoder(
                choice: choice, encoding: TakeEncoding(codec: choice.codec), source: source, threads: 1, preset: "ultrafast")
            var packets = 0
            try encoder.encode(grey.baseAddress!, count: grey.count, frameIndex: 0, forceKey: true) { _ in packets += 1 }
            try encoder.drain { _ in packets += 1 }
            return packets > 0 ? nil : "it made no packet from a frame"
        } catch {
            return "\(error)"
        }
    }
}
