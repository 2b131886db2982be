import CV4L2

/// A hardware video encoder behind V4L2's memory-to-memory interface (as on a Raspberry Pi:
/// bcm2835-codec at /dev/video11): raw pictures go in on its output queue, and the encoded
/// stream comes out on its capture queue, in the codecs that queue lists.
public struct V4L2EncoderNode: Hashable, Sendable {
    public var path: String
    public var card: String
    public var driver: String
    /// "h264", "hevc": what its capture queue can produce.
    public var codecs: [String]
}

extension V4L2Discovery {
    /// This host's memory-to-memory encoders: nodes with the M2M capability whose capture
    /// queue offers H.264 or HEVC. Decoders (compressed in, raw out) list no such format there.
    public static func memoryToMemoryEncoders(devRoot: String = "/dev") -> [V4L2EncoderNode] {
        videoNodes(devRoot: devRoot).compactMap { path in
            guard let handle = try? V4L2Handle(path: path), let capability = try? query(handle) else { return nil }
            let singlePlane = capability.deviceCaps & CAPFLEET_V4L2_CAP_VIDEO_M2M != 0
            let multiPlane = capability.deviceCaps & CAPFLEET_V4L2_CAP_VIDEO_M2M_MPLANE != 0
            guard singlePlane || multiPlane else { return nil }
            let queue = multiPlane ? CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
            var codecs: [String] = []
            for index in 0..<UInt32(64) {
                var description = v4l2_fmtdesc()
                description.index = index
                description.type = queue
                guard handle.attempt(CAPFLEET_VIDIOC_ENUM_FMT, &description) == nil else { break }
                if description.pixelformat == CAPFLEET_V4L2_PIX_FMT_H264 { codecs.append("h264") }
                if description.pixelformat == CAPFLEET_V4L2_PIX_FMT_HEVC { codecs.append("hevc") }
            }
            guard !codecs.isEmpty else { return nil }
            return V4L2EncoderNode(path: path, card: capability.card, driver: capability.driver, codecs: codecs)
        }
    }
}
