import FleetCore
import Foundation

/// Reads what strains the host, from files the kernel exposes, under a configurable root
/// (tests point it at fixture trees in the real file formats):
/// - `/proc/pressure/{cpu,memory,io}`: PSI "some avg10", percent of time stalled;
/// - `/sys/class/thermal/thermal_zone*`: `temp` (millidegrees) and `trip_point_N_{type,temp}`;
/// - `/sys/class/power_supply/*`: a discharging battery's `capacity`;
/// - under-voltage and throttling flags where boards report them (Raspberry Pi firmware's
///   `get_throttled`, or an `rpi_volt` hwmon's `in0_lcrit_alarm`);
/// - free space of the watched disks (statvfs, on the real paths).
/// A file that is absent is a factor the host does not have, never an error.
public struct PressureSampler: Sendable {
    public let root: String
    public let disks: [String]

    public init(root: String = "/", disks: [String] = []) {
        self.root = root.hasSuffix("/") ? String(root.dropLast()) : root
        self.disks = disks
    }

    public func sample() -> PressureSample {
        var sample = PressureSample(
            cpuStallPercent: stall("cpu"), memoryStallPercent: stall("memory"), ioStallPercent: stall("io"),
            thermal: thermalZones())
        sample.batteryPercent = dischargingBattery()
        let flags = boardFlags()
        sample.underVoltage = flags.underVoltage
        sample.throttled = flags.throttled
        for disk in disks { sample.diskFree[disk] = Self.freeFraction(of: disk) }
        return sample
    }

    private func path(_ relative: String) -> String { root + relative }

    private func read(_ relative: String) -> String? {
        try? String(contentsOfFile: path(relative), encoding: .utf8)
    }

    private func entries(_ relative: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path(relative))) ?? []).sorted()
    }

    /// `some avg10=12.34 avg60=… avg300=… total=…` → 12.34.
    func stall(_ resource: String) -> Double? {
        guard let text = read("/proc/pressure/\(resource)") else { return nil }
        return Self.someAverage10(text)
    }

    static func someAverage10(_ text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("some ") {
            for field in line.split(separator: " ") where field.hasPrefix("avg10=") {
                return Double(field.dropFirst(6))
            }
        }
        return nil
    }

    func thermalZones() -> [ThermalReading] {
        entries("/sys/class/thermal").filter { $0.hasPrefix("thermal_zone") }.compactMap { zone in
            let base = "/sys/class/thermal/\(zone)"
            guard let millidegrees = read(base + "/temp").flatMap({ Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
                return nil
            }
            var reading = ThermalReading(
                zone: read(base + "/type")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? zone,
                celsius: millidegrees / 1000)
            for file in entries(base) where file.hasPrefix("trip_point_") && file.hasSuffix("_type") {
                let index = file.dropFirst("trip_point_".count).dropLast("_type".count)
                guard let type = read(base + "/" + file)?.trimmingCharacters(in: .whitespacesAndNewlines),
                    let temp = read(base + "/trip_point_\(index)_temp").flatMap({ Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
                else { continue }
                let celsius = temp / 1000
                // Several trips of one type: the lowest is where trouble begins.
                switch type {
                case "passive": reading.passiveCelsius = min(reading.passiveCelsius ?? celsius, celsius)
                case "hot": reading.hotCelsius = min(reading.hotCelsius ?? celsius, celsius)
                case "critical": reading.criticalCelsius = min(reading.criticalCelsius ?? celsius, celsius)
                default: break
                }
            }
            return reading
        }
    }

    /// The charge of a battery that is discharging (the host runs on it), else nil.
    func dischargingBattery() -> Double? {
        entries("/sys/class/power_supply").compactMap { supply -> Double? in
            let base = "/sys/class/power_supply/\(supply)"
            guard read(base + "/type")?.trimmingCharacters(in: .whitespacesAndNewlines) == "Battery",
                read(base + "/status")?.trimmingCharacters(in: .whitespacesAndNewlines) == "Discharging"
            else { return nil }
            return read(base + "/capacity").flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }.min()
    }

    /// Raspberry Pi firmware flags (bit 0 under-voltage now, bit 2 throttled now), or an
    /// `rpi_volt` hwmon's low-voltage alarm.
    func boardFlags() -> (underVoltage: Bool, throttled: Bool) {
        var underVoltage = false, throttled = false
        if let text = read("/sys/devices/platform/soc/soc:firmware/get_throttled")?.trimmingCharacters(in: .whitespacesAndNewlines),
            let flags = UInt32(text.hasPrefix("0x") ? String(text.dropFirst(2)) : text, radix: 16)
        {
            underVoltage = flags & 0x1 != 0
            throttled = flags & 0x4 != 0
        }
        for hwmon in entries("/sys/class/hwmon")
        where read("/sys/class/hwmon/\(hwmon)/name")?.trimmingCharacters(in: .whitespacesAndNewlines) == "rpi_volt" {
            if read("/sys/class/hwmon/\(hwmon)/in0_lcrit_alarm")?.trimmingCharacters(in: .whitespacesAndNewlines) == "1" { underVoltage = true }
        }
        return (underVoltage, throttled)
    }

    /// Free fraction of the file system holding `path` (statvfs; space usable by non-root).
    static func freeFraction(of path: String) -> Double? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0, stats.f_blocks > 0 else { return nil }
        return Double(stats.f_bavail) / Double(stats.f_blocks)
    }
}
