import FleetCore

/// A picture a person can look at: 8-bit RGB, rows top to bottom without padding. What every
/// frame becomes before it is encoded (JPEG, PNG) or laid out on a contact sheet.
public struct RGBImage: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// width × height × 3 bytes: R, G, B.
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(
            width > 0 && height > 0 && pixels.count == width * height * 3, "an RGB image of \(width)x\(height) holds \(width * height * 3) bytes")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// An image of one colour.
    public init(width: Int, height: Int, filledWith colour: RGB) {
        precondition(width > 0 && height > 0)
        self.width = width
        self.height = height
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        if colour != .black {
            for index in stride(from: 0, to: pixels.count, by: 3) {
                pixels[index] = colour.red
                pixels[index + 1] = colour.green
                pixels[index + 2] = colour.blue
            }
        }
        self.pixels = pixels
    }

    public subscript(x: Int, y: Int) -> RGB {
        let index = (y * width + x) * 3
        return RGB(pixels[index], pixels[index + 1], pixels[index + 2])
    }

    /// The outline of `rect` (normalised to the image), `thickness` pixels wide inside its edge:
    /// a preview's auto-framing crop drawn over the whole picture.
    public mutating func outline(_ rect: NormalizedRect, with colour: RGB, thickness: Int = 2) {
        let x0 = Int((rect.x * Double(width)).rounded()), y0 = Int((rect.y * Double(height)).rounded())
        let x1 = Int(((rect.x + rect.width) * Double(width)).rounded()), y1 = Int(((rect.y + rect.height) * Double(height)).rounded())
        guard x1 > x0, y1 > y0 else { return }
        fill(x: x0, y: y0, width: x1 - x0, height: thickness, with: colour)
        fill(x: x0, y: y1 - thickness, width: x1 - x0, height: thickness, with: colour)
        fill(x: x0, y: y0, width: thickness, height: y1 - y0, with: colour)
        fill(x: x1 - thickness, y: y0, width: thickness, height: y1 - y0, with: colour)
    }

    /// Fills a rectangle, clipped to the image.
    public mutating func fill(x: Int, y: Int, width w: Int, height h: Int, with colour: RGB) {
        let x0 = max(x, 0), y0 = max(y, 0), x1 = min(x + w, width), y1 = min(y + h, height)
        guard x0 < x1, y0 < y1 else { return }
        pixels.withUnsafeMutableBufferPointer { buffer in
            for row in y0..<y1 {
                var index = (row * width + x0) * 3
                for _ in x0..<x1 {
                    buffer[index] = colour.red
                    buffer[index + 1] = colour.green
                    buffer[index + 2] = colour.blue
                    index += 3
                }
            }
        }
    }

    /// Copies `image` in with its top left corner at (x, y), clipped to this image.
    public mutating func draw(_ image: RGBImage, x: Int, y: Int) {
        let x0 = max(x, 0), y0 = max(y, 0), x1 = min(x + image.width, width), y1 = min(y + image.height, height)
        guard x0 < x1, y0 < y1 else { return }
        let rowBytes = (x1 - x0) * 3
        pixels.withUnsafeMutableBufferPointer { target in
            image.pixels.withUnsafeBufferPointer { source in
                for row in y0..<y1 {
                    let from = ((row - y) * image.width + (x0 - x)) * 3
                    let to = (row * width + x0) * 3
                    (target.baseAddress! + to).update(from: source.baseAddress! + from, count: rowBytes)
                }
            }
        }
    }
}

/// One RGB colour.
public struct RGB: Sendable, Equatable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8

    public init(_ red: UInt8, _ green: UInt8, _ blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    public static let black = RGB(0, 0, 0)
    public static let white = RGB(255, 255, 255)

    /// The largest difference of one channel: how far apart two colours are, for tolerances.
    public func distance(to other: RGB) -> Int {
        max(abs(Int(red) - Int(other.red)), abs(Int(green) - Int(other.green)), abs(Int(blue) - Int(other.blue)))
    }

    public var description: String { "rgb(\(red), \(green), \(blue))" }
}
