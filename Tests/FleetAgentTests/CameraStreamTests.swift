import Dispatch
import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Logging
import Synchronization
import Testing

@testable import FleetAgent

/// A camera stream on a real synthetic camera: what the control thread asks of a device is
/// done on the device's own thread and answered from there, while capture and the caller go on.
@Suite struct CameraStreamTests {
    /// A node clock with no fleet-time estimate: frames carry their local capture time only.
    struct UnsynchronisedClock: CaptureClock {
        let nodeClock = NodeClock.system
        func stamp(captureMonotonic: UInt64) -> (local: UInt64, fleet: UInt64, uncertainty: UInt64, state: ClockEstimator.State)? { nil }
    }

    /// What left the device on the live path, and what it told the coordinator.
    final class Outlet: Sendable {
        let headers = Mutex<[Capfleet_V1_FrameHeader]>([])
        let events = Mutex<[Capfleet_V1_DeviceEvent]>([])
        var frameCount: Int { headers.withLock { $0.count } }
        var lastLayout: Capfleet_V1_FrameLayout? { headers.withLock { $0.last?.layout } }
    }

    let camera = SyntheticCamera(deviceID: "syn-test-1", name: "Synthetic camera 1", frameRate: 30)
    let outlet = Outlet()
    let stream: CameraStream

    init() {
        let outlet = self.outlet
        stream = CameraStream(
            source: camera, consent: .authorized, logger: Logger(label: "capfleet.test"),
            notify: { event in outlet.events.withLock { $0.append(event) } })
        // The coordinator wants this device's frames for the whole test.
        stream.liveFlow.wanted(true, leaseNanoseconds: 3_600_000_000_000, now: MonotonicTime.now())
        stream.startCapturing(
            CaptureRoute(
                nodeID: "node-test", clock: UnsynchronisedClock(),
                publish: { _, header in
                    outlet.headers.withLock { $0.append(header) }
                }))
    }

    @Test func framesNobodyWants_stayOnTheHost_whileTheirCountsGoOn() async throws {
        try await eventually("frames flow") { outlet.frameCount >= 3 }
        stream.liveFlow.wanted(false, leaseNanoseconds: 0, now: MonotonicTime.now())
        try await Task.sleep(for: .milliseconds(100))
        let (sent, captured) = (outlet.frameCount, stream.counters.framesCaptured)
        try await Task.sleep(for: .milliseconds(300))
        #expect(outlet.frameCount == sent, "no frame left after the coordinator stopped wanting them")
        let counters = stream.counters
        #expect(counters.framesCaptured > captured && !counters.liveFlow)
        #expect(counters.bytesCaptured == counters.framesCaptured * 640 * 480 * 2 && counters.layout.width == 640)
        #expect(counters.lastSequence > 0)
        // A lease runs out by itself: a silent coordinator stops the flow.
        stream.liveFlow.wanted(true, leaseNanoseconds: 50_000_000, now: MonotonicTime.now())
        try await eventually("frames flow again") { outlet.frameCount > sent }
        try await Task.sleep(for: .milliseconds(150))
        let afterLease = outlet.frameCount
        try await Task.sleep(for: .milliseconds(200))
        #expect(outlet.frameCount == afterLease && !stream.counters.liveFlow)
    }

