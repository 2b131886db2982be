import FleetCore
import Testing

@Suite struct LiveDemandBookTests {
    @Test func theFirstConsumer_wakesTheFlow_andTheNodeHearsItsWholeSet() {
        var book = LiveDemandBook()
        #expect(book.handle(.located(deviceID: "cam-1", nodeID: "n1")).isEmpty, "nothing is wanted yet: nobody is told")
        _ = book.handle(.located(deviceID: "cam-2", nodeID: "n1"))
        let first = book.handle(.wanted(deviceID: "cam-1", by: .viewers))
        #expect(
            first == [.flowWanted(deviceID: "cam-1", consumers: ["viewers"]), .announce(nodeID: "n1", deviceIDs: ["cam-1"], encodedDeviceIDs: [])])
        let second = book.handle(.wanted(deviceID: "cam-2", by: .snapshot(7)))
        #expect(second.last == .announce(nodeID: "n1", deviceIDs: ["cam-1", "cam-2"], encodedDeviceIDs: []))
        // A second consumer of a flowing device changes nothing on the wire.
        #expect(book.handle(.wanted(deviceID: "cam-1", by: .snapshot(8))).isEmpty)
        #expect(book.consumerNames(of: "cam-1") == ["snapshot 8", "viewers"])
    }

    @Test func theLastConsumerGoing_stopsTheFlow_atOnce() {
        var book = LiveDemandBook()
        _ = book.handle(.located(deviceID: "cam-1", nodeID: "n1"))
        _ = book.handle(.wanted(deviceID: "cam-1", by: .viewers))
        _ = book.handle(.wanted(deviceID: "cam-1", by: .snapshot(1)))
        #expect(book.handle(.unwanted(deviceID: "cam-1", by: .viewers)).isEmpty, "the snapshot still waits")
        #expect(
            book.handle(.unwanted(deviceID: "cam-1", by: .snapshot(1)))
                == [.flowUnwanted(deviceID: "cam-1"), .announce(nodeID: "n1", deviceIDs: [], encodedDeviceIDs: [])])
        #expect(book.consumerCount(of: "cam-1") == 0)
        // A consumer that was never there is nothing to stop.
        #expect(book.handle(.unwanted(deviceID: "cam-1", by: .viewers)).isEmpty)
    }

    @Test func viewersOfTheEncodedStream_wantPacketsAndNoRawFrame_andEachKindChangeIsAnnounced() {
        var book = LiveDemandBook()
        _ = book.handle(.located(deviceID: "cam-1", nodeID: "n1"))
        #expect(
            book.handle(.wanted(deviceID: "cam-1", by: .encodedViewers))
                == [
                    .flowWanted(deviceID: "cam-1", consumers: ["viewers of the encoded stream"]),
                    .announce(nodeID: "n1", deviceIDs: [], encodedDeviceIDs: ["cam-1"]),
                ])
        // A raw viewer joining changes what the node sends: it hears both sets.
        #expect(book.handle(.wanted(deviceID: "cam-1", by: .viewers)) == [.announce(nodeID: "n1", deviceIDs: ["cam-1"], encodedDeviceIDs: ["cam-1"])])
        #expect(book.handle(.wanted(deviceID: "cam-1", by: .snapshot(3))).isEmpty, "raw frames already flow")
        #expect(
            book.handle(.unwanted(deviceID: "cam-1", by: .encodedViewers)) == [.announce(nodeID: "n1", deviceIDs: ["cam-1"], encodedDeviceIDs: [])])
        #expect(book.handle(.renewalDue) == [.announce(nodeID: "n1", deviceIDs: ["cam-1"], encodedDeviceIDs: [])])
    }

    @Test func renewals_goOnlyToNodesWithWantedDevices_everySecond() {
        var book = LiveDemandBook()
        _ = book.handle(.located(deviceID: "a", nodeID: "n1"))
        _ = book.handle(.located(deviceID: "b", nodeID: "n2"))
        #expect(book.handle(.renewalDue).isEmpty, "a quiet fleet sends nothing")
        _ = book.handle(.wanted(deviceID: "b", by: .viewers))
        #expect(book.handle(.renewalDue) == [.announce(nodeID: "n2", deviceIDs: ["b"], encodedDeviceIDs: [])])
    }

    @Test func aDeviceWantedBeforeItRegisters_isAskedForWhenItDoes_andARegisteringNodeHearsItsSet() {
        var book = LiveDemandBook()
        let early = book.handle(.wanted(deviceID: "cam-9", by: .viewers))
        #expect(early == [.flowWanted(deviceID: "cam-9", consumers: ["viewers"])], "no node to tell yet")
        #expect(book.handle(.located(deviceID: "cam-9", nodeID: "n3")) == [.announce(nodeID: "n3", deviceIDs: ["cam-9"], encodedDeviceIDs: [])])
        // A restarted agent wants nothing until told: its registration tells it.
        #expect(book.handle(.nodeRegistered(nodeID: "n3")) == [.announce(nodeID: "n3", deviceIDs: ["cam-9"], encodedDeviceIDs: [])])
        #expect(book.handle(.nodeRegistered(nodeID: "n4")).isEmpty)
    }

    @Test func aDeviceMovingNodes_isStoppedOnTheOld_andAskedOfTheNew() {
        var book = LiveDemandBook()
        _ = book.handle(.located(deviceID: "cam-1", nodeID: "n1"))
        _ = book.handle(.wanted(deviceID: "cam-1", by: .viewers))
        #expect(
            book.handle(.located(deviceID: "cam-1", nodeID: "n2"))
                == [
                    .announce(nodeID: "n1", deviceIDs: [], encodedDeviceIDs: []), .announce(nodeID: "n2", deviceIDs: ["cam-1"], encodedDeviceIDs: []),
                ])
    }

    @Test func forgottenDevices_stopFlowing_andLeaveNoConsumers() {
        var book = LiveDemandBook()
        _ = book.handle(.located(deviceID: "a", nodeID: "n1"))
        _ = book.handle(.located(deviceID: "b", nodeID: "n1"))
        _ = book.handle(.wanted(deviceID: "a", by: .viewers))
        let actions = book.handle(.forgotten(deviceIDs: ["a", "b"]))
        #expect(actions == [.flowUnwanted(deviceID: "a"), .announce(nodeID: "n1", deviceIDs: [], encodedDeviceIDs: [])])
        #expect(book.handle(.renewalDue).isEmpty)
    }
}

