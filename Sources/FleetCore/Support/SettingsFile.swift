/// A flat `key = value` settings file with `#` comments (a `#` inside double quotes is kept), the format of the coordinator's
/// and agent's configuration files (see deploy/*.conf). Each key may be overridden by
/// the environment variable `CAPFLEET_<KEY>` (upper-cased), and a command-line flag beats both.
public struct SettingsFile: Sendable, Equatable {
    public private(set) var values: [String: String] = [:]

    public enum ParseError: Error, CustomStringConvertible, Equatable {
        case malformedLine(path: String, line: Int, text: String)
        case unknownKey(path: String, line: Int, key: String, known: [String])
        case invalidValue(key: String, value: String, expected: String)

        public var description: String {
            switch self {
            case let .malformedLine(path, line, text):
                "\(path):\(line): expected `key = value`, found `\(text)`"
            case let .unknownKey(path, line, key, known):
                "\(path):\(line): unknown setting `\(key)`; known settings: \(known.joined(separator: ", "))"
            case let .invalidValue(key, value, expected):
                "setting \(key) = \(value) is not valid: expected \(expected)"
            }
        }
    }

    public init() {}

    public init(text: String, path: String, knownKeys: [String]) throws(ParseError) {
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = String(Self.withoutComment(rawLine)).trimmed
            guard !trimmed.isEmpty else { continue }
            let pieces = trimmed.split(separator: "=", maxSplits: 1).map { String($0).trimmed }
            guard pieces.count == 2, !pieces[0].isEmpty else {
                throw .malformedLine(path: path, line: index + 1, text: trimmed)
            }
            guard knownKeys.contains(pieces[0]) else {
                throw .unknownKey(path: path, line: index + 1, key: pieces[0], known: knownKeys)
            }
            values[pieces[0]] = pieces[1].unquoted
        }
    }

    /// The line up to its comment: a `#` outside double quotes, so that a quoted value keeps
    /// its `#` (`real_frames_command = "notify #ops"`, a URL's fragment).
    static func withoutComment(_ line: Substring) -> Substring {
        var quoted = false
        for index in line.indices {
            switch line[index] {
            case "\"": quoted.toggle()
            case "#" where !quoted: return line[..<index]
            default: continue
            }
        }
        return line
    }

    /// Where each of `keys` comes from, for `--check-config`: one line per key, `key = value
    /// (environment CAPFLEET_KEY | file | default)`, in the order given.
    public func report(keys: [String], environment: [String: String]) -> [String] {
        keys.map { key in
            let variable = "CAPFLEET_" + key.uppercased()
            if let value = environment[variable] { return "\(key) = \(value)   (environment \(variable))" }
            if let value = values[key] { return "\(key) = \(value)   (file)" }
            return "\(key)   (default)"
        }
    }

    /// The value from the environment override, else the file, else nil.
    public func value(_ key: String, environment: [String: String]) -> String? {
        environment["CAPFLEET_" + key.uppercased()] ?? values[key]
    }

    public func integer<T: FixedWidthInteger>(_ key: String, environment: [String: String]) throws(ParseError) -> T? {
        guard let text = value(key, environment: environment) else { return nil }
        guard let number = T(text) else { throw .invalidValue(key: key, value: text, expected: "an integer from \(T.min) to \(T.max)") }
        return number
    }
}

extension String {
    var trimmed: String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice = slice.dropFirst() }
        while let last = slice.last, last.isWhitespace { slice = slice.dropLast() }
        return String(slice)
    }

    var unquoted: String {
        count >= 2 && hasPrefix("\"") && hasSuffix("\"") ? String(dropFirst().dropLast()) : self
    }
}

/// Every key an agent settings file (`capfleet agent --config`, deploy/agent.conf) may hold.
public enum AgentSettingKeys {
    /// Recorded frames kept in memory before the disk spool, and on disk, in MiB.
    public static let recordSpoolMemory = "record_spool_memory_mb"
    public static let recordSpoolDisk = "record_spool_disk_mb"
    public static let defaultRecordSpoolMemoryMiB = 256
    public static let defaultRecordSpoolDiskMiB: Int64 = 4096

    /// Where the agent finds the coordinator, what it is called, where it keeps its key, and
    /// the one-time token it enrolls with (`--coordinator`, `--name`, `--state-dir`, `--enroll`).
    public static let coordinator = "coordinator"
    public static let name = "name"
    public static let stateDirectory = "state_dir"
    public static let enrollToken = "enroll_token"

    /// Every camera's preview (frames.md, "Previews"): on or off, width, rate, JPEG quality.
    public static let preview = "preview"
    public static let previewWidth = "preview_width"
    public static let previewFPS = "preview_fps"
    public static let previewQuality = "preview_quality"

    /// Takes written on this host (recordings.md, "Where takes are written"): where, the free
    /// space kept, how long collected segments stay, and collect's read rate in MiB/s (0: no limit).
    public static let recordingsDirectory = "recordings_dir"
    public static let recordReserve = "record_reserve_mb"
    public static let recordingsKeepDays = "recordings_keep_days"
    public static let collectRate = "collect_rate_mb"

    /// Encoded takes (recordings.md, "Codecs"): threads each take's encoder may use, x264's
    /// and x265's speed preset, and whether hardware encoders are used where the host has them.
    public static let encoderThreads = "encoder_threads"
    public static let encoderPreset = "encoder_preset"
    public static let hardwareEncoders = "hardware_encoders"

    /// The longest wake-up this host's idle CPUs may take while the agent runs, µs, or off
    /// (clock.md, "Host tuning").
    public static let cpuLatency = "cpu_latency_us"

    /// Sensor streams the agent offers (sensors.md), and its sensor endpoint's Unix socket.
    public static let sensorStreams = "sensor_streams"
    public static let sensorSocket = "sensor_socket"
    /// Synthetic microphones the agent offers (microphones.md).
    public static let syntheticMicrophones = "synthetic_microphones"
    /// ALSA capture devices the agent uses (microphones.md): names or ids, or `none`.
    public static let microphones = "microphones"
    /// Where the agent looks for GenICam cameras (device-model.md, "GenICam cameras"): off,
    /// usb, all, or network interfaces.
    public static let genicam = "genicam"

    public static let all =
        [coordinator, name, stateDirectory, enrollToken] + PressureThresholds.settingKeys
        + [
            "real_frames_command", recordSpoolMemory, recordSpoolDisk, preview, previewWidth, previewFPS, previewQuality,
            recordingsDirectory, recordReserve, recordingsKeepDays, collectRate, encoderThreads, encoderPreset, hardwareEncoders, cpuLatency,
            sensorStreams, sensorSocket, syntheticMicrophones, microphones, genicam,
        ]
}
