import FleetClient
import FleetProtocol
import Testing

/// `recordings export --mux` (recordings.md, "Exporting with sound"): which files go together.
@Suite struct TakeMuxTests {
    static func segment(_ device: String, _ number: UInt32, from: UInt64, to: UInt64, state: String = "finished") -> Capfleet_V1_TakeSegmentInfo {
        .with {
            $0.deviceID = device
            $0.number = number
            $0.path = "/takes/t1/\(device)/\(device)-000\(number).mkv"
            $0.state = state
            $0.firstFleetNs = from
            $0.lastFleetNs = to
        }
    }

    static let take = Capfleet_V1_TakeInfo.with {
        $0.id = "t1"
        $0.devices = [
            .with {
                $0.deviceID = "cam"; $0.pixelFormat = "YUYV"
            },
            .with {
                $0.deviceID = "mic-a"; $0.pixelFormat = "FLAC"
            },
            .with {
                $0.deviceID = "mic-b"; $0.pixelFormat = "FLAC"
            },
        ]
        $0.segments = [
            segment("cam", 1, from: 0, to: 299), segment("cam", 2, from: 300, to: 599), segment("mic-a", 1, from: 0, to: 299),
            segment("mic-a", 2, from: 300, to: 599), segment("mic-b", 1, from: 250, to: 599, state: "open"),
        ]
    }

    @Test func eachCameraSegment_getsTheSoundOverItsSpan_finishedSegmentsOnly() throws {
        let jobs = try TakeMux.plan(take: Self.take, directory: "/out", microphones: [])
        #expect(jobs.map(\.output) == ["/out/muxed/cam-0001.mkv", "/out/muxed/cam-0002.mkv"])
        #expect(jobs[0].video == "/out/cam/cam-0001.mkv")
        #expect(jobs[0].sound == [TakeMux.Job.Sound(microphone: "mic-a", path: "/out/mic-a/mic-a-0001.mkv")])
        #expect(jobs[1].sound.map(\.path) == ["/out/mic-a/mic-a-0002.mkv"])
        let arguments = TakeMux.arguments(jobs[0])
        #expect(arguments.contains("-copyts") && arguments.contains("aresample=async=1000"))
        #expect(arguments.suffix(1) == ["/out/muxed/cam-0001.mkv"])
    }

    @Test func aMicrophoneNotInTheTake_orATakeWithoutSound_isRefused_sayingWhy() {
        #expect(throws: TakeMuxError.self) { try TakeMux.plan(take: Self.take, directory: "/out", microphones: ["mic-z"]) }
        var silent = Self.take
        silent.devices = [silent.devices[0]]
        #expect(throws: TakeMuxError.self) { try TakeMux.plan(take: silent, directory: "/out", microphones: []) }
    }
}
