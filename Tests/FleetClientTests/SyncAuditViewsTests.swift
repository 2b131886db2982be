import FleetClient
import FleetProtocol
import Foundation
import Testing

/// `capfleet sync-audit` as people and programs read it: every figure beside the timecode's
/// resolution, and a camera without figures shown with why.
@Suite struct SyncAuditViewsTests {
    static func figures(_ median: Int64, _ p99: Int64, _ max: Int64, _ samples: UInt32) -> Capfleet_V1_AuditFigures {
        .with {
            $0.medianNs = median; $0.p99Ns = p99; $0.maxNs = max; $0.samples = samples
        }
    }

    static let result = Capfleet_V1_SyncAuditResult.with {
        $0.startFleetNs = 1_000_000_000
        $0.endFleetNs = 4_000_000_000
        $0.clock = .hostMonotonic
        $0.longestExposureSeconds = 0.01
        $0.exposureSpread = figures(8_180, 24_279, 24_279, 27)
        $0.cameras = [
            .with {
                $0.deviceID = "syn-1"; $0.nodeID = "node-1"; $0.status = .ok
                $0.framesSeen = 75; $0.framesRead = 42; $0.framesSkipped = 33
                $0.stampOffset = figures(5_632, -14_979, -14_979, 42)
                $0.stampUncertaintyNs = 110_719
                $0.truePhase = figures(7_831, 26_664, 26_664, 42)
                $0.exposureSeconds = 0.01
            },
            .with {
                $0.deviceID = "syn-2"; $0.nodeID = "node-2"
                $0.status = .failure(.unavailable, "no timecode in view: 43 frames decoded, none showed one")
                $0.framesSeen = 50; $0.framesSkipped = 7; $0.framesWithoutTimecode = 43
            },
        ]
    }

    @Test func theTableShowsEachCamerasFigures_whyOneHasNone_andTheResolution() {
        let table = SyncAuditViews.show(Self.result)
        #expect(table.hasPrefix("exposure audit over 3.0 s of a synthetic scene's timecode"))
        #expect(table.contains("+5.6 µs") && table.contains("-15.0 µs") && table.contains("±110.7 µs") && table.contains("26.7 µs"), "\(table)")
        #expect(table.contains("no timecode in view: 43 frames decoded"))
        #expect(table.contains("exposure spread over 27 frame intervals: median 8.2 µs, p99 24.3 µs, max 24.3 µs"))
        #expect(table.hasSuffix("resolution: exact, each picture shows its own start of exposure; exposures up to 10.00 ms long"))
    }

    @Test func aDisplaysRefreshIsSaidAsTheResolution() {
        var shown = Self.result
        shown.clock = .fleet
        shown.resolutionNs = 16_666_666
        #expect(SyncAuditViews.resolution(shown).hasPrefix("resolution: 16.67 ms (the display's refresh period)"))
        shown.resolutionNs = 0
        #expect(SyncAuditViews.resolution(shown).hasPrefix("resolution: unknown"))
    }

    @Test func theJSONHasFiguresOnlyForCamerasThatHaveThem_inSnakeCase() throws {
        let json = try FleetTables.json(SyncAuditViews.Audit(Self.result))
        #expect(json == (try JSONViewNamesTests.snakeCased(SyncAuditViews.Audit(Self.result))))
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let cameras = try #require(parsed["cameras"] as? [[String: Any]])
        #expect(parsed["clock"] as? String == "host_monotonic" && parsed["resolution_ns"] as? Int == 0)
        #expect((cameras[0]["stamp_offset"] as? [String: Any])?["max_ns"] as? Int == -14_979)
        #expect(cameras[1]["stamp_offset"] == nil && cameras[1]["ok"] as? Bool == false)
        #expect((cameras[1]["error"] as? String)?.hasPrefix("no timecode in view") == true)
    }
}
