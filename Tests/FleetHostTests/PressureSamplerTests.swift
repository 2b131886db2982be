import FleetCore
import FleetHost
import Foundation
import Testing

/// A fixture tree in the kernel's own file formats.
struct HostFixture {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-host-\(UUID().uuidString.prefix(8))").path

    func write(_ relative: String, _ text: String) throws {
        let path = root + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    func psi(_ resource: String, some: Double, full: Double = 0) throws {
        try write(
            "/proc/pressure/\(resource)",
            """
            some avg10=\(String(format: "%.2f", some)) avg60=1.00 avg300=0.50 total=123456
            full avg10=\(String(format: "%.2f", full)) avg60=0.00 avg300=0.00 total=0

            """)
    }

    func thermalZone(_ index: Int, type: String, millidegrees: Int, trips: [(String, Int)]) throws {
        let base = "/sys/class/thermal/thermal_zone\(index)"
        try write(base + "/type", type + "\n")
        try write(base + "/temp", "\(millidegrees)\n")
        for (trip, (kind, temp)) in trips.enumerated() {
            try write(base + "/trip_point_\(trip)_type", kind + "\n")
            try write(base + "/trip_point_\(trip)_temp", "\(temp)\n")
        }
    }
}

@Suite struct PressureSamplerTests {
    @Test func readsPSI_thermalTrips_battery_andBoardFlags_fromAFixtureTree() throws {
        let fixture = HostFixture()
        defer { try? FileManager.default.removeItem(atPath: fixture.root) }
        try fixture.psi("cpu", some: 42.5)
        try fixture.psi("memory", some: 3.25, full: 1)
        try fixture.psi("io", some: 0)
        try fixture.thermalZone(0, type: "x86_pkg_temp", millidegrees: 71_500, trips: [("passive", 80_000), ("critical", 100_000)])
        try fixture.thermalZone(1, type: "acpitz", millidegrees: 40_000, trips: [("active", 50_000), ("hot", 90_000), ("passive", 85_000)])
        try fixture.write("/sys/class/power_supply/AC/type", "Mains\n")
        try fixture.write("/sys/class/power_supply/BAT0/type", "Battery\n")
        try fixture.write("/sys/class/power_supply/BAT0/status", "Discharging\n")
        try fixture.write("/sys/class/power_supply/BAT0/capacity", "17\n")
        try fixture.write("/sys/devices/platform/soc/soc:firmware/get_throttled", "0x50005\n")

        let sample = PressureSampler(root: fixture.root, disks: [fixture.root]).sample()
        #expect(sample.cpuStallPercent == 42.5)
        #expect(sample.memoryStallPercent == 3.25)
        #expect(sample.ioStallPercent == 0)
        #expect(
            sample.thermal == [
                ThermalReading(zone: "x86_pkg_temp", celsius: 71.5, passiveCelsius: 80, criticalCelsius: 100),
                ThermalReading(zone: "acpitz", celsius: 40, passiveCelsius: 85, hotCelsius: 90),
            ])
        #expect(sample.batteryPercent == 17)
        #expect(sample.underVoltage && sample.throttled)
        let free = try #require(sample.diskFree[fixture.root])
        #expect(free > 0 && free <= 1)
    }

    @Test func anEmptyTree_hasNoFactors() {
        let sample = PressureSampler(root: "/nonexistent-capfleet-root").sample()
        #expect(sample == PressureSample())
    }

    @Test func thisMachine_hasRealPSI_andNoThermalZonesIsSimplyNoThermalFactor() {
        let sample = PressureSampler().sample()
        #expect(sample.cpuStallPercent != nil, "/proc/pressure/cpu is real here")
        var evaluator = PressureEvaluator()
        #expect(evaluator.evaluate(sample).assessment.factors[.thermal] == nil || !sample.thermal.isEmpty)
    }
}
