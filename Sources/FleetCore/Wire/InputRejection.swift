import FleetProtocol

/// Why a message on a coordinator endpoint was refused. The raw values are the reason
/// labels counted per endpoint and documented in proto-docs (frames.md, registration.md).
public enum InputRejection: String, Sendable, CaseIterable {
    case wrongPartCount = "wrong_part_count"
    case undecodable = "undecodable"
    case unknownMessage = "unknown_message"
    case incompatibleVersion = "incompatible_version"
    case unregisteredNode = "unregistered_node"
    case unknownDevice = "unknown_device"
    case payloadSizeMismatch = "payload_size_mismatch"
    case formatSizeMismatch = "format_size_mismatch"
    case oversizedClaim = "oversized_claim"
    case invalidFormat = "invalid_format"
    /// A device id that breaks DeviceIdentityRule (device-model.md, "Stable device ids").
    case invalidDeviceID = "invalid_device_id"
    /// A recorded frame beyond the credit the coordinator granted (frames.md, "The recording path").
    case overCredit = "over_credit"
    // Who may connect and what they may do (security.md).
    case handshakeFailed = "handshake_failed"
    case unknownKey = "unknown_key"
    case revokedKey = "revoked_key"
    case wrongEndpoint = "wrong_endpoint"
    case wrongIdentity = "wrong_identity"
    case badToken = "bad_token"
    case forbidden = "forbidden"
    /// A dashboard request that is not the page's own: no or a wrong CSRF token, another site's Origin.
    case forgedRequest = "forged_request"
    /// A dashboard request without a live session (no cookie, signed out, revoked, expired).
    case notSignedIn = "not_signed_in"

    /// Reasons that say someone tried to get in or act without the right: audited.
    public var isAccessDenial: Bool {
        switch self {
        case .handshakeFailed, .unknownKey, .revokedKey, .wrongEndpoint, .wrongIdentity, .badToken, .forbidden, .forgedRequest: true
        default: false
        }
    }
}

/// Checks a frame against its own header and the device's declared formats before the
/// coordinator trusts any of it ("cheap or nasty": bad frames are dropped and counted).
public enum FrameValidation {
    /// Largest width or height accepted (16K); anything more is a forged header.
    public static let maxDimension: UInt32 = 16384

    public static func check(
        header: Capfleet_V1_FrameHeader, payloadBytes: Int, maxPayloadBytes: Int
    ) -> InputRejection? {
        guard header.protocolVersion == .current else { return .incompatibleVersion }
        if header.payloadSize > UInt64(maxPayloadBytes) { return .oversizedClaim }
        guard header.payloadSize == UInt64(payloadBytes) else { return .payloadSizeMismatch }
        if header.hasAudio { return checkAudio(header.audio, encoded: header.hasEncoded, payloadBytes: payloadBytes) }
        let layout = header.layout
        guard layout.width > 0, layout.height > 0, layout.width <= maxDimension, layout.height <= maxDimension,
            !layout.pixelFormat.isEmpty
        else { return .invalidFormat }
        let format = PixelFormat(layout.pixelFormat)
        let width = Int(layout.width), height = Int(layout.height)
        if let exact = format.frameByteCount(width: width, height: height) {
            guard payloadBytes == exact else { return .formatSizeMismatch }
        } else if payloadBytes == 0 || payloadBytes > format.maximumPayloadBytes(width: width, height: height) {
            return .formatSizeMismatch
        }
        return nil
    }

    /// A microphone's block (frames.md, "Microphones on the live path"): a format the fleet
    /// reads, at most a second of it, and exactly that many interleaved samples.
    /// `encoded`: a take's FLAC packet (microphones.md, "In takes"), at most the raw size and a
    /// frame header's worth more.
    static func checkAudio(_ block: Capfleet_V1_AudioBlock, encoded: Bool, payloadBytes: Int) -> InputRejection? {
        guard let format = AudioFormat(wire: block.format), format.sampleRate <= 768_000, format.channels <= 64,
            block.frames > 0, block.frames <= UInt32(format.sampleRate)
        else { return .invalidFormat }
        let bytesPerSample = format.sampleFormat == .s16le ? 2 : 4
        let raw = Int(block.frames) * format.channels * bytesPerSample
        if encoded { return payloadBytes > 0 && payloadBytes <= raw + 1024 ? nil : .formatSizeMismatch }
        return payloadBytes == raw ? nil : .formatSizeMismatch
    }
}
