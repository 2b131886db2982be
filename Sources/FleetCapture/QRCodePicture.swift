import CQREncode
import FleetCore

/// A QR code as a grey picture (libqrencode), black modules on white with the quiet zone
/// the standard asks for: what the synthetic camera draws into its pattern for code
/// detection to find.
public enum QRCodePicture {
    /// `text` encoded at error correction level M, each module `moduleSize` pixels.
    public static func make(_ text: String, moduleSize: Int = 4) -> GreyImage? {
        guard moduleSize > 0, let code = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else { return nil }
        defer { QRcode_free(code) }
        let modules = Int(code.pointee.width), quiet = 4
        let side = (modules + 2 * quiet) * moduleSize
        var pixels = [UInt8](repeating: 255, count: side * side)
        for row in 0..<modules {
            for column in 0..<modules where code.pointee.data[row * modules + column] & 1 == 1 {
                for dy in 0..<moduleSize {
                    let start = ((row + quiet) * moduleSize + dy) * side + (column + quiet) * moduleSize
                    for dx in 0..<moduleSize { pixels[start + dx] = 0 }
                }
            }
        }
        return GreyImage(width: side, height: side, pixels: pixels)
    }
}
