import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// `capfleet optics`: what is known of a camera's lens that its driver does not say.
struct OpticsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "optics",
        abstract: "Show or record what is known of a camera's lens: its field of view and how near it focuses (V4L2 says neither).",
        discussion:
            "capfleet scan-setup reads them. Without options: shows what is recorded. Audited; needs no lease (nothing changes on the camera).")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The camera.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(name: .customLong("fov"), help: "Horizontal field of view at zoom 1, degrees (for formats that do not report one).") var fieldOfView:
        Double?
    @Option(name: .customLong("min-focus-mm"), help: "The nearest distance the lens focuses at, mm (wins over what the camera reports).")
    var minimumFocus: Double?
    @Flag(help: "Forget what is recorded.") var clear = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if clear && (fieldOfView != nil || minimumFocus != nil) { throw ValidationError("--clear goes alone") }
    }

    func run() throws {
        let optics: Capfleet_V1_DeviceOptics
        if clear || fieldOfView != nil || minimumFocus != nil {
            // A change keeps what it does not name.
            var wanted = clear ? DeviceOptics() : DeviceOptics(wire: try current().optics)
            if let fieldOfView { wanted.fieldOfViewDegrees = fieldOfView }
            if let minimumFocus { wanted.minimumFocusDistanceMillimetres = minimumFocus }
            if let problem = wanted.problem { throw CLIFailure(problem) }
            optics = try coordinator.call(
                .setDeviceOptics(
                    .with {
                        $0.deviceID = device
                        $0.optics = wanted.wire
                    }), timeout: 10
            ).reply.optics
        } else {
            optics = try current().optics
        }
        let known = DeviceOptics(wire: optics)
        if json {
            print(try FleetTables.json(ScanSetupViews.Optics(device: device, optics)))
        } else {
            print("\(device): \(known.summary)\(optics.changedBy.isEmpty ? "" : " (recorded by \(optics.changedBy))")")
        }
    }

    private func current() throws -> Capfleet_V1_DeviceInfo { try coordinator.device(device) }
}

extension CoordinatorOptions {
    /// One device in full (GetDevice), as `capfleet device` shows it.
    func device(_ deviceID: String) throws -> Capfleet_V1_DeviceInfo {
        guard let info = try call(.getDevice(.with { $0.deviceID = deviceID })).reply.devices.first else {
            throw CLIFailure("the coordinator sent no device \(deviceID)")
        }
        return info
    }
}

/// `capfleet scan-setup`: the zoom at which a code of a given size is readable at the lens's
/// minimum focus distance (detection.md, "Scan set-up").
struct ScanSetupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan-setup",
        abstract:
            "Recommend the zoom at which a code of a given size, held as near as the lens focuses, fills a share of the frame; --apply sets it.",
        discussion: """
            From the active format's field of view (or the one recorded with capfleet optics), the minimum focus distance (recorded with \
            capfleet optics, or the focus range's near limit where the camera says it) and the share of the frame's width the code should \
            fill (--fill; default: the detection region's width where one is set, else \(VideoFormat.trim(ScanSetup.defaultFill))). \
            --apply needs the camera's lease, as capfleet zoom does.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The camera.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(name: .customLong("code-mm"), help: "The code's width, mm (the smallest one to read).") var codeMillimetres: Double
    @Option(help: "The share of the frame's width the code should fill, above 0 and at most 1.") var fill: Double?
    @Flag(help: "Set the recommended zoom.") var apply = false
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let info = try coordinator.device(device)
        let region = info.hasDetection ? NormalizedRect(wire: info.detection.region) : nil
        let setup: ScanSetup
        do {
            setup = try ScanSetup(
                deviceID: device, codeMillimetres: codeMillimetres, fill: fill, activeFormat: VideoFormat(wire: info.activeFormat),
                focus: FocusCapabilities(wire: info.descriptor.focus), optics: DeviceOptics(wire: info.optics),
                detectionRegion: region)
        } catch {
            throw CLIFailure(error.description)
        }
        var applied: Double?
        if apply {
            applied = try coordinator.call(
                .changeZoom(
                    .with {
                        $0.deviceID = device
                        $0.factor = setup.zoomFactor
                    })
            ).reply.zoomFactor
        }
        if json {
            print(try FleetTables.json(ScanSetupViews.Recommendation(device: device, setup, currentZoom: info.zoomFactor, applied: applied)))
        } else {
            print(ScanSetupViews.text(device: device, setup, width: Int(info.activeFormat.width), currentZoom: info.zoomFactor, applied: applied))
        }
    }
}
