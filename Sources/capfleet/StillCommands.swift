import ArgumentParser
import FleetClient
import FleetCore
import FleetImaging
import FleetProtocol
import Foundation

/// `capfleet still`: one picture from every camera named, all at one fleet instant.
struct StillCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "still",
        abstract: "Every camera named (or --all), one picture, the same fleet instant, full resolution.",
        discussion: """
            Each camera delivers the frame it captured nearest the instant (cameras aligned to the fleet-time \
            grid: the same grid instant). A camera streaming a smaller format switches to its still format, \
            captures and switches back; the sidecar says how long it was away. A bracket sets the exposure of \
            each picture in turn (exposure time x 2^EV, automatic exposure off) and restores it. Pictures are \
            written on the cameras' hosts, copied to the coordinator (capfleet stills), and with -o into a \
            directory here: DEVICE-N.png (or .jpg) and DEVICE-N.json, the sidecar.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The cameras.", completion: FleetCompletion.deviceIDs) var devices: [String] = []
    @Flag(help: "Every online camera.") var all = false
    @Option(help: "When: +1.5s from now (default: one second from now), fleet nanoseconds, or an ISO 8601 date.") var at: String?
    @Option(help: "max (each camera's largest format, the default), WxH, or streaming (each camera's active format: nothing switches).")
    var size = "max"
    @Option(help: "The still format's FourCC where the size has several (default: the streaming format's, else the first listed).")
    var pixelFormat: String?
    // Unconditional: its value begins with a minus more often than not (-2,0,2).
    @Option(parsing: .unconditional, help: "Exposure bracket: EV offsets, comma-separated, one picture each, e.g. -2,0,2.") var bracket: String?
    @Option(help: "Milliseconds between a bracket's pictures (default 300).") var bracketInterval: UInt32?
    @Flag(help: "JPEG instead of PNG.") var jpeg = false
    @Option(help: "JPEG quality, 1 to 100 (default 92).") var quality: UInt32?
    @Option(name: .shortAndLong, help: "A directory to copy the pictures and their sidecars into.") var output: String?
    @Flag(help: "With -o: also contact-sheet.png, every picture on one image.") var contactSheet = false
    @Option(help: "The still's name (default: its id).") var name: String?
    @Option(help: "Seconds to wait for the pictures to reach the coordinator.") var wait: Double = 120
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard all != !devices.isEmpty else {
            throw ValidationError(all ? "give either --all or cameras, not both" : "name the cameras, or give --all")
        }
        _ = try Self.size(size)
        _ = try Self.bracket(bracket)
        if contactSheet && output == nil { throw ValidationError("--contact-sheet goes with -o DIR") }
        if let quality, !(1...100).contains(quality) { throw ValidationError("--quality is 1 to 100") }
    }

    static func size(_ text: String) throws -> (UInt32, UInt32) {
        if text == "max" || text == "streaming" { return (0, 0) }
        let parts = text.lowercased().split(separator: "x").compactMap { UInt32($0) }
        guard parts.count == 2, parts[0] > 0, parts[1] > 0 else {
            throw ValidationError("--size is max, streaming or WxH, e.g. 4608x3456, not \(text)")
        }
        return (parts[0], parts[1])
    }

    static func bracket(_ text: String?) throws -> [Double] {
        guard let text else { return [] }
        let steps = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard !steps.isEmpty, steps.allSatisfy({ $0 != nil }) else {
            throw ValidationError("--bracket is EV offsets, comma-separated, e.g. -2,0,2, not \(text)")
        }
        return steps.map { $0! }
    }

    func run() throws {
        let (width, height) = try Self.size(size)
        var query = Capfleet_V1_TakeStill.with {
            $0.deviceIds = devices
            $0.all = all
            $0.width = width
            $0.height = height
            $0.pixelFormat = pixelFormat ?? ""
            $0.bracketIntervalMs = bracketInterval ?? 0
            $0.encoding = jpeg ? .jpeg : .png
            $0.jpegQuality = quality ?? 0
            $0.name = name ?? ""
            $0.streamingFormat = size == "streaming"
        }
        query.bracketEv = try Self.bracket(bracket)
        if let at { try FleetTimeArgument.parse(at, at: &query.atFleetTimeNs, fromNow: &query.fromNowNs) }
        let session = try coordinator.session()
        let reply = try session.takeStill(query)
        guard let taken = reply.stills.first else { throw CLIFailure("the coordinator took the still but did not describe it") }
        // Cameras refused or failed are said, never left out silently.
        if !reply.status.reason.isEmpty { FileHandle.standardError.write(Data("note: \(reply.status.reason)\n".utf8)) }
        guard let output else {
            print(json ? try FleetTables.json(StillViews.Still(taken)) : StillViews.show(taken))
            if !json { print("the pictures go on to the coordinator; copy them with: capfleet stills export \(taken.id) --to DIR") }
            // A camera that took no picture makes the status 3, as with -o.
            if taken.state == "partial" || taken.state == "failed" { throw ExitCode(3) }
            return
        }
        let exported = try session.exportStill(taken.id, to: output, polls: Int(max(0, min(wait, 3600)) * 4))
        var files = exported.files
        if contactSheet {
            let sheet = output + "/contact-sheet.png"
            try StillSheet.write(exported.still, from: output, to: sheet)
            files.append(sheet)
        }
        if json {
            print(try FleetTables.json(StillViews.Export(still: StillViews.Still(exported.still), files: files, bytes: exported.bytes)))
        } else {
            print(StillViews.show(exported.still))
            print(
                "copied \(exported.files.count / 2) picture(s) and their sidecars, \(RecordingViews.bytes(exported.bytes)), to \(output); every SHA-256 matches the index"
                    + (contactSheet ? "; contact sheet \(output)/contact-sheet.png" : ""))
        }
        if !exported.missing.isEmpty { throw ExitCode(3) }
    }
}

/// `capfleet stills list|show|export|delete`.
struct StillsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stills", abstract: "List, show, export and delete stills.",
        subcommands: [List.self, Show.self, Export.self, Delete.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Every still, newest first.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let stills = try coordinator.call(.listStills(.init())).reply.stills
            print(json ? try FleetTables.json(stills.map { StillViews.Still($0) }) : StillViews.list(stills))
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A still per camera and picture: capture time, spread to the instant, size, exposure, where it is.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The still.") var still: String
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            guard let info = try coordinator.call(.getStill(.with { $0.stillID = still })).reply.stills.first else {
                throw CLIFailure("the coordinator did not describe still \(still)")
            }
            print(json ? try FleetTables.json(StillViews.Still(info, detailed: true)) : StillViews.show(info))
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Copy a still's pictures and sidecars into a directory (DIR/DEVICE-N.png, DIR/DEVICE-N.json), checking each against its SHA-256.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The still.") var still: String
        @Option(help: "Where to put the files.") var to: String
        @Flag(help: "Also contact-sheet.png, every picture on one image.") var contactSheet = false
        @Option(help: "Seconds to wait for pictures still being copied from the agents.") var wait: Double = 60
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let exported = try coordinator.session().exportStill(still, to: to, polls: Int(max(0, min(wait, 3600)) * 4))
            var files = exported.files
            if contactSheet {
                try StillSheet.write(exported.still, from: to, to: to + "/contact-sheet.png")
                files.append(to + "/contact-sheet.png")
            }
            if json {
                print(try FleetTables.json(StillViews.Export(still: StillViews.Still(exported.still), files: files, bytes: exported.bytes)))
            } else {
                print(
                    "exported \(exported.files.count / 2) picture(s) and their sidecars, \(RecordingViews.bytes(exported.bytes)), to \(to); every SHA-256 matches the index"
                )
                for missing in exported.missing { print("no picture: \(missing)") }
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a still: its pictures (on the coordinator and the agents) and its index entries.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The still.") var still: String

        func run() throws {
            _ = try coordinator.call(.deleteStill(.with { $0.stillID = still }), timeout: 30)
            print("still \(still) deleted")
        }
    }
}

/// One image of a still's pictures (`--contact-sheet`): each camera's first picture, labelled
/// with its device, capture time against the instant, size and exposure.
enum StillSheet {
    static func write(_ still: Capfleet_V1_StillInfo, from directory: String, to path: String) throws {
        var tiles: [ContactSheet.Tile] = []
        for device in still.devices {
            let images = device.images.filter(\.stored)
            if images.isEmpty {
                tiles.append(
                    ContactSheet.Tile(
                        title: device.deviceID, lines: ["no picture", String(device.error.prefix(40))],
                        statusColour: RGB(240, 80, 80), picture: nil))
            }
            for image in images {
                let file = directory + "/" + image.fileName
                let picture: RGBImage
                do {
                    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
                    picture = file.hasSuffix(".jpg") ? try JPEGDecoder().decode(bytes) : try PNGDecoder.decode(bytes)
                } catch {
                    throw CLIFailure("cannot read \(file) for the contact sheet: \(error)")
                }
                let ev = still.bracketEv.isEmpty ? "" : String(format: ", %+.1f EV", image.ev)
                tiles.append(
                    ContactSheet.Tile(
                        title: images.count > 1 ? "\(device.deviceID) #\(image.number)" : device.deviceID,
                        lines: ["\(image.width)x\(image.height) \(image.pixelFormat)\(ev)", "spread \(StillViews.milliseconds(image.spreadNs))"],
                        statusColour: RGB(90, 220, 120), picture: picture))
            }
        }
        let sheet = ContactSheet(tiles: tiles, pictureWidth: 480, pictureHeight: 360)
        do {
            try PictureFile.write(try PNGEncoder.encode(sheet.render()), to: path)
        } catch let error as ImagingError {
            throw CLIFailure("cannot write the contact sheet \(path): \(error)")
        }
    }
}
