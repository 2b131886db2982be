import CV4L2
import Foundation

/// A V4L2 node that captures video, and the stable identity the fleet knows it by.
public struct V4L2DeviceNode: Hashable, Sendable {
    public var path: String
    public var deviceID: String
    public var identitySource: String
    public var card: String
    public var driver: String
    public var busInfo: String
}

/// Finds the video capture nodes of this host. Metadata, output and codec nodes are
/// skipped (VIDIOC_QUERYCAP device caps), and each node gets an id that survives reboots
/// and re-plugging: from udev's `/dev/v4l/by-id` (vendor, model, serial), else
/// `/dev/v4l/by-path` (the port), else the driver's bus info and card name.
public enum V4L2Discovery {
    public static func captureDevices(devRoot: String = "/dev") -> [V4L2DeviceNode] {
        let links = StableDeviceIdentity.Links(
            byID: symlinkTargets(in: devRoot + "/v4l/by-id"), byPath: symlinkTargets(in: devRoot + "/v4l/by-path"))
        var nodes: [V4L2DeviceNode] = []
        var seenBusNodes: [String: Int] = [:]
        for path in videoNodes(devRoot: devRoot) {
            guard let capability = try? query(path: path), capability.capturesVideo else { continue }
            let busKey = capability.busInfo + "|" + capability.card
            let ordinal = seenBusNodes[busKey, default: 0]
            seenBusNodes[busKey] = ordinal + 1
            let identity = StableDeviceIdentity.derive(
                path: resolved(path), links: links, busInfo: capability.busInfo, card: capability.card, ordinal: ordinal)
            nodes.append(
                V4L2DeviceNode(
                    path: path, deviceID: identity.deviceID, identitySource: identity.source,
                    card: capability.card, driver: capability.driver, busInfo: capability.busInfo))
        }
        return nodes
    }

    /// The node that has `deviceID` now, after a re-plug perhaps under another /dev/videoN.
    public static func node(withID deviceID: String, devRoot: String = "/dev") -> V4L2DeviceNode? {
        captureDevices(devRoot: devRoot).first { $0.deviceID == deviceID }
    }

    struct Capability {
        var driver: String
        var card: String
        var busInfo: String
        var deviceCaps: UInt32

        var capturesVideo: Bool {
            deviceCaps & CAPFLEET_V4L2_CAP_VIDEO_CAPTURE != 0 && deviceCaps & CAPFLEET_V4L2_CAP_STREAMING != 0
        }
    }

    static func query(path: String) throws(V4L2Error) -> Capability {
        let handle = try V4L2Handle(path: path)
        return try query(handle)
    }

    static func query(_ handle: V4L2Handle) throws(V4L2Error) -> Capability {
        var capability = v4l2_capability()
        try handle.ioctl(CAPFLEET_VIDIOC_QUERYCAP, &capability, "VIDIOC_QUERYCAP")
        let caps = capability.capabilities & CAPFLEET_V4L2_CAP_DEVICE_CAPS != 0 ? capability.device_caps : capability.capabilities
        return Capability(
            driver: fixedString(capability.driver), card: fixedString(capability.card),
            busInfo: fixedString(capability.bus_info), deviceCaps: caps)
    }

    /// /dev/video0, /dev/video1, … in numeric order.
    static func videoNodes(devRoot: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: devRoot)) ?? []
        return names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix("video"), let number = Int(name.dropFirst(5)) else { return nil }
            return (number, devRoot + "/" + name)
        }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Link name → the device node it points to (resolved).
    static func symlinkTargets(in directory: String) -> [String: String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var targets: [String: String] = [:]
        for name in names { targets[name] = resolved(directory + "/" + name) }
        return targets
    }

    public static func resolved(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }
}

/// Derives a device id from what udev and the driver say. Pure, so that the rules are
/// tested without devices.
public enum StableDeviceIdentity {
    public struct Links: Sendable {
        public var byID: [String: String]
        public var byPath: [String: String]

        public init(byID: [String: String] = [:], byPath: [String: String] = [:]) {
            self.byID = byID
            self.byPath = byPath
        }
    }

    /// `ordinal` tells apart several capture nodes of one device without udev links.
    public static func derive(
        path: String, links: Links, busInfo: String, card: String, ordinal: Int
    )
        -> (deviceID: String, source: String)
    {
        if let name = links.byID.filter({ $0.value == path }).keys.sorted().first {
            return ("v4l2-" + sanitized(name), "by-id")
        }
        if let name = links.byPath.filter({ $0.value == path }).keys.sorted().first {
            return ("v4l2-" + sanitized(name), "by-path")
        }
        return ("v4l2-" + sanitized(busInfo) + "-" + sanitized(card) + "-video-index\(ordinal)", "bus-info")
    }

    /// Keeps letters, digits, '.', '_' and '-'; anything else becomes '-' (ids are typed in shells).
    public static func sanitized(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            let keep = scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "._-".unicodeScalars.contains(scalar))
            if keep { out.unicodeScalars.append(scalar) } else if out.last != "-" { out.append("-") }
        }
        while out.hasSuffix("-") { out.removeLast() }
        return out.isEmpty ? "unnamed" : out
    }
}
