import CZbar
import FleetCore

/// Finds codes in grey pictures with ZBar: only the symbologies asked for, only inside the
/// region, each with its decoded text and its corners in normalised frame coordinates. One
/// scanner belongs to one thread (ZBar's scanner keeps state between images).
public final class BarcodeScanner {
    private let scanner: OpaquePointer
    public let symbologies: [BarcodeSymbology]

    public init(symbologies: [BarcodeSymbology]) throws(DetectionError) {
        guard let scanner = zbar_image_scanner_create() else { throw .cannotCreate("a ZBar image scanner") }
        self.scanner = scanner
        self.symbologies = symbologies
        // Everything off, then what was asked for on.
        zbar_image_scanner_set_config(scanner, ZBAR_NONE, ZBAR_CFG_ENABLE, 0)
        for symbology in symbologies {
            zbar_image_scanner_set_config(scanner, Self.zbarType(symbology), ZBAR_CFG_ENABLE, 1)
        }
        // A QR code's position is only known with its corners: ZBar reports them always.
    }

    deinit { zbar_image_scanner_destroy(scanner) }

    static func zbarType(_ symbology: BarcodeSymbology) -> zbar_symbol_type_t {
        switch symbology {
        case .qr: ZBAR_QRCODE
        case .ean8: ZBAR_EAN8
        case .ean13: ZBAR_EAN13
        case .upca: ZBAR_UPCA
        case .upce: ZBAR_UPCE
        case .code39: ZBAR_CODE39
        case .code93: ZBAR_CODE93
        case .code128: ZBAR_CODE128
        case .i25: ZBAR_I25
        case .codabar: ZBAR_CODABAR
        case .databar: ZBAR_DATABAR
        case .pdf417: ZBAR_PDF417
        }
    }

    static func symbology(of type: zbar_symbol_type_t) -> BarcodeSymbology? {
        BarcodeSymbology.allCases.first { zbarType($0) == type }
    }

    /// The codes inside `region` of `image`.
    public func scan(_ image: GreyImage, region: NormalizedRect = .whole) throws(DetectionError) -> [DetectedCode] {
        guard !symbologies.isEmpty else { return [] }
        let area = region.pixels(width: image.width, height: image.height)
        let searched = area == (0, 0, image.width, image.height) ? image : image.cropped(x: area.x, y: area.y, width: area.width, height: area.height)
        guard let zimage = zbar_image_create() else { throw .cannotCreate("a ZBar image") }
        defer { zbar_image_destroy(zimage) }
        zbar_image_set_format(zimage, capfleet_zbar_y800)
        zbar_image_set_size(zimage, UInt32(searched.width), UInt32(searched.height))
        let scanned = searched.pixels.withUnsafeBytes { bytes -> Result<[DetectedCode], DetectionError> in
            // No cleanup handler: the pixels stay ours and outlive the image.
            zbar_image_set_data(zimage, bytes.baseAddress, UInt(bytes.count), nil)
            let found = zbar_scan_image(scanner, zimage)
            guard found >= 0 else { return .failure(.scanFailed("zbar_scan_image returned \(found)")) }
            var codes: [DetectedCode] = []
            var symbol = zbar_image_first_symbol(zimage)
            while let current = symbol {
                defer { symbol = zbar_symbol_next(current) }
                guard let symbology = Self.symbology(of: zbar_symbol_get_type(current)) else { continue }
                let length = Int(zbar_symbol_get_data_length(current))
                let data =
                    zbar_symbol_get_data(current).map { pointer in
                        String(decoding: UnsafeRawBufferPointer(start: pointer, count: length), as: UTF8.self)
                    } ?? ""
                var corners: [NormalizedPoint] = []
                for index in 0..<zbar_symbol_get_loc_size(current) {
                    let x = Double(zbar_symbol_get_loc_x(current, index) + Int32(area.x)) / Double(image.width)
                    let y = Double(zbar_symbol_get_loc_y(current, index) + Int32(area.y)) / Double(image.height)
                    corners.append(NormalizedPoint(x: x, y: y))
                }
                codes.append(DetectedCode(symbology: symbology, value: data, corners: corners))
            }
            return .success(codes)
        }
        return try scanned.get()
    }
}

/// Why a detector could not run, for the agent's log and the operator.
public enum DetectionError: Error, Sendable, Equatable, CustomStringConvertible {
    case cannotCreate(String)
    case scanFailed(String)
    case cannotLoadCascade(path: String)
    /// Framing with the camera's optics asked of a camera without them.
    case opticsUnavailable(device: String, reason: String)

    public var description: String {
        switch self {
        case let .cannotCreate(what): "cannot create \(what): out of memory?"
        case let .scanFailed(why): "detection failed: \(why)"
        case let .cannotLoadCascade(path):
            "cannot load the face detector's cascade \(path): install Debian's opencv-data, which has it"
        case let .opticsUnavailable(device, reason):
            "device \(device) cannot frame with its own optics: \(reason); frame with the crop instead (without --optics)"
        }
    }
}
