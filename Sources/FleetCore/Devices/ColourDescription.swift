/// How a format's samples map to light, as its source declares it (frames.md, "Colour and
/// depth"): primaries, transfer function, matrix and range, each an ITU-T H.273 code point,
/// which is what HEVC's VUI, Matroska's Colour element and FFmpeg carry, so the description
/// travels from the camera to an exported file without translation.
public struct ColourDescription: Hashable, Sendable, CustomStringConvertible {
    public enum Primaries: String, Sendable, CaseIterable {
        case bt601, bt709, bt2020
        public var h273Code: Int {
            switch self {
            case .bt709: 1
            case .bt601: 6
            case .bt2020: 9
            }
        }
    }

    public enum Transfer: String, Sendable, CaseIterable {
        /// SDR video gamma (BT.709 and BT.601 share it).
        case bt709
        case linear, srgb
        /// SMPTE ST 2084 (HDR10).
        case pq
        /// Hybrid log-gamma (ARIB STD-B67).
        case hlg
        public var h273Code: Int {
            switch self {
            case .bt709: 1
            case .linear: 8
            case .srgb: 13
            case .pq: 16
            case .hlg: 18
            }
        }
        /// What people call it: SDR, HLG, PQ.
        public var dynamicRange: String {
            switch self {
            case .pq: "PQ"
            case .hlg: "HLG"
            default: "SDR"
            }
        }
    }

    public enum Matrix: String, Sendable, CaseIterable {
        case bt601, bt709, bt2020
        public var h273Code: Int {
            switch self {
            case .bt709: 1
            case .bt601: 6
            case .bt2020: 9
            }
        }
    }

    public enum Range: String, Sendable, CaseIterable {
        /// Video range: 8-bit luma 16–235, scaled by 2^(depth−8) for deeper samples.
        case limited
        case full
    }

    public var primaries: Primaries
    public var transfer: Transfer
    public var matrix: Matrix
    public var range: Range

    public init(primaries: Primaries, transfer: Transfer, matrix: Matrix, range: Range) {
        self.primaries = primaries
        self.transfer = transfer
        self.matrix = matrix
        self.range = range
    }

    /// Standard-definition webcams (what UVC cameras declare): BT.601, SDR, video range.
    public static let bt601 = ColourDescription(primaries: .bt601, transfer: .bt709, matrix: .bt601, range: .limited)
    /// HDTV: BT.709, SDR, video range.
    public static let bt709 = ColourDescription(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .limited)
    /// HDR broadcast: BT.2020 with hybrid log-gamma, video range.
    public static let bt2020HLG = ColourDescription(primaries: .bt2020, transfer: .hlg, matrix: .bt2020, range: .limited)
    /// HDR10: BT.2020 with PQ, video range.
    public static let bt2020PQ = ColourDescription(primaries: .bt2020, transfer: .pq, matrix: .bt2020, range: .limited)

    /// `bt2020/hlg/bt2020/limited`: primaries, transfer, matrix, range (the index's column,
    /// `formats --json`).
    public var description: String { "\(primaries.rawValue)/\(transfer.rawValue)/\(matrix.rawValue)/\(range.rawValue)" }

    /// What a table shows: `BT.2020 HLG limited`.
    public var label: String {
        let primariesName =
            switch primaries {
            case .bt601: "BT.601"
            case .bt709: "BT.709"
            case .bt2020: "BT.2020"
            }
        return "\(primariesName) \(transfer.dynamicRange) \(range.rawValue)"
    }

    /// Parses `description`'s form; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: "/").map(String.init)
        guard parts.count == 4, let primaries = Primaries(rawValue: parts[0]), let transfer = Transfer(rawValue: parts[1]),
            let matrix = Matrix(rawValue: parts[2]), let range = Range(rawValue: parts[3])
        else { return nil }
        self.init(primaries: primaries, transfer: transfer, matrix: matrix, range: range)
    }
}