    /// Waits (never more than `seconds`) until `condition` holds.
    func eventually(_ what: Comment, seconds: Double = 5, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else {
                Issue.record("timed out waiting until \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test func aFormatChangeWhileFramesFlow_isAnsweredOnceDone_whileTheCallerAndCaptureGoOn() async throws {
        try await eventually("frames flow") { outlet.frameCount >= 3 }
        let wide = try #require(SyntheticCamera.formatList.firstIndex { $0.width == 1280 && $0.height == 720 && $0.pixelFormat == .nv12 })
        // Hold the device's thread, as a V4L2 stream restart answering busy would.
        let restart = DispatchSemaphore(value: 0)
        stream.onDeviceThread { restart.wait() }
        let answer = Mutex<(result: Result<Void, CaptureError>, formatThen: Int)?>(nil)
        stream.reconfigure(.format(index: wide), pressure: { .nominal }) { [camera] result in
            answer.withLock { $0 = (result, camera.activeFormatIndex) }
        }

        // The caller is back at once, with nothing answered and nothing changed yet...
        #expect(answer.withLock { $0 } == nil)
        #expect(camera.activeFormatIndex != wide)
        // ...and goes on: what needs no ioctl applies at once, and the status report reads.
        stream.setConsent(.denied)
        #expect(stream.counters.consent == .denied)
        let flowing = outlet.frameCount
        try await eventually("capture goes on while the device's thread is busy") { outlet.frameCount >= flowing + 3 }
        #expect(answer.withLock { $0 } == nil, "not answered before it is done")

        restart.signal()
        try await eventually("the format change is answered") { answer.withLock { $0 } != nil }
        let answered = try #require(answer.withLock { $0 })
        #expect(throws: Never.self) { try answered.result.get() }
        #expect(answered.formatThen == wide, "answered after the device took the format, not before")
        try await eventually("frames come in the new format") { outlet.lastLayout?.width == 1280 && outlet.lastLayout?.pixelFormat == "NV12" }
        await stream.close()
    }

    @Test func aFormatTheDeviceCannotTake_isAnsweredWithWhy_andTheStreamGoesOn() async throws {
        try await eventually("frames flow") { outlet.frameCount >= 3 }
        let answer = Mutex<Result<Void, CaptureError>?>(nil)
        stream.reconfigure(.format(index: 99), pressure: { .nominal }) { result in answer.withLock { $0 = result } }
        try await eventually("the refusal is answered") { answer.withLock { $0 } != nil }
        guard case let .failure(error)? = answer.withLock({ $0 }) else {
            Issue.record("format #99 was taken")
            return
        }
        #expect(error.description.contains("does not support format #99"), "\(error)")
        #expect(!error.isUnavailable, "the device is fine; the request is not")
        let before = outlet.frameCount
        try await eventually("frames still flow") { outlet.frameCount >= before + 3 }
        await stream.close()
    }

    @Test func pressureAtThePoliciesLevel_capsTheRunningCamera_andSaysSo() async throws {
        try await eventually("frames flow") { outlet.frameCount >= 3 }
        let applied = Mutex(false)
        stream.reconfigure(.pressurePolicy(PressurePolicy(isEnabled: true, level: .serious, frameRate: 15)), pressure: { .nominal }) { _ in
            applied.withLock { $0 = true }
        }
        try await eventually("the policy is in place") { applied.withLock { $0 } }
        stream.pressureChanged(PressureReading(level: .critical, detail: "critical (thermal critical)"))
        try await eventually("the camera runs at the cap") { camera.activeFrameRate == 15 }
        try await eventually("the cap is announced") { !outlet.events.withLock { $0 }.isEmpty }
        let event = try #require(outlet.events.withLock { $0.first })
        #expect(event.kind == .policyActed && event.deviceID == "syn-test-1")
        #expect(event.message == "pressure policy lowered the frame rate to 15 fps: pressure critical (thermal critical)")
        #expect(stream.counters.pressurePolicy.active)
        await stream.close()
    }

    @Test func stoppingCapture_letsNoFurtherFrameOut_andStopsTheCameraOnItsThread() async throws {
        try await eventually("frames flow") { outlet.frameCount >= 3 }
        stream.stopCapturing()
        #expect(!stream.counters.streaming, "reported stopped at once")
        try await eventually("the source has stopped") { stream.state.source == .stopped }
        let after = outlet.frameCount
        try await Task.sleep(for: .milliseconds(200))
        #expect(outlet.frameCount == after, "no frame after the stop")
        await stream.close()
    }
}

/// The consent an agent keeps: pushes that arrive out of order never undo a newer change.
@Suite struct ConsentBookTests {
    @Test func anOlderConsentChange_arrivingAfterANewerOne_isNotApplied() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-consent-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let book = try ConsentBook(stateDirectory: directory)
        #expect(try book.record(.init(state: .denied, reason: "revoked", changedUnixMilliseconds: 2_000), for: "cam"))
        // A registration's push, read before the revocation, delivered after it.
        #expect(try book.record(.init(state: .authorized, reason: "granted", changedUnixMilliseconds: 1_000), for: "cam") == false)
        #expect(book.state(of: "cam") == .denied)
        #expect(try ConsentBook(stateDirectory: directory).state(of: "cam") == .denied, "the stored book kept the newer change")
        // A change without a time (no record at the coordinator) always applies: it locks.
        #expect(try book.record(.init(state: .notDetermined, reason: "", changedUnixMilliseconds: 0), for: "cam"))
        #expect(book.state(of: "cam") == .notDetermined)
        #expect(try book.record(.init(state: .authorized, reason: "granted again", changedUnixMilliseconds: 3_000), for: "cam"))
        #expect(book.state(of: "cam") == .authorized)
    }
}
