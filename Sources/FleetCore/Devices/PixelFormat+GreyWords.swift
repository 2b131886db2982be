/// Grey deeper than 8 bits, one sample per 16-bit little-endian word, as V4L2 defines them:
/// Y10 and Y12 keep their samples in the low bits of the word, Y16 uses all sixteen (a 12-bit
/// sensor sending Y16 puts its samples in the high bits, as stills cameras do).
extension PixelFormat {
    public static let y16 = PixelFormat("Y16")
    public static let y12 = PixelFormat("Y12")
    public static let y10 = PixelFormat("Y10")

    /// How many low bits of each 16-bit word may be set, for the grey formats above; nil for
    /// every other format.
    public var greyWordBits: Int? {
        switch fourCC {
        case "Y16": 16
        case "Y12": 12
        case "Y10": 10
        default: nil
        }
    }
}
