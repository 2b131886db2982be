import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// `capfleet processing MIC`: a microphone's high-pass, noise suppression and gain
/// (microphones.md, "Processing").
struct ProcessingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "processing",
        abstract: "Set a microphone's processing on its host: a high-pass filter, noise suppression (speexdsp) and a gain.",
        discussion: """
            Applied in that order before the sound is metered, sent or recorded; every take notes \
            what was applied in its timed metadata. Noise suppression delays the sound by 20 ms, \
            which is taken out of its times, so it stays on the picture. Needs the microphone's \
            lease (capfleet lock); audited; remembered, and set again whenever its agent registers. \
            Without options it prints what is set.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The microphone's device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(help: "High-pass corner, 20 to 500 Hz (off: 0): cuts rumble and handling noise below it.") var highPass: Double?
    @Option(help: "Noise suppression, 1 to 60 dB at most (off: 0).") var noiseSuppression: Double?
    @Option(help: "Gain, -40 to +40 dB (off: 0), applied last and clipped at full scale. Negative: --gain=-6.") var gain: Double?
    @Flag(help: "Turn every stage off.") var off = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if off && (highPass != nil || noiseSuppression != nil || gain != nil) { throw ValidationError("--off goes alone") }
    }

    func run() throws {
        let current = try coordinator.call(.getDevice(.with { $0.deviceID = device })).reply
        guard let info = current.devices.first else { throw CLIFailure("no device \(device)") }
        var settings = info.hasAudioProcessing ? AudioProcessingSettings(wire: info.audioProcessing) : .off
        let changing = off || highPass != nil || noiseSuppression != nil || gain != nil
        if changing {
            if off { settings = .off }
            if let highPass { settings.highPassHertz = highPass }
            if let noiseSuppression { settings.noiseSuppressionDecibels = noiseSuppression }
            if let gain { settings.gainDecibels = gain }
            if let problem = settings.problem() { throw CLIFailure(problem) }
            let reply = try coordinator.call(
                .changeAudioProcessing(
                    .with {
                        $0.deviceID = device
                        $0.processing = settings.wire
                    }), timeout: 15
            ).reply
            settings = AudioProcessingSettings(wire: reply.audioProcessing)
        }
        if json {
            print(try FleetTables.json(AudioProcessingView(device: device, settings)))
        } else {
            print("\(device) processing: \(settings.summary)")
        }
    }
}