@Suite struct AgentRunCapturesTests {
    @Test func reportsOfOneRun_keepTheLargestCounts_andANewProcessStartsANewRun() {
        var captures = AgentRunCaptures()
        captures.registered(agentInstance: "a")
        captures.report(CaptureTally(frames: 100, bytes: 1000))
        captures.report(CaptureTally(frames: 90, bytes: 900))  // an older report arriving late
        #expect(captures.total == CaptureTally(frames: 100, bytes: 1000))
        captures.registered(agentInstance: "a")
        #expect(captures.total == CaptureTally(frames: 100, bytes: 1000), "the same process re-registering is no new run")
        captures.registered(agentInstance: "b")
        captures.report(CaptureTally(frames: 5, bytes: 50))
        #expect(captures.total == CaptureTally(frames: 105, bytes: 1050), "the new process's frames add to the earlier ones")
    }

    @Test func countsStoredWithTheirRun_goOnAcrossACoordinatorRestart_withoutCountingTwice() {
        // What the coordinator stored before it restarted, while agent process "a" ran on.
        var resumed = AgentRunCaptures(
            agentInstance: "a", earlierRuns: CaptureTally(frames: 1000, bytes: 10_000),
            currentRun: CaptureTally(frames: 300, bytes: 3000))
        resumed.registered(agentInstance: "a")
        resumed.report(CaptureTally(frames: 320, bytes: 3200))
        #expect(resumed.total == CaptureTally(frames: 1320, bytes: 13_200))
    }
}
