import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// `capfleet control DEVICE [CONTROL [VALUE]]`: a camera's controls, and setting one
/// (commands.md, "Controls").
struct ControlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "control",
        abstract: "Show a camera's controls, or set one (gain, white balance, brightness ...).",
        discussion: """
            CONTROL is a control's key as `capfleet device` lists it (gain_raw), its name, or its \
            id (0x00980913); VALUE a number within its range, a menu item's name (Continuous), or \
            on/off for a switch. The agent sets it on the camera and reads it back. Needs the \
            camera's lease (capfleet lock); audited. A V4L2 driver keeps the value while it is \
            loaded, a GenICam camera until it is powered off; the fleet does not set it again.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The camera's device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Argument(help: "The control: key, name or id.") var control: String?
    @Argument(help: "The value to set.") var value: String?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if value != nil && control == nil { throw ValidationError("name the control to set") }
    }

    func run() throws {
        let current = try coordinator.call(.getDevice(.with { $0.deviceID = device })).reply
        guard let info = current.devices.first else { throw CLIFailure("no device \(device)") }
        let controls = DeviceDescription(wire: info.descriptor).controls
        guard let control else {
            if json {
                print(try FleetTables.json(controls.map(JSONViews.Control.init)))
            } else {
                print(controls.isEmpty ? "\(device) has no controls" : FleetTables.controls(controls))
            }
            return
        }
        guard let chosen = DeviceControl.named(control, in: controls) else {
            throw CLIFailure("\(device) has no control \(control); it has \(controls.isEmpty ? "none" : controls.map(\.key).joined(separator: ", "))")
        }
        var shown = chosen
        if let value {
            guard let number = chosen.value(parsing: value) else {
                let items = chosen.menu.isEmpty ? "" : ", or one of \(chosen.menu.map(\.name).joined(separator: ", "))"
                throw CLIFailure("\(value) is not a value for \(chosen.name): a number from \(chosen.minimum) to \(chosen.maximum)\(items)")
            }
            if let problem = chosen.refusal(of: number) { throw CLIFailure(problem) }
            let reply = try coordinator.call(
                .changeControl(
                    .with {
                        $0.deviceID = device
                        $0.controlID = chosen.id
                        $0.value = number
                    }), timeout: 15
            ).reply
            shown = DeviceControl(wire: reply.control)
        }
        if json {
            print(try FleetTables.json(JSONViews.Control(shown)))
        } else {
            let item = shown.menu.first { $0.value == shown.value }.map { " (\($0.name))" } ?? ""
            print("\(device) \(shown.name) = \(shown.value.map(String.init) ?? "-")\(item)")
        }
    }
}
