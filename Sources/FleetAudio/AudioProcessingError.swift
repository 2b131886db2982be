import FleetCore

/// Why a microphone's processing cannot be set, and what to do.
public enum AudioProcessingError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The settings are out of range (`AudioProcessingSettings.problem`).
    case invalid(String)
    /// speexdsp would not make a preprocessor for this rate and frame.
    case suppressorUnavailable(sampleRate: Int, frameSize: Int)

    public var description: String {
        switch self {
        case let .invalid(problem): problem
        case let .suppressorUnavailable(sampleRate, frameSize):
            "speexdsp cannot suppress noise at \(sampleRate) Hz in frames of \(frameSize): choose another format (capfleet format) or leave noise suppression off"
        }
    }
}
