import ArgumentParser
import FleetRelay
import Foundation

/// `capfleet-relay`: the network between test hosts. Passes TCP connections on to their
/// targets through delay lines that apply a link impairment (delay, jitter, asymmetry,
/// loss stalls, delay spikes), since this kernel has no netem. deploy/netns-fleet.sh puts one
/// on every agent host's path to the coordinator, and finds it next to the `capfleet` binary
/// it runs. A binary of its own, not a `capfleet` command: the test bed's network is no part
/// of what is deployed.
@main
struct RelayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capfleet-relay",
        abstract: "Relay TCP connections with a configurable link impairment (a test bed's network).",
        discussion: """
            IMPAIRMENT is key=value words, separated by commas or spaces:
              delay=1ms        one-way delay in each direction   up= / down=  per direction
              jitter=200us     each chunk's delay varies uniformly by up to this either way
              loss=5%          share of chunks lost; TCP delivers them after stall=200ms, and
                               everything behind them in that direction waits
              spike=20ms       extra delay for spike-for=1s every spike-every=10s,
                               spike-dir=up|down|both
              seed=N           for the jitter and loss draws
            "up" is from the side that connected to the relay toward the target.
            """)

    @Option(name: .customLong("forward"), help: "LISTEN=TARGET, each HOST:PORT (IPv4), e.g. 127.0.0.1:7600=10.77.0.1:7600; repeat for more.")
    var forwards: [String] = []
    @Option(help: "The link's impairment (see below); none by default.")
    var impair: String = ""
    @Option(help: "A file holding the impairment, re-read whenever it changes (overrides --impair once read).")
    var impairFile: String?

    func validate() throws {
        guard !forwards.isEmpty else { throw ValidationError("give at least one --forward LISTEN=TARGET") }
        for forward in forwards where RelayRoute(forward) == nil {
            throw ValidationError("cannot read --forward \(forward): write LISTEN=TARGET with IPv4 HOST:PORT on both sides")
        }
    }

    func run() throws {
        let impairment: LinkImpairment
        do { impairment = try LinkImpairment(specification: impair) } catch { throw ValidationError(error.description) }
        let setting = ImpairmentSetting(impairment)
        let relay = try TCPRelay(routes: forwards.compactMap(RelayRoute.init), setting: setting)
        // Straight to the descriptor: the log is a file, and stdio would buffer it.
        let log: @Sendable (String) -> Void = { FileHandle.standardOutput.write(Data(($0 + "\n").utf8)) }
        if let impairFile {
            setting.follow(file: impairFile) { result in
                switch result {
                case .success(let impairment): log("relay: impairment now \(impairment) (from \(impairFile))")
                case .failure(let error): log("relay: ignoring \(impairFile): \(error.description); impairment stays \(setting.current)")
                }
            }
        }
        relay.start(log: log)
        log("relay: \(relay.routes.map { "\($0.listen) → \($0.target)" }.joined(separator: ", ")), impairment \(setting.current)")
        // Runs until killed: it holds no state worth a clean shutdown.
        while true { sleep(3600) }
    }
}
