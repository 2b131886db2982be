import FleetHost
import Foundation
import Glibc
import Testing

/// The real /dev/cpu_dma_latency where the test runs as root (as CI does): the kernel's
/// aggregate limit reads back as the device's value.
@Suite(.serialized) struct CPULatencyRequestTests {
    static var canWriteDevice: Bool { getuid() == 0 && access(CPULatencyRequest.devicePath, W_OK) == 0 }

    @Test(.enabled(if: canWriteDevice, "needs root and /dev/cpu_dma_latency"))
    func aHeldRequest_limitsTheHost_untilItGoes() throws {
        let before = try #require(CPULatencyRequest.current(), "the device reads as the limit in force")
        // Below whatever else on this host asks for, so the aggregate shows ours.
        let asked = max(0, min(before, 1_000) - 1)
        var request: CPULatencyRequest? = try CPULatencyRequest(microseconds: asked)
        #expect(CPULatencyRequest.current() == asked)
        #expect(request?.microseconds == asked)
        request = nil
        #expect(CPULatencyRequest.current() == before, "the kernel drops the request with its file")
    }

    @Test func aMissingDevice_saysWhatToDo() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("no-cpu-latency-\(getpid())").path
        let error = #expect(throws: CPULatencyRequestError.self) { try CPULatencyRequest(microseconds: 0, path: path) }
        #expect(error?.cause.errno == ENOENT)
        #expect(error?.description.contains("cannot hold the CPU latency limit of 0 µs (setting cpu_latency_us)") == true)
        #expect(error?.description.contains("remove the setting cpu_latency_us") == true)
        #expect(CPULatencyRequest.current(path: path) == nil)
    }

    @Test func aDeviceThatRefusesTheWrite_isAnError_notAQuietNoOp() throws {
        // /dev/full takes the open and refuses every write (ENOSPC).
        let error = #expect(throws: CPULatencyRequestError.self) { try CPULatencyRequest(microseconds: 5, path: "/dev/full") }
        #expect(error?.cause.call == "write")
        #expect(error?.cause.errno == ENOSPC)
    }
}
