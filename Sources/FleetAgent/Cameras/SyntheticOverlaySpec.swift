import FleetCapture
import FleetCore
import FleetImaging
import FleetSystem
import Foundation

/// `--synthetic-overlay`: what a synthetic camera draws into its picture, so that code and face
/// detection can be tried without a camera pointed at them:
/// `qr:TEXT@X,Y,W` (a QR code of TEXT), `image:FILE.png|FILE.jpg@X,Y,W` (a photograph, in grey)
/// or `timecode@X,Y,W` (a QR code of each frame's true start of exposure, in this machine's
/// CLOCK_MONOTONIC, for exposure audits: proto-docs/clock.md, "Auditing exposures") or
/// `flash@X,Y,W` (a patch lit on the frame nearest every whole second of fleet time, for sound
/// against picture: proto-docs/microphones.md), its top-left corner at X,Y and W wide, as
/// fractions of the frame. A picture given `@X,Y,W,X2,FRAMES` glides from X to X2 in FRAMES
/// frames and back, over and over (a face walking to and fro, for auto-framing).
public enum SyntheticOverlaySpec {
    public static func parse(_ text: String) throws(SyntheticOverlayError) -> SyntheticOverlay {
        guard let at = text.lastIndex(of: "@") else { throw .malformed(text) }
        let what = String(text[..<at])
        let numbers = text[text.index(after: at)...].split(separator: ",").compactMap { Double($0) }
        guard numbers.count == 3 || numbers.count == 5, (0..<1).contains(numbers[0]), (0..<1).contains(numbers[1]), numbers[2] > 0,
            numbers[2] <= 1
        else {
            throw .malformed(text)
        }
        var travel: (toX: Double, frames: Int)?
        if numbers.count == 5 {
            guard (0..<1).contains(numbers[3]), numbers[4] >= 1, numbers[4] <= 100_000, numbers[4] == numbers[4].rounded() else {
                throw .malformed(text)
            }
            travel = (numbers[3], Int(numbers[4]))
        }
        let origin = NormalizedPoint(x: numbers[0], y: numbers[1])
        if what == "flash" { return SyntheticOverlay(flashAt: origin, width: numbers[2]) }
        if what == "timecode" {
            do {
                return SyntheticOverlay(timecodeOf: try HostBootID.read(), origin: origin, width: numbers[2])
            } catch {
                throw .unusable(text, reason: "a timecode names this machine's clock by its boot id, and \(error)")
            }
        }
        let picture: GreyImage
        if what.hasPrefix("qr:") {
            let content = String(what.dropFirst(3))
            guard !content.isEmpty, let code = QRCodePicture.make(content) else {
                throw .unusable(text, reason: "libqrencode cannot encode that text")
            }
            picture = code
        } else if what.hasPrefix("image:") {
            picture = try image(String(what.dropFirst(6)), spec: text)
        } else {
            throw .malformed(text)
        }
        var overlay = SyntheticOverlay(image: picture, origin: origin, width: numbers[2])
        overlay.travel = travel
        return overlay
    }

    /// A PNG or JPEG file as grey (BT.601 luma).
    static func image(_ path: String, spec: String) throws(SyntheticOverlayError) -> GreyImage {
        guard let data = FileManager.default.contents(atPath: path) else { throw .unusable(spec, reason: "cannot read \(path)") }
        let picture: RGBImage
        do {
            let bytes = [UInt8](data)
            picture = path.lowercased().hasSuffix(".png") ? try PNGDecoder.decode(bytes) : try JPEGDecoder().decode(bytes)
        } catch {
            throw .unusable(spec, reason: "\(path) is not a picture the fleet reads (PNG or JPEG): \(error)")
        }
        var grey = [UInt8](repeating: 0, count: picture.width * picture.height)
        for index in grey.indices {
            let r = Int(picture.pixels[index * 3]), g = Int(picture.pixels[index * 3 + 1]), b = Int(picture.pixels[index * 3 + 2])
            grey[index] = UInt8((r * 77 + g * 150 + b * 29) >> 8)
        }
        return GreyImage(width: picture.width, height: picture.height, pixels: grey)
    }
}

public enum SyntheticOverlayError: Error, Sendable, CustomStringConvertible {
    case malformed(String)
    case unusable(String, reason: String)

    public var description: String {
        switch self {
        case let .malformed(text):
            "cannot read the synthetic overlay \(text): write qr:TEXT@X,Y,W, image:FILE.png@X,Y,W, timecode@X,Y,W or flash@X,Y,W, the position and width as fractions of the frame (e.g. qr:hello@0.6,0.1,0.25); a picture given @X,Y,W,X2,FRAMES glides to X2 and back, FRAMES frames each way"
        case let .unusable(text, reason):
            "cannot use the synthetic overlay \(text): \(reason)"
        }
    }
}
