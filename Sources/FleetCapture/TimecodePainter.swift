import CQREncode
import FleetCore

/// Draws a timecode into frames: a QR code whose text is `ExposureTimecode.hostMonotonic` of
/// the frame's own start of exposure, black modules on white with the standard's quiet zone,
/// each module a whole number of pixels (a code's modules stay sharp). Made for hundreds of
/// cameras: one code a frame, its text written into a buffer kept from frame to frame, the
/// code drawn straight into the frame's luma a line at a time from one line kept likewise.
struct TimecodePainter {
    /// Where the code goes, in pixels; its side is at most `width`.
    let x: Int
    let y: Int
    let width: Int
    /// "CFTC1 M <boot-id> ", then the nanoseconds' digits, rewritten every frame.
    private var text: [UInt8]
    private let prefixCount: Int
    /// One line of the code's pixels, kept from frame to frame.
    private var row: [UInt8] = []

    /// Version 5 at level M holds 84 bytes, more than a timecode's 65 at most: every frame's
    /// code has the same size, so it lands on the same pixels.
    static let version: Int32 = 5
    static let quietModules = 4

    init(bootID: String, x: Int, y: Int, width: Int) {
        self.x = x
        self.y = y
        self.width = width
        text = Array(ExposureTimecode.hostMonotonic(bootID: bootID, nanoseconds: 0).text.utf8.dropLast())
        prefixCount = text.count
        text.reserveCapacity(prefixCount + 20)
    }

    /// The text of the code for `exposureStart`, as it goes to the encoder.
    mutating func text(for exposureStart: UInt64) -> [UInt8] {
        text.removeSubrange(prefixCount...)
        var value = exposureStart
        repeat {
            text.append(UInt8(ascii: "0") + UInt8(value % 10))
            value /= 10
        } while value > 0
        text[prefixCount...].reverse()
        return text
    }

    /// Draws the code for `exposureStart` into `luma`, clipped to the frame. A text the encoder
    /// refuses (it never should) leaves the frame without a code: the audit then counts a frame
    /// without a timecode rather than read a wrong one.
    mutating func paint(_ exposureStart: UInt64, into luma: LumaPlane) {
        let encoded = text(for: exposureStart).withUnsafeBufferPointer { bytes in
            QRcode_encodeData(Int32(bytes.count), bytes.baseAddress, Self.version, QR_ECLEVEL_M)
        }
        guard let code = encoded else { return }
        defer { QRcode_free(code) }
        let modules = Int(code.pointee.width)
        let side = modules + 2 * Self.quietModules
        let moduleSize = max(1, width / side)
        let data = code.pointee.data!
        // One row of pixels per row of modules, written `moduleSize` times: a copy per line.
        if row.count != side * moduleSize { row = [UInt8](repeating: 255, count: side * moduleSize) }
        for moduleRow in 0..<side {
            let codeRow = moduleRow - Self.quietModules
            for moduleColumn in 0..<side {
                let codeColumn = moduleColumn - Self.quietModules
                let dark =
                    (0..<modules).contains(codeRow) && (0..<modules).contains(codeColumn) && data[codeRow * modules + codeColumn] & 1 == 1
                let start = moduleColumn * moduleSize
                for pixel in start..<start + moduleSize { row[pixel] = dark ? 0 : 255 }
            }
            row.withUnsafeBufferPointer { pixels in
                for line in 0..<moduleSize { luma.write(row: pixels, x: x, y: y + moduleRow * moduleSize + line) }
            }
        }
    }
}
