import Testing

@testable import FleetCapture

/// Finding the sensor behind a video node in media controller graphs shaped like real
/// pipelines (a Raspberry Pi camera: sensor → CSI-2 receiver → video node).
struct MediaGraphTests {
    // linux/media.h
    static let sensorFunction: UInt32 = 0x0002_0001
    static let bridgeFunction: UInt32 = 0x0000_4002
    static let ioFunction: UInt32 = 0x0001_0001
    static let videoType: UInt32 = 0x200
    static let subdeviceType: UInt32 = 0x203
    static let video = MediaGraph.DeviceNumber(major: 81, minor: 0)
    static let sensorNode = MediaGraph.DeviceNumber(major: 81, minor: 5)

    /// imx219 (pad 1 source) → csi2 (pad 2 sink, pad 3 source) → unicam-image (pad 4 sink).
    static func piCamera(sensorLinkEnabled: Bool = true, sensorHasNode: Bool = true) -> MediaGraph {
        var links: [MediaGraph.Link] = [
            .init(source: 1, sink: 2, isInterfaceLink: false, isEnabled: sensorLinkEnabled),
            .init(source: 3, sink: 4, isInterfaceLink: false, isEnabled: true),
            .init(source: 100, sink: 30, isInterfaceLink: true, isEnabled: true),
        ]
        var interfaces: [MediaGraph.Interface] = [.init(id: 100, type: videoType, device: video)]
        if sensorHasNode {
            interfaces.append(.init(id: 101, type: subdeviceType, device: sensorNode))
            links.append(.init(source: 101, sink: 10, isInterfaceLink: true, isEnabled: true))
        }
        return MediaGraph(
            entities: [
                .init(id: 10, name: "imx219 10-0010", function: sensorFunction),
                .init(id: 20, name: "csi2", function: bridgeFunction),
                .init(id: 30, name: "unicam-image", function: ioFunction),
            ],
            interfaces: interfaces,
            pads: [
                .init(id: 1, entityID: 10, isSink: false), .init(id: 2, entityID: 20, isSink: true),
                .init(id: 3, entityID: 20, isSink: false), .init(id: 4, entityID: 30, isSink: true),
            ],
            links: links)
    }

    func search(_ graph: MediaGraph, for node: MediaGraph.DeviceNumber = video) -> MediaGraph.SensorSearch {
        graph.sensor(feeding: node, sensorFunction: Self.sensorFunction, videoType: Self.videoType, subdeviceType: Self.subdeviceType)
    }

    @Test func theSensorBehindABridge_isFound_withItsSubdeviceNode() {
        guard case let .found(sensor, subdevice) = search(Self.piCamera()) else {
            Issue.record("no sensor found: \(search(Self.piCamera()))")
            return
        }
        #expect(sensor.name == "imx219 10-0010")
        #expect(subdevice == Self.sensorNode)
    }

    @Test func aDisabledLink_feedsNothing() {
        guard case let .noSensor(reason) = search(Self.piCamera(sensorLinkEnabled: false)) else {
            Issue.record("a sensor behind a disabled link")
            return
        }
        #expect(reason.contains("no camera sensor feeds it"))
    }

    @Test func aSensorWithoutASubdeviceNode_isNamedAsTheReason() {
        guard case let .noSensor(reason) = search(Self.piCamera(sensorHasNode: false)) else {
            Issue.record("a sensor without its node")
            return
        }
        #expect(reason.contains("imx219"))
    }

    @Test func anotherVideoNode_isNotInThisGraph() {
        #expect(search(Self.piCamera(), for: .init(major: 81, minor: 9)) == .notHere)
    }

    /// A webcam's graph: the UVC entity feeds the video node; no sensor entity anywhere.
    @Test func aWebcam_hasNoSensorToSteer() {
        let graph = MediaGraph(
            entities: [.init(id: 1, name: "HD Webcam", function: Self.ioFunction), .init(id: 3, name: "Extension 4", function: 0x0003_0001)],
            interfaces: [.init(id: 2, type: Self.videoType, device: Self.video)],
            pads: [.init(id: 4, entityID: 1, isSink: true), .init(id: 5, entityID: 3, isSink: false)],
            links: [
                .init(source: 2, sink: 1, isInterfaceLink: true, isEnabled: true), .init(source: 5, sink: 4, isInterfaceLink: false, isEnabled: true),
            ])
        guard case .noSensor = search(graph) else {
            Issue.record("\(search(graph))")
            return
        }
    }
}
