import FleetBus
import FleetProtocol
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// Upgrading one host at a time (README, "Upgrading"): a HELLO of the coordinator's protocol
    /// major with a newer minor is welcome; another major is refused with a WELCOME saying
    /// which version the coordinator speaks.
    @Suite struct ProtocolVersionTests {
        @Test func aNewerMinorIsWelcome_anotherMajorIsRefusedSayingWhichItSpeaks() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("upgraded")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let node = try #require(try fleet.onlineNodeIDs().first)
            #expect(agent.stop() == 0)
            let context = ZMQContext()
            let keys = try fleet.agentKeys("upgraded")

            func hello(major: Capfleet_V1_ProtocolVersion, minor: UInt32) throws -> Capfleet_V1_Welcome {
                let control = try fleet.socket(.dealer, port: fleet.controlPort, keys: keys, context: context)
                try control.send(
                    try Capfleet_V1_AgentMessage.with {
                        $0.hello = .with {
                            $0.protocolVersion = major
                            $0.protocolMinor = minor
                            $0.nodeID = node
                            $0.nodeName = "upgraded"
                        }
                    }.serializedBytes(), dontWait: false)
                guard control.waitForInput(milliseconds: 5000), let reply = try control.receiveMultipart(dontWait: true),
                    case let .welcome(welcome)? = try Capfleet_V1_CoordinatorMessage(serializedBytes: reply.parts[0].array).body
                else {
                    throw HarnessError("no WELCOME to a HELLO of protocol \(major.rawValue).\(minor)")
                }
                return welcome
            }

            let newerMinor = try hello(major: WireDefaults.protocolMajor, minor: WireDefaults.protocolMinor + 3)
            #expect(newerMinor.status.isOK, "\(newerMinor.status)")
            #expect(newerMinor.protocolVersion == WireDefaults.protocolMajor)

            let otherMajor = try hello(major: Capfleet_V1_ProtocolVersion(rawValue: WireDefaults.protocolMajor.rawValue + 1)!, minor: 0)
            #expect(!otherMajor.status.isOK)
            #expect(otherMajor.status.code == .incompatible, "\(otherMajor.status)")
            #expect(
                otherMajor.status.reason.contains("speaks protocol version \(WireDefaults.protocolMajor.rawValue)"), "\(otherMajor.status.reason)")
            #expect(otherMajor.protocolVersion == WireDefaults.protocolMajor, "the WELCOME names the version the coordinator speaks")
            #expect(
                (try SecondLaneIntegrationTests.SecurityTests.rejections(fleet)["control/incompatible_version"] ?? 0) >= 1, "the refusal is counted")
        }
    }
}
