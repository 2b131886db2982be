import FleetCore
import FleetProtocol
import FleetStore

extension DeviceOpticsRecord {
    var wire: Capfleet_V1_DeviceOptics {
        var wire = optics.wire
        wire.changedBy = changedBy
        wire.changedUnixMs = changedAt
        return wire
    }
}
