/// Samples deeper than 8 bits, one per 16-bit little-endian word, as V4L2 defines them:
/// grey Y10 and Y12 keep their samples in the low bits of the word, Y16 uses all sixteen (a
/// 12-bit sensor sending Y16 puts its samples in the high bits, as stills cameras do); depth
/// Z16 is one distance per word, in the format's unit; 4:2:0 P010 and P016 are NV12 in words,
/// P010's ten bits at the top of each.
extension PixelFormat {
    public static let y16 = PixelFormat("Y16")
    public static let y12 = PixelFormat("Y12")
    public static let y10 = PixelFormat("Y10")
    public static let z16 = PixelFormat("Z16")
    public static let p010 = PixelFormat("P010")
    public static let p016 = PixelFormat("P016")

    /// How many low bits of each 16-bit word may be set, for the one-channel formats above
    /// (grey and depth); nil for every other format.
    public var greyWordBits: Int? {
        switch fourCC {
        case "Y16", "Z16": 16
        case "Y12": 12
        case "Y10": 10
        default: nil
        }
    }

    /// The 4:2:0 formats in words (P010, P016): a plane of luma words, then interleaved
    /// Cb Cr words at half size; the value of their top `bits` bits is the sample.
    public var semiPlanarWordBits: Int? {
        switch fourCC {
        case "P010": 10
        case "P016": 16
        default: nil
        }
    }

    /// Whether each sample is a 16-bit word (every format above).
    public var hasWordSamples: Bool { greyWordBits != nil || semiPlanarWordBits != nil }

    /// The significant bits a sample of this format has by its definition: what a V4L2
    /// camera's format list says (a driver that packs fewer bits in Y16 cannot tell us).
    public var nominalBitDepth: Int {
        switch fourCC {
        case "Y10", "P010", "BG10", "GB10", "BA10", "RG10": 10
        case "Y12", "BG12", "GB12", "BA12", "RG12": 12
        case "Y16", "Z16", "P016", "BYR2", "GB16", "GR16", "RG16", "Y16-BE": 16
        default: 8
        }
    }

    /// Raw Bayer mosaics, as V4L2 names them: which colour the top-left 2x2 cell's samples are
    /// (row by row: "BGGR", "GBRG", "GRBG", "RGGB") and the bits of each, 8 a byte or 10, 12
    /// or 16 in the low bits of a 16-bit little-endian word; nil for every other format.
    public var bayer: (pattern: String, bits: Int)? {
        switch fourCC {
        case "BA81": ("BGGR", 8)
        case "GBRG": ("GBRG", 8)
        case "GRBG": ("GRBG", 8)
        case "RGGB": ("RGGB", 8)
        case "BG10": ("BGGR", 10)
        case "GB10": ("GBRG", 10)
        case "BA10": ("GRBG", 10)
        case "RG10": ("RGGB", 10)
        case "BG12": ("BGGR", 12)
        case "GB12": ("GBRG", 12)
        case "BA12": ("GRBG", 12)
        case "RG12": ("RGGB", 12)
        case "BYR2": ("BGGR", 16)
        case "GB16": ("GBRG", 16)
        case "GR16": ("GRBG", 16)
        case "RG16": ("RGGB", 16)
        default: nil
        }
    }

    /// A depth format: samples are distances (`VideoFormat.depthUnitMetres` each), not light.
    public var isDepth: Bool { fourCC == "Z16" }
}
