import CFaceDetect
import FleetCore
import Glibc

/// Finds faces in grey pictures with OpenCV's cascade detector (Debian's opencv-data ships
/// the cascades): boxes in normalised frame coordinates, largest first, at most `maximum`.
/// One detector belongs to one thread.
public final class FaceDetector {
    /// Debian's frontal-face Haar cascade.
    public static let defaultCascade = "/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml"

    private let detector: OpaquePointer
    public let maximum: Int

    public init(cascade: String = FaceDetector.defaultCascade, maximum: Int = 10) throws(DetectionError) {
        guard let detector = cf_face_detector_create(cascade) else { throw .cannotLoadCascade(path: cascade) }
        self.detector = detector
        self.maximum = maximum
    }

    deinit { cf_face_detector_destroy(detector) }

    /// Why a detector could not be made from `cascade`, found without parsing it (a cascade
    /// takes seconds to load on a slow host: too long to answer a command with): nil when the
    /// file is there to read.
    public static func cascadeProblem(at cascade: String = FaceDetector.defaultCascade) -> DetectionError? {
        access(cascade, R_OK) == 0 ? nil : .cannotLoadCascade(path: cascade)
    }

    /// The faces inside `region` of `image`, at least `minimumShare` of the searched width wide.
    public func detect(_ image: GreyImage, region: NormalizedRect = .whole, minimumShare: Double = 0.04) throws(DetectionError) -> [NormalizedRect] {
        let area = region.pixels(width: image.width, height: image.height)
        let searched = area == (0, 0, image.width, image.height) ? image : image.cropped(x: area.x, y: area.y, width: area.width, height: area.height)
        var boxes = [cf_face_box](repeating: cf_face_box(), count: maximum)
        let minimum = Int32(max(20, Double(searched.width) * minimumShare))
        let count = searched.pixels.withUnsafeBufferPointer { pixels in
            cf_face_detect(
                detector, pixels.baseAddress, Int32(searched.width), Int32(searched.height), Int32(searched.width), minimum,
                &boxes, Int32(maximum))
        }
        guard count >= 0 else { throw .scanFailed("OpenCV's face detector failed on a \(searched.width)x\(searched.height) picture") }
        return boxes.prefix(Int(count)).map { box in
            NormalizedRect(
                x: Double(Int(box.x) + area.x) / Double(image.width), y: Double(Int(box.y) + area.y) / Double(image.height),
                width: Double(box.width) / Double(image.width), height: Double(box.height) / Double(image.height))
        }
    }
}
