/// Where a factor's levels begin: the value at which it reaches fair, serious, critical and
/// shutdown (nil: never that high), and how far below a threshold the value must fall before
/// the level drops again.
public struct PressureThreshold: Hashable, Sendable {
    public var fair: Double?
    public var serious: Double?
    public var critical: Double?
    public var shutdown: Double?
    public var hysteresis: Double

    public init(fair: Double?, serious: Double?, critical: Double?, shutdown: Double?, hysteresis: Double) {
        self.fair = fair
        self.serious = serious
        self.critical = critical
        self.shutdown = shutdown
        self.hysteresis = hysteresis
    }

    var ascending: [(PressureLevel, Double?)] { [(.fair, fair), (.serious, serious), (.critical, critical), (.shutdown, shutdown)] }

    /// The level of `value`, given the level it had: rising takes the threshold as it is,
    /// falling needs the value below the threshold by `hysteresis`, so it does not flap.
    func level(of value: Double, from previous: PressureLevel) -> PressureLevel {
        var level = PressureLevel.nominal
        for (candidate, threshold) in ascending {
            guard let threshold else { continue }
            let effective = candidate <= previous ? threshold - hysteresis : threshold
            if value >= effective { level = candidate }
        }
        return level
    }
}

/// The documented, configurable thresholds (proto-docs/telemetry.md, "Pressure").
public struct PressureThresholds: Hashable, Sendable {
    /// PSI "some" avg10, percent of time.
    public var cpu = PressureThreshold(fair: 20, serious: 40, critical: 70, shutdown: nil, hysteresis: 5)
    public var memory = PressureThreshold(fair: 5, serious: 15, critical: 30, shutdown: 60, hysteresis: 2)
    public var io = PressureThreshold(fair: 20, serious: 40, critical: 70, shutdown: nil, hysteresis: 5)
    /// Degrees Celsius, for zones that declare no trip points; zones that do are judged
    /// against them (fair 10 °C below passive, serious at passive, critical at hot,
    /// shutdown 2 °C below critical).
    public var thermal = PressureThreshold(fair: 70, serious: 80, critical: 90, shutdown: 100, hysteresis: 3)
    /// Percent of battery used (100 − charge) while on battery.
    public var battery = PressureThreshold(fair: 80, serious: 90, critical: 95, shutdown: 98, hysteresis: 2)
    /// Fraction of a watched disk in use.
    public var diskUsed = PressureThreshold(fair: 0.80, serious: 0.90, critical: 0.95, shutdown: 0.98, hysteresis: 0.01)
    /// Fraction of frames dropped in the last interval.
    public var dropRate = PressureThreshold(fair: 0.01, serious: 0.05, critical: 0.20, shutdown: nil, hysteresis: 0.005)
    /// Fraction of the send queue in use.
    public var sendQueue = PressureThreshold(fair: 0.5, serious: 0.75, critical: 0.95, shutdown: nil, hysteresis: 0.1)
    /// Fraction of frames due for detection that were skipped: the detectors cannot keep up
    /// with the rate asked of them, which says the host is short of CPU; it never makes it critical.
    public var detection = PressureThreshold(fair: 0.25, serious: 0.6, critical: nil, shutdown: nil, hysteresis: 0.05)
    /// Samples in a row at a lower level before the level drops (rises are immediate).
    public var samplesToFall = 3

    public init() {}

    /// A zone's own trip points, where it declares them, else the absolute thresholds.
    func thermal(for zone: ThermalReading) -> PressureThreshold {
        guard zone.passiveCelsius != nil || zone.hotCelsius != nil || zone.criticalCelsius != nil else { return thermal }
        let passive = zone.passiveCelsius ?? zone.hotCelsius.map { $0 - 5 } ?? zone.criticalCelsius.map { $0 - 15 }
        let hot = zone.hotCelsius ?? zone.criticalCelsius.map { $0 - 10 }
        return PressureThreshold(
            fair: passive.map { $0 - 10 }, serious: passive, critical: hot,
            shutdown: zone.criticalCelsius.map { $0 - 2 }, hysteresis: thermal.hysteresis)
    }
}

/// The host's pressure: a level and the factors behind it.
public struct PressureAssessment: Hashable, Sendable {
    public var level: PressureLevel
    /// Every factor above nominal, with its own level.
    public var factors: [PressureFactor: PressureLevel]

    public init(level: PressureLevel = .nominal, factors: [PressureFactor: PressureLevel] = [:]) {
        self.level = level
        self.factors = factors
    }

    /// e.g. "serious (cpu serious, thermal fair)".
    public var summary: String {
        guard !factors.isEmpty else { return level.description }
        return "\(level) (" + factors.sorted { $0.key < $1.key }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", ") + ")"
    }
}

