import ArgumentParser
import FleetClient
import FleetCore
import FleetImaging
import FleetProtocol
import Foundation

/// What `snapshot -o` and `contact-sheet -o` write, by the file's extension.
enum PictureFile: String {
    case jpeg, png, raw

    /// `.jpg`/`.jpeg`, `.png`, `.raw` (or any file with `--raw`).
    static func kind(of path: String, raw: Bool, allowRaw: Bool = true) throws -> PictureFile {
        if raw && allowRaw { return .raw }
        switch (path as NSString).pathExtension.lowercased() {
        case "jpg", "jpeg": return .jpeg
        case "png": return .png
        case "raw" where allowRaw: return .raw
        default:
            throw CLIFailure(
                "cannot tell what to write to \(path) from its extension: name it .jpg or .png"
                    + (allowRaw ? ", or .raw (or add --raw) for the frame's bytes as they came" : ""))
        }
    }

    static func write(_ bytes: [UInt8], to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
            throw CLIFailure("cannot write \(path): check the directory exists and is writable")
        }
    }

    /// The encoded picture of `image`.
    func encode(_ image: RGBImage, quality: Int) throws -> [UInt8] {
        do {
            switch self {
            case .jpeg: return try JPEGEncoder().encode(image, quality: quality)
            case .png, .raw: return try PNGEncoder.encode(image)
            }
        } catch {
            throw CLIFailure(error.description)
        }
    }
}

/// A frame the coordinator sent, written as a picture a person can open: every pixel,
/// converted from the frame's format to RGB, then JPEG or PNG; or its bytes as they came.
enum SnapshotPicture {
    static func write(header: Capfleet_V1_FrameHeader, payload: [UInt8], to path: String, as kind: PictureFile, quality: Int) throws {
        let format = PixelFormat(header.layout.pixelFormat)
        // A JPEG (an MJPEG camera's frame, a preview) is a JPEG file as it is: no second loss.
        if kind == .raw || (kind == .jpeg && format.isJPEG) {
            try PictureFile.write(payload, to: path)
            return
        }
        let picture: RGBImage
        do {
            picture = try payload.withUnsafeBytes { bytes in
                Result { () throws(ImagingError) in
                    try FrameRenderer().picture(
                        of: RawFrame(
                            bytes: bytes, pixelFormat: format, width: Int(header.layout.width),
                            height: Int(header.layout.height)))
                }
            }.get()
        } catch {
            throw CLIFailure("cannot write device \(header.deviceID)'s frame to \(path): \(error)")
        }
        try PictureFile.write(try kind.encode(picture, quality: quality), to: path)
    }
}

