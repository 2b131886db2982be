import FleetProtocol

/// How one camera is wired to others for an alignment (proto-docs/clock.md, "Hardware-line
/// triggers"): the input line it exposes on and the camera driving it (empty: an external
/// generator), and the output line it drives with its exposure signal. Empty: not wired.
public struct LineWiring: Sendable, Equatable {
    public var triggerLine: String
    public var sourceDeviceID: String
    public var outputLine: String

    public init(triggerLine: String = "", sourceDeviceID: String = "", outputLine: String = "") {
        self.triggerLine = triggerLine
        self.sourceDeviceID = sourceDeviceID
        self.outputLine = outputLine
    }

    public var isEmpty: Bool { triggerLine.isEmpty && outputLine.isEmpty }

    /// What `ChangeFrameAlignment.line_source` names for a generator the fleet does not run.
    public static let external = "external"
    /// The output line a source camera drives when the request names none.
    public static let defaultOutputLine = "Line1"

    /// For an audit entry: how it is wired, after the alignment's own words; empty when not.
    public var summary: String {
        var parts: [String] = []
        if !triggerLine.isEmpty {
            parts.append("exposes on the edges of \(triggerLine), driven by \(sourceDeviceID.isEmpty ? "an external generator" : sourceDeviceID)")
        }
        if !outputLine.isEmpty { parts.append("drives \(outputLine) with its exposure signal") }
        return parts.isEmpty ? "" : "; " + parts.joined(separator: "; ")
    }

    public struct Problem: Error, Equatable {
        public let message: String
    }

    /// Each named camera's wiring for `request`, or what is wrong with it: a line source that is
    /// a camera must be among those named (it is aligned as usual and drives its exposure signal
    /// out); every other named camera exposes on the trigger line.
    public static func plan(_ request: Capfleet_V1_ChangeFrameAlignment) -> Result<@Sendable (String) -> LineWiring, Problem> {
        let line = request.triggerLine, source = request.lineSource
        guard !line.isEmpty else {
            guard source.isEmpty, request.outputLine.isEmpty else {
                return .failure(Problem(message: "a line source or an output line goes with a trigger line (e.g. Line0)"))
            }
            return .success { _ in LineWiring() }
        }
        guard request.enabled else { return .success { _ in LineWiring() } }
        let output = request.outputLine.isEmpty ? defaultOutputLine : request.outputLine
        for name in [line, output] where !isLineName(name) {
            return .failure(Problem(message: "\(name) is not a line's name: GenICam's are like Line0, Line1 (letters, digits and _, up to 32)"))
        }
        guard !source.isEmpty else {
            return .failure(Problem(message: "say what drives \(line): a camera's device id (named too) or \(external) for a generator"))
        }
        if source == external { return .success { _ in LineWiring(triggerLine: line) } }
        guard request.deviceIds.contains(source) else {
            return .failure(
                Problem(message: "name the line's source \(source) among the cameras too: it is aligned as usual and drives its exposure signal out"))
        }
        guard request.deviceIds.count > 1 else { return .failure(Problem(message: "name the cameras wired to \(source)'s \(output) besides it")) }
        return .success { deviceID in
            deviceID == source ? LineWiring(outputLine: output) : LineWiring(triggerLine: line, sourceDeviceID: source)
        }
    }

    static func isLineName(_ name: String) -> Bool {
        (1...32).contains(name.count)
            && name.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }
}
