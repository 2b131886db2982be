import FleetClient
import FleetProtocol
import Testing

/// `capfleet still` and `stills show`: the header's spread is the rows' measure.
@Suite struct StillViewsTests {
    static func still(_ offsets: [Int64]) -> Capfleet_V1_StillInfo {
        .with { still in
            still.id = "still-1"; still.name = "still-1"; still.state = "stored"; still.encoding = "png"; still.requestedFleetNs = 5_000
            still.devices = offsets.enumerated().map { index, offset in
                .with { device in
                    device.deviceID = "cam-\(index + 1)"; device.state = "stored"
                    device.images = [
                        .with {
                            $0.number = 1; $0.spreadNs = offset; $0.stored = true; $0.fileName = "cam-\(index + 1)-1.png"
                        }
                    ]
                }
            }
            if let first = offsets.min(), let last = offsets.max() { still.spreadNs = UInt64(last - first) }
        }
    }

    @Test func oneCamera_theHeaderShowsItsPicturesSpreadFromTheInstant() {
        let shown = StillViews.show(Self.still([60_812_000]))
        let header = shown.split(separator: "\n")[0]
        #expect(header.contains("spread +60.812 ms from the instant, png"), "\(header)")
        #expect(!header.contains("+0.000 ms"))
        #expect(shown.contains("+60.812 ms"), "the row says the same")
    }

    @Test func severalCameras_theHeaderShowsTheRangeAndHowFarApartTheyAre() {
        let header = StillViews.spread(Self.still([58_100_000, -1_500_000, 60_812_000]))
        #expect(header == "spread -1.500 to +60.812 ms from the instant, 62.312 ms apart across the cameras")
        #expect(StillViews.spread(Self.still([])) == "no picture yet")
    }
}
