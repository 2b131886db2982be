import FleetAudio
import FleetCore
import Logging

/// The agent's microphones at start (microphones.md): the ALSA capture devices it was told to
/// use or found, then its synthetic ones.
enum MicrophoneInventory {
    static func sources(for configuration: AgentConfiguration, nodeID: String, logger: Logger) throws(AgentError) -> [any MicrophoneSource] {
        var sources: [any MicrophoneSource] = []
        if !configuration.microphones.isEmpty || configuration.discoverMicrophones {
            let (found, problems) = AlsaDeviceDiscovery.discover()
            for problem in problems { logger.warning("an ALSA capture device cannot be used", metadata: ["problem": "\(problem)"]) }
            if configuration.microphones.isEmpty {
                sources += found.map { AlsaMicrophone(device: $0) }
            } else {
                for wanted in configuration.microphones {
                    guard let device = found.first(where: { $0.alsaName == wanted || $0.deviceID == wanted }) else {
                        let listed = found.map { "\($0.deviceID) (\($0.alsaName))" }
                        throw AgentError.microphoneNotFound(
                            wanted, found: listed.isEmpty ? "none" : listed.joined(separator: ", "), problems: problems)
                    }
                    sources.append(AlsaMicrophone(device: device))
                }
            }
            for case let source as AlsaMicrophone in sources {
                logger.info(
                    "microphone",
                    metadata: [
                        "device.id": "\(source.device.deviceID)", "alsa": "\(source.device.alsaName)", "format": "\(source.format.label)",
                        "bus": "\(source.device.busPath)",
                    ])
            }
        }
        let shortID = String(nodeID.replacingOccurrences(of: "node-", with: "").prefix(8))
        sources += (0..<max(configuration.syntheticMicrophoneCount, 0)).map { index in
            SyntheticMicrophone(deviceID: "synmic-\(shortID)-\(index + 1)", name: "Synthetic microphone \(index + 1)")
        }
        return sources
    }
}
