import FleetClient
import FleetProtocol
import Foundation
import Testing

/// `capfleet watch`: the frames column counts what FPS measures, and a device marked `!`
/// does not shift the columns.
@Suite struct WatchTableTests {
    static func status(_ device: String, captured: UInt64, received: UInt64) -> Capfleet_V1_DeviceStatus {
        .with {
            $0.deviceID = device; $0.nodeID = "node-1"; $0.online = true; $0.streaming = true
            $0.width = 640; $0.height = 480; $0.pixelFormat = "YUYV"
            $0.framesPerSecond = 15; $0.framesCaptured = captured; $0.framesReceived = received
        }
    }

    @Test func frames_countsTheFramesCaptured_whenNoneCrossTheNetwork() throws {
        let table = FleetTables.watch([Self.status("cam-1", captured: 450, received: 0)])
        let lines = table.split(separator: "\n").map(String.init)
        let column = try #require(lines[0].range(of: "FRAMES")).lowerBound.utf16Offset(in: lines[0])
        let cell = lines[1].dropFirst(column).prefix { $0 != " " }
        #expect(cell == "450", "FPS 15 beside FRAMES \(cell): \(table)")
    }

    @Test func aMarkedDevice_keepsEveryColumnInPlace() {
        let table = FleetTables.watch(
            [Self.status("cam-1", captured: 1, received: 1), Self.status("cam-2", captured: 2, received: 2)],
            trouble: ["cam-2": ["dropping frames"]])
        let lines = table.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = lines[0]
        for (line, device) in [(lines[1], "cam-1"), (lines[2], "cam-2")] {
            #expect(
                line.range(of: device)?.lowerBound.utf16Offset(in: line) == header.range(of: "DEVICE")?.lowerBound.utf16Offset(in: header),
                "\(device) sits under DEVICE:\n\(table)")
            #expect(line.range(of: "streaming")?.lowerBound.utf16Offset(in: line) == header.range(of: "STATE")?.lowerBound.utf16Offset(in: header))
        }
        #expect(lines[2].hasPrefix("!"))
        #expect(table.hasSuffix("! cam-2: dropping frames"))
    }
}
