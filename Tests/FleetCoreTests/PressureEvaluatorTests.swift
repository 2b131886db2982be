import FleetCore
import Foundation
import Testing

@Suite struct PressureEvaluatorTests {
    @Test func quietHost_isNominalWithNoFactors() {
        var evaluator = PressureEvaluator()
        let result = evaluator.evaluate(PressureSample(cpuStallPercent: 1, memoryStallPercent: 0, ioStallPercent: 2, diskFree: ["/": 0.6]))
        #expect(result.assessment == PressureAssessment())
        #expect(!result.levelChanged)
    }

    @Test func eachFactor_reachesEachLevelAtItsThreshold() {
        let cases: [(PressureSample, PressureFactor, PressureLevel)] = [
            (PressureSample(cpuStallPercent: 45), .cpu, .serious),
            (PressureSample(memoryStallPercent: 65), .memory, .shutdown),
            (PressureSample(ioStallPercent: 75), .io, .critical),
            (PressureSample(thermal: [ThermalReading(zone: "cpu", celsius: 72)]), .thermal, .fair),
            (PressureSample(batteryPercent: 8), .power, .serious),
            (PressureSample(underVoltage: true), .power, .serious),
            (PressureSample(throttled: true), .throttling, .fair),
            (PressureSample(diskFree: ["/spool": 0.03]), .diskSpace, .critical),
            (PressureSample(dropRate: 0.3), .dropRate, .critical),
            (PressureSample(sendQueueFill: 0.8), .sendQueue, .serious),
            (
                {
                    var sample = PressureSample(); sample.detectionSkipRate = 0.3; return sample
                }(), .detection, .fair
            ),
            (
                {
                    var sample = PressureSample(); sample.detectionSkipRate = 1; return sample
                }(), .detection, .serious
            ),
        ]
        for (sample, factor, level) in cases {
            var evaluator = PressureEvaluator()
            let result = evaluator.evaluate(sample)
            #expect(result.assessment.level == level, "\(factor)")
            #expect(result.assessment.factors == [factor: level], "\(factor)")
            #expect(result.levelChanged)
        }
    }

    @Test func thermalZones_areJudgedAgainstTheirOwnTripPoints() {
        var evaluator = PressureEvaluator()
        let zone = { (celsius: Double) in ThermalReading(zone: "soc", celsius: celsius, passiveCelsius: 60, hotCelsius: 75, criticalCelsius: 85) }
        #expect(evaluator.evaluate(PressureSample(thermal: [zone(52)])).assessment.level == .fair)
        #expect(evaluator.evaluate(PressureSample(thermal: [zone(61)])).assessment.level == .serious)
        #expect(evaluator.evaluate(PressureSample(thermal: [zone(76)])).assessment.level == .critical)
        #expect(evaluator.evaluate(PressureSample(thermal: [zone(83.5)])).assessment.level == .shutdown)
    }

    @Test func theLevel_isTheWorstFactor_andListsEveryContributor() {
        var evaluator = PressureEvaluator()
        let result = evaluator.evaluate(PressureSample(cpuStallPercent: 25, thermal: [ThermalReading(zone: "a", celsius: 91)], throttled: true))
        #expect(result.assessment.level == .critical)
        #expect(result.assessment.factors == [.cpu: .fair, .thermal: .critical, .throttling: .fair])
        #expect(result.assessment.summary == "critical (cpu fair, thermal critical, throttling fair)")
    }

    @Test func hysteresis_keepsALevelUntilTheValueFallsClearlyBelow_andForSeveralSamples() {
        var evaluator = PressureEvaluator()
        #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 41)).assessment.level == .serious)
        // Just under the threshold, within the margin: still serious.
        for _ in 0..<5 { #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 37)).assessment.level == .serious) }
        // Clearly under: it takes three samples in a row to drop.
        #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 10)).assessment.level == .serious)
        #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 10)).assessment.level == .serious)
        let dropped = evaluator.evaluate(PressureSample(cpuStallPercent: 10))
        #expect(dropped.assessment.level == .nominal && dropped.levelChanged)
    }

    @Test func hysteresis_aRiseInTheMiddleOfACoolDownStartsItAgain() {
        var evaluator = PressureEvaluator()
        _ = evaluator.evaluate(PressureSample(memoryStallPercent: 20))
        _ = evaluator.evaluate(PressureSample(memoryStallPercent: 0))
        _ = evaluator.evaluate(PressureSample(memoryStallPercent: 0))
        #expect(evaluator.evaluate(PressureSample(memoryStallPercent: 20)).assessment.level == .serious)
        _ = evaluator.evaluate(PressureSample(memoryStallPercent: 0))
        #expect(evaluator.evaluate(PressureSample(memoryStallPercent: 0)).assessment.level == .serious)
        #expect(evaluator.evaluate(PressureSample(memoryStallPercent: 0)).assessment.level == .nominal)
    }

    @Test func noThermalZones_meansNoThermalFactor() {
        var evaluator = PressureEvaluator()
        #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 0, thermal: [])).assessment.factors[.thermal] == nil)
    }
}

@Suite struct PressureThresholdSettingsTests {
    @Test func settings_changeThresholds_andNeverRemovesALevel() throws {
        let text =
            "pressure.cpu.fair = 5\npressure.cpu.hysteresis = 1\npressure.cpu.shutdown = never\npressure.thermal.serious = 85\npressure.samples_to_fall = 1\n"
        let settings = try SettingsFile(text: text, path: "agent.conf", knownKeys: PressureThresholds.settingKeys)
        let thresholds = try PressureThresholds(settings: settings)
        #expect(thresholds.cpu.fair == 5 && thresholds.cpu.shutdown == nil && thresholds.thermal.serious == 85)
        var evaluator = PressureEvaluator(thresholds: thresholds)
        #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 6)).assessment.level == .fair)
        #expect(evaluator.evaluate(PressureSample(cpuStallPercent: 0)).assessment.level == .nominal, "one sample to fall")
    }

    @Test func settings_refuseThresholdsOutOfOrder() throws {
        let settings = try SettingsFile(text: "pressure.io.fair = 90\n", path: "agent.conf", knownKeys: PressureThresholds.settingKeys)
        #expect(throws: SettingsFile.ParseError.self) { try PressureThresholds(settings: settings) }
    }
}

@Suite struct AgentSettingsExampleTests {
    @Test func deployAgentConf_documentsTheDefaults() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/agent.conf").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let settings = try SettingsFile(text: text, path: path, knownKeys: AgentSettingKeys.all)
        #expect(try PressureThresholds(settings: settings) == PressureThresholds())
        let memory: Int? = try settings.integer(AgentSettingKeys.recordSpoolMemory, environment: [:])
        let disk: Int64? = try settings.integer(AgentSettingKeys.recordSpoolDisk, environment: [:])
        #expect(
            memory == AgentSettingKeys.defaultRecordSpoolMemoryMiB && disk == AgentSettingKeys.defaultRecordSpoolDiskMiB,
            "deploy/agent.conf gives the spool's defaults")
    }
}
