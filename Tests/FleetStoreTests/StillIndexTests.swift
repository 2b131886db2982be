import FleetCore
import FleetStore
import Foundation
import Testing

/// The stills index in a real SQLite file: a request, its cameras' answers, the copies
/// stored, and the request's end once every camera is stored or failed.
@Suite final class StillIndexTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-stills-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func image(_ device: String, _ number: Int) -> StillImageRecord {
        StillImageRecord(
            stillId: "still-1", deviceId: device, number: number, fileName: "\(device)-\(number).png",
            agentPath: "/var/lib/capfleet-agent/recordings/stills/still-1/\(device)-\(number).png", sizeBytes: 1_000,
            sha256: String(repeating: "ab", count: 32), mediaType: "image/png", sidecarJson: "{}", requestedFleetNs: 100,
            fleetTimeNs: 90, spreadNs: -10, ev: 0, width: 4608, height: 3456, pixelFormat: "YUYV")
    }

    @Test func aStill_isStoredOnceEveryCameraIsStoredOrFailed_andDeletingItRemovesEverything() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let still = StillRecord(
            id: "still-1", name: "rig", requestedFleetNs: 100, encoding: "png", bracket: [-1, 0, 1], directory: directory + "/still-1",
            createdAt: 1_000, createdBy: "ana")
        try await store.createStill(
            still,
            devices: [
                StillDeviceRecord(stillId: "still-1", deviceId: "cam-a", nodeId: "n1"),
                StillDeviceRecord(stillId: "still-1", deviceId: "cam-b", nodeId: "n2"),
                StillDeviceRecord(stillId: "still-1", deviceId: "cam-c", nodeId: "n2", state: .failed, error: "consent is denied"),
            ], audit: AuditEntry(at: 1_000, actor: "ana", action: "still.take", target: "still-1", outcome: "ok"))
        #expect(try await store.still(id: "still-1")?.still.bracketEV == [-1, 0, 1])

        try await store.recordStillCapture(
            stillID: "still-1", deviceID: "cam-a", images: [image("cam-a", 1), image("cam-a", 2)], awayNs: 5, failure: nil)
        // An answer heard twice indexes nothing twice.
        try await store.recordStillCapture(stillID: "still-1", deviceID: "cam-a", images: [image("cam-a", 1)], awayNs: 5, failure: nil)
        try await store.recordStillCapture(stillID: "still-1", deviceID: "cam-b", images: [], awayNs: 0, failure: "captured no frame in time")
        var entry = try #require(try await store.still(id: "still-1"))
        #expect(entry.images.count == 2 && entry.devices.map(\.state) == [.collecting, .failed, .failed])
        #expect(try await store.uncollectedStillImages().map(\.image.number) == [1, 2])

        try await store.markStillImageStored(stillID: "still-1", deviceID: "cam-a", number: 1, path: directory + "/a1.png", at: 2_000)
        entry = try #require(try await store.still(id: "still-1"))
        #expect(entry.devices[0].state == .collecting && entry.still.storedAt == nil, "one picture of two is here")
        try await store.markStillImageStored(stillID: "still-1", deviceID: "cam-a", number: 2, path: directory + "/a2.png", at: 2_500)
        entry = try #require(try await store.still(id: "still-1"))
        #expect(entry.devices[0].state == .stored && entry.still.storedAt == 2_500)
        #expect(try await store.uncollectedStillImages().isEmpty)

        try await store.deleteStill(
            id: "still-1", audit: AuditEntry(at: 3_000, actor: "ana", action: "still.delete", target: "still-1", outcome: "ok"))
        #expect(try await store.still(id: "still-1") == nil)
        #expect(try await store.stills().isEmpty)
        await #expect(throws: StoreError.self) {
            try await store.recordStillCapture(stillID: "still-1", deviceID: "cam-a", images: [], awayNs: 0, failure: nil)
        }
    }

    @Test func unansweredCameras_failWithTheReason_andEndTheStill() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        try await store.createStill(
            StillRecord(
                id: "still-1", name: "still-1", requestedFleetNs: 1, encoding: "jpeg", bracket: [], directory: directory,
                createdAt: 1, createdBy: "ana"),
            devices: [StillDeviceRecord(stillId: "still-1", deviceId: "cam-a", nodeId: "n1")],
            audit: AuditEntry(at: 1, actor: "ana", action: "still.take", target: "still-1", outcome: "ok"))
        try await store.failUnansweredStillDevices(stillID: "still-1", reason: "the coordinator stopped", at: 9)
        let entry = try #require(try await store.still(id: "still-1"))
        #expect(entry.devices.first?.state == .failed && entry.devices.first?.error == "the coordinator stopped" && entry.still.storedAt == 9)
    }
}
