import FleetCore
import FleetProtocol
import Testing

/// How `capfleet align --trigger-line` wires the cameras it names.
@Suite struct LineWiringTests {
    func request(
        _ devices: [String], line: String = "", source: String = "", output: String = "", enabled: Bool = true
    )
        -> Capfleet_V1_ChangeFrameAlignment
    {
        .with {
            $0.deviceIds = devices
            $0.enabled = enabled
            $0.triggerLine = line
            $0.lineSource = source
            $0.outputLine = output
        }
    }

    func plan(_ request: Capfleet_V1_ChangeFrameAlignment) -> (@Sendable (String) -> LineWiring)? {
        if case let .success(plan) = LineWiring.plan(request) { return plan }
        return nil
    }

    func problem(_ request: Capfleet_V1_ChangeFrameAlignment) -> String? {
        if case let .failure(problem) = LineWiring.plan(request) { return problem.message }
        return nil
    }

    @Test func aSourceCamera_drivesItsOutput_andTheOthersExposeOnTheLine() throws {
        let wiring = try #require(plan(request(["a", "b", "c"], line: "Line0", source: "a")))
        #expect(wiring("a") == LineWiring(outputLine: "Line1"))
        #expect(wiring("b") == LineWiring(triggerLine: "Line0", sourceDeviceID: "a"))
        #expect(wiring("b").summary == "; exposes on the edges of Line0, driven by a")
        let custom = try #require(plan(request(["a", "b"], line: "Line2", source: "b", output: "Line3")))
        #expect(custom("b") == LineWiring(outputLine: "Line3") && custom("a") == LineWiring(triggerLine: "Line2", sourceDeviceID: "b"))
    }

    @Test func anExternalGenerator_drivesEveryNamedCamerasLine() throws {
        let wiring = try #require(plan(request(["b", "c"], line: "Line0", source: "external")))
        #expect(wiring("b") == LineWiring(triggerLine: "Line0") && wiring("c") == LineWiring(triggerLine: "Line0"))
        #expect(wiring("c").summary == "; exposes on the edges of Line0, driven by an external generator")
    }

    @Test func noLine_orAlignmentOff_wiresNothing() throws {
        let plain = try #require(plan(request(["a"])))
        #expect(plain("a").isEmpty)
        let off = try #require(plan(request(["a", "b"], line: "Line0", source: "a", enabled: false)))
        #expect(off("b").isEmpty)
    }

    @Test func whatCannotBeWired_isRefusedWithWhatToDo() {
        #expect(problem(request(["b", "c"], line: "Line0", source: "a"))?.contains("name the line's source a among the cameras too") == true)
        #expect(problem(request(["a"], line: "Line0", source: "a"))?.contains("besides it") == true)
        #expect(problem(request(["a", "b"], line: "Line0"))?.contains("say what drives Line0") == true)
        #expect(problem(request(["a", "b"], source: "a"))?.contains("goes with a trigger line") == true)
        #expect(problem(request(["a", "b"], line: "Line 0; rm", source: "a"))?.contains("is not a line's name") == true)
    }
}
