import Testing

@testable import FleetCoordinator

@Suite struct NodeEventFeedTests {
    static func names(_ events: [NodeEvent]) -> [String] {
        events.map {
            switch $0 {
            case let .registered(nodeID, deviceIDs): "registered \(nodeID) \(deviceIDs.joined(separator: ","))"
            case let .offline(nodeID): "offline \(nodeID)"
            case let .device(deviceID, kind, _): "\(kind) \(deviceID)"
            case let .detection(report): "detection \(report.deviceID)"
            case let .sensorData(batch): "sensor data \(batch.deviceID)"
            case let .status(samples, _): "status \(samples.map(\.deviceID).joined(separator: ","))"
            }
        }
    }

    @Test func everyReader_seesEveryEventInTheOrderItWasPublished() async {
        let feed = NodeEventFeed()
        let takes = feed.subscribe()
        let liveFlow = feed.subscribe()
        feed.publish(.registered(nodeID: "n1", deviceIDs: ["c1", "c2"]))
        feed.publish(.device(deviceID: "c1", kind: "interrupted", detail: "unplugged"))
        feed.publish(.detection(.with { $0.deviceID = "c2" }))
        feed.publish(.offline(nodeID: "n1"))
        takes.end()
        liveFlow.end()
        let expected = ["registered n1 c1,c2", "interrupted c1", "detection c2", "offline n1"]
        var seenByTakes: [NodeEvent] = []
        for await event in takes.events { seenByTakes.append(event) }
        var seenByLiveFlow: [NodeEvent] = []
        for await event in liveFlow.events { seenByLiveFlow.append(event) }
        #expect(Self.names(seenByTakes) == expected)
        #expect(Self.names(seenByLiveFlow) == expected)
    }

    @Test func aReaderThatEnded_missesWhatFollows_andTheOthersDoNot() async {
        let feed = NodeEventFeed()
        let stopped = feed.subscribe()
        let reading = feed.subscribe()
        feed.publish(.offline(nodeID: "n1"))
        stopped.end()
        feed.publish(.offline(nodeID: "n2"))
        reading.end()
        var seenByStopped: [NodeEvent] = []
        for await event in stopped.events { seenByStopped.append(event) }
        var seenByReading: [NodeEvent] = []
        for await event in reading.events { seenByReading.append(event) }
        #expect(Self.names(seenByStopped) == ["offline n1"])
        #expect(Self.names(seenByReading) == ["offline n1", "offline n2"])
    }
}
