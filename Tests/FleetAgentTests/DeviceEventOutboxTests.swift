import FleetProtocol
import Testing

@testable import FleetAgent

/// The control channel's outbox: what the agent posts before its WELCOME waits for it (the
/// coordinator refuses a node's events before registration), in order, and nothing is lost.
@Suite struct DeviceEventOutboxTests {
    static func pressure(_ level: Capfleet_V1_PressureLevel) -> Capfleet_V1_AgentMessage {
        .with { $0.pressureChange = .with { $0.level = level } }
    }

    static func reply(_ id: UInt64) -> Capfleet_V1_AgentMessage {
        .with { $0.commandReply = .with { $0.commandID = id } }
    }

    @Test func messagesPostedBeforeRegistration_waitForIt_andGoInOrder() {
        let outbox = DeviceEventOutbox()
        outbox.post(Self.pressure(.fair))
        outbox.post(Self.reply(7))
        #expect(outbox.takeAll().isEmpty, "nothing goes before the WELCOME")
        outbox.setOpen(true)
        let sent = outbox.takeAll()
        #expect(sent == [Self.pressure(.fair), Self.reply(7)])
        #expect(outbox.takeAll().isEmpty, "each goes once")
    }

    @Test func whileRegisteringAgain_eventsWait_theOldestGivesWayButRepliesAreKept() {
        let outbox = DeviceEventOutbox()
        outbox.setOpen(true)
        outbox.setOpen(false)
        outbox.post(Self.reply(1))
        for _ in 0..<DeviceEventOutbox.capacity { outbox.post(Self.pressure(.serious)) }
        outbox.post(Self.pressure(.critical))
        #expect(outbox.takeAll().isEmpty)
        outbox.setOpen(true)
        let sent = outbox.takeAll()
        #expect(sent.count == DeviceEventOutbox.capacity, "at most 64 wait, of all kinds together")
        #expect(sent.first == Self.reply(1), "a reply is never dropped")
        #expect(sent.last == Self.pressure(.critical), "the newest state is kept")
    }
}
