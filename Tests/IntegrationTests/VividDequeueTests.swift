import Foundation
import Testing

extension IntegrationTests {
    /// libv4l2 prints every failed VIDIOC_DQBUF on stderr as an error ("libv4l2: error dequeuing
    /// buf: Resource temporarily unavailable"), EAGAIN included, though from a non-blocking
    /// device EAGAIN only means "no frame yet". The agent asks the device before it dequeues,
    /// so a camera slower than the capture thread's 200 ms wait (vivid at 2 fps: every wait
    /// times out twice a frame) streams without one such line.
    @Suite struct VividDequeueTests {
        @Test func aSlowVividCamera_streamsForSeconds_withoutLibv4l2DequeueErrorsOnStderr() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let share = fleet.directory + "/vm"
            let agent = try VividRig.agentCommand(
                share: share, fleet: fleet, name: "vivid-slow", devices: ["/dev/video0"],
                options: "--format 320x180:YUYV --fps 2 --log-level info")
            let guest = """
                \(agent) > \(share)/agent.out 2> \(share)/agent.err &
                echo $! > /tmp/agent.pid
                \(VividRig.commandLoop(share: share))
                \(VividRig.stopAgent())
                """
            let rig = try VividRig(
                share: share, vividParameters: "n_devs=1 node_types=0x1",
                forwardPorts: VividRig.ports(of: fleet), guestScript: guest)
            defer { rig.stop() }
            func context() -> String {
                "\n--- VM ---\n\(rig.log.suffix(2000))\n--- agent's stderr ---\n\(rig.file("agent.err")?.suffix(3000) ?? "none")"
            }
            func frames() throws -> Int { try fleet.deviceStats().values.map { $0["frames_captured"] as? Int ?? 0 }.max() ?? 0 }
            do {
                try await fleet.waitUntil("the guest's camera streams", seconds: 180) { try frames() > 2 }
                let first = try frames()
                // Some seconds of capture: at 2 fps, dozens of waits that time out before a frame.
                try await Task.sleep(for: .seconds(10))
                try await fleet.waitUntil("more frames", seconds: 20) { try frames() >= first + 10 }
            } catch {
                Issue.record("\(error)\(context())")
                throw error
            }
            let stderr = try #require(rig.file("agent.err"), "the agent's stderr\(context())")
            #expect(!stderr.contains("dequeuing buf"), "libv4l2's EAGAIN reached the log:\(context())")
        }
    }
}
