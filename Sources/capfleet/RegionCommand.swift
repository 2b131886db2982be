import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// `capfleet region DEVICE [--at LEFT,TOP | --centre]`: a GenICam camera's region of interest
/// (commands.md, "Region of interest").
struct RegionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "region",
        abstract: "Show or move a GenICam camera's region of interest: the window of its sensor it reads.",
        discussion: """
            The window's size is the active format's: choose it with `capfleet format` (a GenICam \
            camera offers its full sensor, the region it boots with, binned 2x2 and centred \
            1920x1080, 1280x720 and 640x480 windows where they fit). --at puts its top-left corner \
            at LEFT,TOP in the format's pixels (binned pixels when it bins), --centre in the \
            middle; a corner off the camera's steps goes down to the step below. The stream \
            restarts with the new window (a gap of a few frames). A new format starts where that \
            format puts it. Needs the camera's lease (capfleet lock); audited.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The camera's device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(help: "Put the window's top-left corner here: LEFT,TOP.") var at: String?
    @Flag(name: [.customLong("centre"), .customLong("center")], help: "Put the window in the middle of the sensor.") var centre = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if at != nil && centre { throw ValidationError("--at or --centre, not both") }
        if let at, Self.corner(at) == nil { throw ValidationError("--at takes LEFT,TOP in pixels, such as 320,240, not \(at)") }
    }

    static func corner(_ text: String) -> (left: Int32, top: Int32)? {
        let parts = text.split(separator: ",").map { Int32($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let left = parts[0], let top = parts[1], left >= 0, top >= 0 else { return nil }
        return (left, top)
    }

    func run() throws {
        let region: Capfleet_V1_Rectangle
        var sensor: PixelRectangle?
        let current = try coordinator.call(.getDevice(.with { $0.deviceID = device })).reply
        guard let info = current.devices.first else { throw CLIFailure("no device \(device)") }
        sensor = DeviceDescription(wire: info.descriptor).crop?.bounds
        if at != nil || centre {
            let corner = at.flatMap(Self.corner)
            region =
                try coordinator.call(
                    .changeRegion(
                        .with {
                            $0.deviceID = device
                            $0.centred = centre
                            if let corner { ($0.left, $0.top) = corner }
                        }), timeout: 20
                ).reply.region
        } else {
            guard info.hasRegion else {
                throw CLIFailure(
                    info.kind == .genicam
                        ? "\(device) has not reported its region yet: its agent reports it once the camera streams"
                        : "\(device) has no region of interest (GenICam cameras have one; a V4L2 camera crops through zoom: capfleet zoom)")
            }
            region = info.region
        }
        if json {
            print(
                try FleetTables.json(
                    JSONViews.Region(
                        device: device, left: Int(region.left), top: Int(region.top), width: Int(region.width), height: Int(region.height),
                        sensorWidth: sensor?.width, sensorHeight: sensor?.height)))
        } else {
            print("\(device) region \(FleetTables.regionSummary(region, sensor: sensor))")
        }
    }
}
