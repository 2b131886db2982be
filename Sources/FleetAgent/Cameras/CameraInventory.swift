import FleetCapture
import FleetCore
import FleetGenICam
import Logging

/// Decides which cameras an agent runs: the V4L2 devices it was given (by path or stable
/// id) or found, and synthetic cameras where asked for or where the host has none.
enum CameraInventory {
    static func sources(for configuration: AgentConfiguration, nodeID: String, logger: Logger, wallClock: WallClock) throws -> [any CameraSource] {
        var sources: [any CameraSource] = []
        let found = (configuration.devices.isEmpty && !configuration.discoverDevices) ? [] : V4L2Discovery.captureDevices()
        var nodes: [V4L2DeviceNode] = []
        if configuration.devices.isEmpty {
            nodes = found
        } else {
            for wanted in configuration.devices {
                let resolved = V4L2Discovery.resolved(wanted)
                guard let node = found.first(where: { $0.deviceID == wanted || V4L2Discovery.resolved($0.path) == resolved }) else {
                    let listing = found.map { "\($0.deviceID) (\($0.path), \($0.card))" }
                    throw AgentError.deviceNotFound(wanted, available: listing)
                }
                nodes.append(node)
            }
        }
        for node in nodes {
            do {
                let camera = try V4L2Camera(
                    node: node, bufferCount: configuration.bufferCount, initialFormat: configuration.deviceFormat,
                    frameRate: configuration.deviceFrameRate, logger: logger, wallClock: wallClock)
                logger.info(
                    "camera found",
                    metadata: [
                        "device.id": "\(node.deviceID)", "device.path": "\(node.path)", "device.card": "\(node.card)",
                        "formats": "\(camera.device.formats.count)", "controls": "\(camera.device.controls.count)",
                        "zoom.method": "\(camera.zoomMethod?.rawValue ?? "none")",
                    ])
                sources.append(camera)
            } catch {
                // A device named on the command line must work; one merely found may be skipped.
                if !configuration.devices.isEmpty { throw AgentError.deviceUnusable(node.path, error.description) }
                logger.warning("skipping a camera that cannot be opened", metadata: ["device.path": "\(node.path)", "error": "\(error)"])
            }
        }
        // GenICam cameras where the agent was told to look (setting genicam).
        for info in GenICamDiscovery.devices(GenICamSearch(setting: configuration.genicam)) {
            do {
                let camera = try GenICamCamera(info: info, bufferCount: max(configuration.bufferCount, 8), frameRate: configuration.deviceFrameRate)
                logger.info(
                    "camera found",
                    metadata: [
                        "device.id": "\(camera.device.deviceID)", "device.address": "\(info.address)", "device.protocol": "\(info.protocolName)",
                        "formats": "\(camera.device.formats.count)",
                    ])
                sources.append(camera)
            } catch {
                logger.warning(
                    "skipping a GenICam camera that cannot be opened", metadata: ["device.address": "\(info.address)", "error": "\(error)"])
            }
        }
        let shortID = nodeID.replacingOccurrences(of: "node-", with: "").prefix(8)
        let syntheticCount = configuration.syntheticCameraCount ?? (sources.isEmpty ? 1 : 0)
        let wanted = configuration.syntheticFormat
        if syntheticCount > 0,
            !SyntheticCamera.formatList.contains(where: {
                $0.width == wanted.width && $0.height == wanted.height && $0.pixelFormat == wanted.pixelFormat && !$0.isBinned
            })
        {
            // Never a silent other format: a benchmark or a test would measure the wrong thing.
            throw AgentError.syntheticFormatUnknown(
                "\(wanted.width)x\(wanted.height):\(wanted.pixelFormat)",
                available: Array(
                    Set(
                        SyntheticCamera.formatList.filter { !$0.isBinned }.map { "\($0.width)x\($0.height):\($0.pixelFormat)" })
                ).sorted())
        }
        for index in 0..<max(syntheticCount, 0) {
            sources.append(
                SyntheticCamera(
                    deviceID: "syn-\(shortID)-\(index + 1)", name: "Synthetic camera \(index + 1)",
                    initialFormat: configuration.syntheticFormat, frameRate: configuration.syntheticFrameRate,
                    overlays: configuration.syntheticOverlays))
        }
        // An agent for microphones or sensor streams alone is fine; one with nothing to offer is not.
        guard !sources.isEmpty || configuration.offersOtherDevices else { throw AgentError.noCameras }
        return sources
    }
}
