import FleetClient
import FleetProtocol
import Testing

/// How a take's sync report is shown (recordings show, --json, the export's sync-report.json)
/// and how `record start --require-spread` reads its value.
@Suite struct TakeSyncViewsTests {
    static let failed = Capfleet_V1_TakeSyncReport.with {
        $0.verdict = .failed
        $0.failures = ["cam-2 dropped 3 frames (late 2, out of buffers 1)"]
        $0.requirements = .with {
            $0.maxSpreadNs = 1_000_000
            $0.noDrops = true
        }
        $0.phaseSpread = .with {
            $0.medianNs = 20_000
            $0.p99Ns = 180_000
            $0.maxNs = 250_000
            $0.samples = 12
        }
        $0.cameras = [
            .with {
                $0.deviceID = "cam-2"; $0.nodeID = "n1"; $0.worstSync = .locked; $0.worstAlignment = .aligned; $0.steered = true
                $0.framesCaptured = 357; $0.framesExpected = 360; $0.writerHeadroom = 0.75; $0.statusReports = 12
                $0.drops = .with {
                    $0.late = 2
                    $0.outOfBuffers = 1
                }
            },
            .with {
                $0.deviceID = "cam-3"; $0.nodeID = "n2"; $0.worstSync = .locked; $0.worstAlignment = .unaligned
                $0.writerHeadroom = -1; $0.statusReports = 12
            },
        ]
    }

    @Test func show_saysTheVerdictEachFailureTheSpread_andARowPerCamera() {
        let text = TakeSyncViews.lines(Self.failed).joined(separator: "\n")
        #expect(text.contains("sync: FAILED (spread ≤ 1 ms, no drops): 1 requirement(s) not met"), "\(text)")
        #expect(text.contains("    - cam-2 dropped 3 frames (late 2, out of buffers 1)"))
        #expect(text.contains("phase spread across cameras: median 20 µs, p99 180 µs, max 250 µs (12 reports)"))
        let rows = text.split(separator: "\n").filter { $0.hasPrefix("cam-") }
        #expect(rows.count == 2)
        #expect(rows[0].contains("357/360") && rows[0].contains("75%"), "\(rows[0])")
        #expect(rows[1].contains("unaligned (free-running)") && rows[1].hasSuffix("12"), "an unreported writer shows as -: \(rows[1])")
        var off = Self.failed
        off.cameras[1].worstAlignment = .off
        let noGrid = TakeSyncViews.lines(off).joined(separator: "\n").split(separator: "\n").first { $0.hasPrefix("cam-3") } ?? ""
        #expect(noGrid.contains("off (free-running)  -"), "no grid, no phase: \(noGrid)")
    }

    @Test func theJSONView_namesItsFieldsInSnakeCase_andLeavesOutWhatWasNotReported() throws {
        try JSONViewNamesTests.expectSnakeCase(TakeSyncViews.Report(Self.failed))
        let json = try FleetTables.json(TakeSyncViews.Report(Self.failed))
        #expect(json.contains("\"verdict\" : \"failed\"") && json.contains("\"max_spread_ns\" : 1000000"), "\(json)")
        #expect(json.components(separatedBy: "\"writer_headroom\"").count == 2, "only the camera that reported its queue: \(json)")
    }

    @Test func theRequiredSpread_isReadInItsUnit_andNonsenseRefused() {
        #expect(TakeSyncViews.spreadNanoseconds("1ms") == 1_000_000)
        #expect(TakeSyncViews.spreadNanoseconds("250us") == 250_000)
        #expect(TakeSyncViews.spreadNanoseconds("250µs") == 250_000)
        #expect(TakeSyncViews.spreadNanoseconds("0.5ms") == 500_000)
        #expect(TakeSyncViews.spreadNanoseconds("800ns") == 800)
        for nonsense in ["1", "ms", "-1ms", "0ms", "2s", "fast"] {
            #expect(TakeSyncViews.spreadNanoseconds(nonsense) == nil, "\(nonsense)")
        }
    }
}
