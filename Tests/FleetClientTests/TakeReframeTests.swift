import FleetClient
import FleetCore
import FleetProtocol
import FleetRecording
import Testing

/// `recordings export --framed` (detection.md, "Auto-framing"): which files are reframed, and
/// where each crop puts the cut.
@Suite struct TakeReframeTests {
    @Test func aCrop_scalesThePictureSoItsPartIsTheSizeAsked_andCutsItThere() {
        let whole = TakeReframe.placement(of: nil, source: (1280, 720), size: (640, 360))
        #expect(whole == (640, 360, 0, 0))
        // The middle half of a 720p picture, at 640x360: the picture stays 1280x720, cut at 320,180.
        let middle = TakeReframe.placement(of: NormalizedRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5), source: (1280, 720), size: (640, 360))
        #expect(middle == (1280, 720, 320, 180))
        // A crop reaching past the edge is cut inside the picture.
        let edge = TakeReframe.placement(of: NormalizedRect(x: 0.8, y: 0.9, width: 0.5, height: 0.5), source: (1280, 720), size: (640, 360))
        #expect(edge == (1280, 720, 640, 360))
        #expect(TakeReframe.defaultSize(width: 1920, height: 1080) == (1280, 720))
        #expect(TakeReframe.defaultSize(width: 640, height: 480) == (640, 480))
    }

    @Test func onlyFramedCameraSegments_areReframed_eachCropFromItsFrameOn() throws {
        let take = Capfleet_V1_TakeInfo.with {
            $0.id = "t1"
            $0.startFleetNs = 10_000_000_000
            $0.devices = [
                .with {
                    $0.deviceID = "cam"; $0.pixelFormat = "NV12"; $0.width = 1280; $0.height = 720
                },
                .with {
                    $0.deviceID = "plain"; $0.pixelFormat = "NV12"; $0.width = 1280; $0.height = 720
                },
                .with {
                    $0.deviceID = "mic"; $0.pixelFormat = "FLAC"
                },
            ]
            $0.segments = ["cam", "plain", "mic"].map { device in
                .with {
                    $0.deviceID = device
                    $0.number = 1
                    $0.path = "/takes/t1/\(device)/\(device)-0001.mkv"
                    $0.state = "finished"
                }
            }
        }
        let entries: [String: [FramingEntry]] = [
            "/out/cam/cam-0001.mkv": [
                FramingEntry(sequence: 1, fleetTime: 10_000_000_000, crop: .whole),
                FramingEntry(sequence: 9, fleetTime: 10_533_333_333, crop: NormalizedRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5)),
            ]
        ]
        let jobs = try TakeReframe.plan(take: take, directory: "/out", size: nil) { entries[$0] ?? [] }
        #expect(
            jobs.map(\.camera) == ["cam"] && jobs.first?.output == "/out/framed/cam-0001.mkv" && jobs.first?.size.width == 1280
                && jobs.first?.size.height == 720)
        let commands = try #require(jobs.first.map(TakeReframe.commands)).split(separator: "\n")
        // Half a millisecond before each entry's frame (the file's times are milliseconds).
        #expect(commands.count == 2 && commands[0].hasPrefix("0.0000 ") && commands[1].hasPrefix("0.5325 "), "\(commands)")
        #expect(commands[1].contains("scale@reframe w 2560, scale@reframe h 1440, crop@reframe x 640, crop@reframe y 360;"), "\(commands)")
    }
}