/// Reduces samples to a level with hysteresis: per factor a value must fall clearly below a
/// threshold, and the overall level drops only after `samplesToFall` samples in a row say so.
/// Rises take effect at once. Pure: one sample in, one assessment out.
public struct PressureEvaluator: Sendable, Equatable {
    public var thresholds: PressureThresholds
    public private(set) var assessment = PressureAssessment()
    private var factorLevels: [PressureFactor: PressureLevel] = [:]
    private var lowerSamples = 0

    public init(thresholds: PressureThresholds = PressureThresholds()) {
        self.thresholds = thresholds
    }

    /// Returns the assessment after this sample and whether the level changed.
    public mutating func evaluate(_ sample: PressureSample) -> (assessment: PressureAssessment, levelChanged: Bool) {
        var levels: [PressureFactor: PressureLevel] = [:]
        func judge(_ factor: PressureFactor, _ value: Double?, _ threshold: PressureThreshold) {
            guard let value else { return }
            levels[factor] = max(levels[factor] ?? .nominal, threshold.level(of: value, from: factorLevels[factor] ?? .nominal))
        }
        judge(.cpu, sample.cpuStallPercent, thresholds.cpu)
        judge(.memory, sample.memoryStallPercent, thresholds.memory)
        judge(.io, sample.ioStallPercent, thresholds.io)
        for zone in sample.thermal { judge(.thermal, zone.celsius, thresholds.thermal(for: zone)) }
        judge(.power, sample.batteryPercent.map { 100 - $0 }, thresholds.battery)
        if sample.underVoltage { levels[.power] = max(levels[.power] ?? .nominal, .serious) }
        if sample.throttled { levels[.throttling] = .fair }
        for free in sample.diskFree.values { judge(.diskSpace, 1 - free, thresholds.diskUsed) }
        judge(.dropRate, sample.dropRate, thresholds.dropRate)
        judge(.sendQueue, sample.sendQueueFill, thresholds.sendQueue)
        judge(.detection, sample.detectionSkipRate, thresholds.detection)
        factorLevels = levels

        let measured = levels.values.max() ?? .nominal
        let previous = assessment.level
        var level = measured
        if measured < previous {
            lowerSamples += 1
            if lowerSamples < thresholds.samplesToFall { level = previous }
        }
        if level != previous || measured >= previous { lowerSamples = 0 }
        assessment = PressureAssessment(level: level, factors: levels.filter { $0.value > .nominal })
        return (assessment, level != previous)
    }
}

extension PressureThresholds {
    static var settingNames: [(name: String, path: WritableKeyPath<PressureThresholds, PressureThreshold>)] {
        [
            ("cpu", \.cpu), ("memory", \.memory), ("io", \.io), ("thermal", \.thermal), ("battery", \.battery),
            ("disk_used", \.diskUsed), ("drop_rate", \.dropRate), ("send_queue", \.sendQueue), ("detection", \.detection),
        ]
    }

    /// Every key an agent settings file may set: `pressure.<factor>.<fair|serious|critical|shutdown|hysteresis>`
    /// and `pressure.samples_to_fall`.
    public static var settingKeys: [String] {
        settingNames.flatMap { factor in
            ["fair", "serious", "critical", "shutdown", "hysteresis"].map { "pressure.\(factor.name).\($0)" }
        } + ["pressure.samples_to_fall"]
    }

    /// The defaults with what `settings` changes; a level set to `never` is never reached.
    public init(settings: SettingsFile, environment: [String: String] = [:]) throws(SettingsFile.ParseError) {
        self.init()
        for factor in Self.settingNames {
            var threshold = self[keyPath: factor.path]
            func number(_ field: String) throws(SettingsFile.ParseError) -> Double?? {
                let key = "pressure.\(factor.name).\(field)"
                guard let text = settings.value(key, environment: environment) else { return .none }
                if text == "never" { return .some(nil) }
                guard let value = Double(text), value >= 0 else {
                    throw .invalidValue(key: key, value: text, expected: "a number of at least 0, or never")
                }
                return .some(value)
            }
            if let value = try number("fair") { threshold.fair = value }
            if let value = try number("serious") { threshold.serious = value }
            if let value = try number("critical") { threshold.critical = value }
            if let value = try number("shutdown") { threshold.shutdown = value }
            if let value = try number("hysteresis") { threshold.hysteresis = value ?? 0 }
            let levels = [threshold.fair, threshold.serious, threshold.critical, threshold.shutdown].compactMap { $0 }
            guard levels == levels.sorted() else {
                throw .invalidValue(
                    key: "pressure.\(factor.name)", value: levels.map { "\($0)" }.joined(separator: ", "),
                    expected: "fair ≤ serious ≤ critical ≤ shutdown")
            }
            self[keyPath: factor.path] = threshold
        }
        if let text = settings.value("pressure.samples_to_fall", environment: environment) {
            guard let value = Int(text), value >= 1 else {
                throw .invalidValue(key: "pressure.samples_to_fall", value: text, expected: "a whole number of at least 1")
            }
            samplesToFall = value
        }
    }
}
