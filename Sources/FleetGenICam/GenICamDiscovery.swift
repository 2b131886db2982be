import CAravis
import FleetCore
import Foundation
import Glibc

/// A GenICam camera as discovery found it: Aravis's id to open it by, what it says it is, and
/// the stable fleet id made from its vendor, model and serial number (never its address).
public struct GenICamDeviceInfo: Sendable, Equatable {
    public var aravisID: String
    public var vendor: String
    public var model: String
    public var serial: String
    /// A GigE Vision camera's IPv4 address; a USB3 Vision camera's bus address.
    public var address: String
    /// "GigEVision" or "USB3Vision".
    public var protocolName: String

    public init(aravisID: String, vendor: String, model: String, serial: String, address: String, protocolName: String) {
        self.aravisID = aravisID
        self.vendor = vendor
        self.model = model
        self.serial = serial
        self.address = address
        self.protocolName = protocolName
    }

    /// `genicam-VENDOR-MODEL-SERIAL`, in the characters device ids allow (DeviceIdentityRule).
    public var deviceID: String {
        let parts = [vendor, model, serial].map { part in
            String(
                part.unicodeScalars.map { scalar -> Character in
                    switch scalar {
                    case "A"..."Z", "a"..."z", "0"..."9", ".", "_": Character(scalar)
                    default: "_"
                    }
                })
        }
        return String(("genicam-" + parts.joined(separator: "-")).prefix(DeviceIdentityRule.maxLength))
    }
}

/// Where an agent looks for GenICam cameras (setting `genicam`): nowhere (the default), USB3
/// Vision only, or USB3 Vision and GigE Vision on the named network interfaces (or on all).
public enum GenICamSearch: Sendable, Equatable {
    case off
    case usbOnly
    case interfaces([String])
    case allInterfaces

    /// `off`, `usb`, `all`, or interface names separated by commas (`eth1,eth2`).
    public init(setting: String) {
        let trimmed = setting.trimmingCharacters(in: .whitespaces)
        switch trimmed {
        case "", "off", "none": self = .off
        case "usb": self = .usbOnly
        case "all": self = .allInterfaces
        default: self = .interfaces(trimmed.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
    }
}

/// Finds GenICam cameras through Aravis. GigE Vision discovery broadcasts on every interface of
/// the host, so cameras answering on interfaces the agent was not told to use are left out.
public enum GenICamDiscovery {
    public static func devices(_ search: GenICamSearch) -> [GenICamDeviceInfo] {
        guard search != .off else { return [] }
        if search == .usbOnly { arv_disable_interface("GigEVision") } else { arv_enable_interface("GigEVision") }
        arv_disable_interface("Fake")
        arv_update_device_list()
        let subnets = allowedSubnets(search)
        var found: [GenICamDeviceInfo] = []
        for index in 0..<arv_get_n_devices() {
            func text(_ value: UnsafePointer<CChar>?) -> String { value.map { String(cString: $0) } ?? "" }
            let info = GenICamDeviceInfo(
                aravisID: text(arv_get_device_id(index)), vendor: text(arv_get_device_vendor(index)), model: text(arv_get_device_model(index)),
                serial: text(arv_get_device_serial_nbr(index)), address: text(arv_get_device_address(index)),
                protocolName: text(arv_get_device_protocol(index)))
            if info.protocolName == "GigEVision", let subnets, !subnets.contains(where: { $0.contains(info.address) }) { continue }
            found.append(info)
        }
        return found.sorted { $0.deviceID < $1.deviceID }
    }

    /// An IPv4 subnet of one of the host's interfaces.
    struct Subnet: Equatable {
        var address: UInt32
        var mask: UInt32
        func contains(_ dotted: String) -> Bool {
            guard let other = Self.parse(dotted) else { return false }
            return other & mask == address & mask
        }
        static func parse(_ dotted: String) -> UInt32? {
            let parts = dotted.split(separator: ".").compactMap { UInt32($0) }
            guard parts.count == 4, parts.allSatisfy({ $0 < 256 }) else { return nil }
            return parts.reduce(0) { $0 << 8 | $1 }
        }
    }

    /// The subnets of the interfaces named; nil when every interface is allowed.
    static func allowedSubnets(_ search: GenICamSearch) -> [Subnet]? {
        guard case let .interfaces(names) = search else { return search == .allInterfaces ? nil : [] }
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var subnets: [Subnet] = []
        var entry = list
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            guard let name = current.pointee.ifa_name, names.contains(String(cString: name)),
                let address = current.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                let netmask = current.pointee.ifa_netmask
            else { continue }
            let host = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
            let mask = netmask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
            subnets.append(Subnet(address: host, mask: mask))
        }
        return subnets
    }
}