struct ContactSheetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contact-sheet",
        abstract: "Every camera's latest preview on one picture, in a grid, each labelled with its device, node, state, consent and frame rate.",
        discussion:
            "Previews are what each agent sends once a second (agent settings preview_*); nothing asks the cameras for a frame. A camera without a preview gets an empty tile."
    )
    @OptionGroup var coordinator: CoordinatorOptions
    @Option(name: .shortAndLong, help: "The picture to write: .png or .jpg.") var output = "contact-sheet.png"
    @Option(help: "Only the cameras of this node.", completion: FleetCompletion.nodeIDs) var node: String?
    @Option(help: "Tiles per row (default: about the square root of the number of cameras, at most 8).") var columns: Int?
    @Option(help: "JPEG quality, 1 to 100, for a .jpg sheet.") var quality = 90
    @Flag(help: "Print JSON: the picture's size, its grid and where each camera's tile is.") var json = false

    func validate() throws {
        if let columns, columns < 1 { throw ValidationError("--columns must be at least 1") }
        _ = try PictureFile.kind(of: output, raw: false, allowRaw: false)
    }

    func run() throws {
        let kind = try PictureFile.kind(of: output, raw: false, allowRaw: false)
        let session = try coordinator.session()
        let devices = try session.call(.listDevices(.with { $0.nodeID = node ?? "" })).reply.devices
            .sorted { ($0.nodeID, $0.deviceID) < ($1.nodeID, $1.deviceID) }
        let nodes = Dictionary(try session.call(.listNodes(.init())).reply.nodes.map { ($0.nodeID, $0) }, uniquingKeysWith: { a, _ in a })
        let previews = Dictionary(
            try session.call(.listPreviews(.with { $0.nodeID = node ?? "" })).reply.previews
                .map { ($0.header.deviceID, $0) }, uniquingKeysWith: { a, _ in a })
        let decoder: JPEGDecoder
        do { decoder = try JPEGDecoder() } catch { throw CLIFailure(error.description) }
        var undecodable: [String] = []
        let tiles = devices.map { device -> ContactSheet.Tile in
            let preview = previews[device.deviceID]
            var picture: RGBImage?
            if let preview {
                do { picture = try decoder.decode([UInt8](preview.jpeg)) } catch { undecodable.append("\(device.deviceID): \(error)") }
            }
            return Self.tile(device, node: nodes[device.nodeID], preview: preview, picture: picture)
        }
        let sheet = ContactSheet(tiles: tiles, columns: columns)
        try PictureFile.write(try kind.encode(sheet.render(), quality: quality), to: output)
        for problem in undecodable { FileHandle.standardError.write(Data("a preview does not decode, its tile is empty: \(problem)\n".utf8)) }
        if json {
            struct Tile: Encodable {
                var deviceId, nodeId: String
                var x, y: Int
                var previewAgeMs: UInt64?
                var previewWidth, previewHeight: UInt32?

                enum CodingKeys: String, CodingKey {
                    case deviceId = "device_id", nodeId = "node_id", x, y, previewAgeMs = "preview_age_ms",
                        previewWidth = "preview_width", previewHeight = "preview_height"
                }
            }
            struct View: Encodable {
                var output: String
                var width, height, columns, rows, tileWidth, tileHeight, pictureHeight: Int
                var tiles: [Tile]

                enum CodingKeys: String, CodingKey {
                    case output, width, height, columns, rows, tileWidth = "tile_width", tileHeight = "tile_height",
                        pictureHeight = "picture_height", tiles
                }
            }
            let layout = sheet.layout
            print(
                try FleetTables.json(
                    View(
                        output: output, width: layout.width, height: layout.height, columns: layout.columns, rows: layout.rows,
                        tileWidth: layout.tileWidth, tileHeight: layout.tileHeight, pictureHeight: layout.pictureHeight,
                        tiles: devices.enumerated().map { index, device in
                            let (x, y) = layout.origin(ofTile: index)
                            let preview = previews[device.deviceID]
                            return Tile(
                                deviceId: device.deviceID, nodeId: device.nodeID, x: x, y: y, previewAgeMs: preview?.ageMs,
                                previewWidth: preview?.header.layout.width, previewHeight: preview?.header.layout.height)
                        })))
        } else {
            print(
                "\(devices.count) camera(s), \(previews.count) with a preview, \(sheet.layout.columns)x\(sheet.layout.rows) tiles, "
                    + "\(sheet.layout.width)x\(sheet.layout.height) → \(output)")
        }
    }

    /// Device id; node and the preview's age; state, consent and the camera's frame rate, in
    /// green when it streams real frames, amber without consent, red when it does not stream.
    static func tile(
        _ device: Capfleet_V1_DeviceInfo, node: Capfleet_V1_NodeInfo?, preview: Capfleet_V1_DevicePreview?,
        picture: RGBImage?
    ) -> ContactSheet.Tile {
        let state = !device.online ? "offline" : device.interruption.reason != .none ? "interrupted" : "online"
        let consent = (ConsentState(wire: device.consent) ?? .notDetermined).rawValue
        let nodeName = node.map { $0.name.isEmpty ? $0.nodeID : "\($0.name) (\($0.nodeID))" } ?? device.nodeID
        let age = preview.map { String(format: "preview %.1f s old", Double($0.ageMs) / 1000) } ?? "no preview"
        let colour: RGB = state != "online" ? RGB(240, 80, 80) : consent != "authorized" ? RGB(240, 180, 40) : RGB(90, 220, 120)
        return ContactSheet.Tile(
            title: device.deviceID,
            lines: ["node \(nodeName)", age, "\(state), \(consent), \(String(format: "%.1f", device.activeFrameRate)) fps"],
            statusColour: colour, picture: picture)
    }
}
