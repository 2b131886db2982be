import FleetProtocol
import FleetStore

extension FleetDatabase {
    /// The device, or a NOT_FOUND reply that points at the listing.
    func existingDevice(_ deviceID: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) -> DeviceRecord? {
        guard let device = try await device(deviceID) else {
            reply.status = .failure(.notFound, "no device \(deviceID); see capfleet devices")
            return nil
        }
        return device
    }
}
