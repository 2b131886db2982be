/// A media controller's topology (MEDIA_IOC_G_TOPOLOGY) as values: which entity a video node
/// is, and which camera sensor feeds it through the pipeline's enabled data links. On a raw
/// sensor's pipeline (Raspberry Pi's unicam and CFE, Rockchip, i.MX, Intel IPU) the video node
/// only receives; the frame timing belongs to the sensor's sub-device, whose VBLANK is what a
/// phase loop steers.
public struct MediaGraph: Sendable, Equatable {
    public struct Entity: Sendable, Equatable {
        public var id: UInt32
        public var name: String
        /// MEDIA_ENT_F_*.
        public var function: UInt32
    }

    /// A device node: a video node, a sub-device's node.
    public struct Interface: Sendable, Equatable {
        public var id: UInt32
        /// MEDIA_INTF_T_*.
        public var type: UInt32
        public var device: DeviceNumber
    }

    public struct Pad: Sendable, Equatable {
        public var id: UInt32
        public var entityID: UInt32
        public var isSink: Bool
    }

    /// A data link from a source pad to a sink pad, or an interface link from an interface
    /// (`source`) to its entity (`sink`).
    public struct Link: Sendable, Equatable {
        public var source: UInt32
        public var sink: UInt32
        public var isInterfaceLink: Bool
        public var isEnabled: Bool
    }

    public struct DeviceNumber: Sendable, Equatable, Hashable, CustomStringConvertible {
        public var major: UInt32
        public var minor: UInt32
        public var description: String { "\(major):\(minor)" }

        public init(major: UInt32, minor: UInt32) {
            self.major = major
            self.minor = minor
        }
    }

    public var entities: [Entity]
    public var interfaces: [Interface]
    public var pads: [Pad]
    public var links: [Link]

    public init(entities: [Entity], interfaces: [Interface], pads: [Pad], links: [Link]) {
        self.entities = entities
        self.interfaces = interfaces
        self.pads = pads
        self.links = links
    }

    /// What feeds a video node: its sensor and the sensor's sub-device node, or why not.
    public enum SensorSearch: Sendable, Equatable {
        case found(sensor: Entity, subdevice: DeviceNumber)
        /// The video node is not in this graph.
        case notHere
        /// It is, but no sensor with a sub-device node feeds it: the reason, for the operator.
        case noSensor(String)
    }

    /// Walks upstream from the video node's entity through enabled data links (sink pad to
    /// the source pad feeding it), nearest first, to the first camera sensor.
    public func sensor(feeding video: DeviceNumber, sensorFunction: UInt32, videoType: UInt32, subdeviceType: UInt32) -> SensorSearch {
        guard let node = interfaces.first(where: { $0.type == videoType && $0.device == video }),
            let start = links.first(where: { $0.isInterfaceLink && $0.source == node.id })?.sink
        else { return .notHere }
        let entityByID = Dictionary(entities.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let padByID = Dictionary(pads.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var queue = [start]
        var seen: Set<UInt32> = [start]
        var sensorsWithoutNode: [String] = []
        while !queue.isEmpty {
            let entityID = queue.removeFirst()
            if let entity = entityByID[entityID], entity.function == sensorFunction, entityID != start {
                let subdevice = links.lazy.filter { $0.isInterfaceLink && $0.sink == entityID }
                    .compactMap { link in interfaces.first { $0.id == link.source && $0.type == subdeviceType } }.first
                if let subdevice { return .found(sensor: entity, subdevice: subdevice.device) }
                sensorsWithoutNode.append(entity.name)
                continue
            }
            let sinks = pads.filter { $0.entityID == entityID && $0.isSink }.map(\.id)
            for link in links where !link.isInterfaceLink && link.isEnabled && sinks.contains(link.sink) {
                guard let upstream = padByID[link.source]?.entityID, seen.insert(upstream).inserted else { continue }
                queue.append(upstream)
            }
        }
        if let name = sensorsWithoutNode.first {
            return .noSensor("the sensor \(name) feeding it has no sub-device node to set its blanking through")
        }
        return .noSensor("no camera sensor feeds it through enabled links (a bridge or a webcam that times its own frames)")
    }
}
