import FleetCore
import FleetProtocol

/// A microphone's processing as `capfleet processing --json` and `capfleet device --json` print it.
public struct AudioProcessingView: Encodable {
    var deviceId: String
    var highPassHz: Double
    var noiseSuppressionDb: Double
    var gainDb: Double
    var summary: String

    enum CodingKeys: String, CodingKey {
        case deviceId = "device_id", highPassHz = "high_pass_hz", noiseSuppressionDb = "noise_suppression_db", gainDb = "gain_db", summary
    }

    public init(device: String, _ settings: AudioProcessingSettings) {
        deviceId = device
        highPassHz = settings.highPassHertz
        noiseSuppressionDb = settings.noiseSuppressionDecibels
        gainDb = settings.gainDecibels
        summary = settings.summary
    }
}
