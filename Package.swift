// swift-tools-version: 6.1
// SPDX-License-Identifier: Apache-2.0
import PackageDescription

let package = Package(
    name: "CaptureFleet",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "capfleet", targets: ["capfleet"]),
        // The test bed's network, run by deploy/netns-fleet.sh; not shipped.
        .executable(name: "capfleet-relay", targets: ["capfleet-relay"]),
        // Benchmarks that print their figures; not shipped.
        .executable(name: "capfleet-bench", targets: ["capfleet-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The coordinator's HTTP side: Hummingbird 2 serves /metrics and the dashboard (alert
        // webhooks are plain HTTP/1.1 POSTs on a socket of FleetHTTP's own). Without
        // Hummingbird's default traits: no swift-configuration, no full Foundation.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        // The dashboard's one live connection per browser.
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // Thin C shims over Debian's libraries.
        .systemLibrary(name: "CZeroMQ", path: "Sources/CZeroMQ"),
        .systemLibrary(name: "CV4L2", path: "Sources/CV4L2"),
        .systemLibrary(name: "CAlsa", path: "Sources/CAlsa"),
        .systemLibrary(name: "CSpeexDSP", path: "Sources/CSpeexDSP"),
        .systemLibrary(name: "CAravis", path: "Sources/CAravis", pkgConfig: "aravis-0.8"),
        .systemLibrary(name: "CAVFormat", path: "Sources/CAVFormat"),
        .systemLibrary(name: "CAVCodec", path: "Sources/CAVCodec"),
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto"),
        .systemLibrary(name: "CTurboJPEG", path: "Sources/CTurboJPEG"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .systemLibrary(name: "CZbar", path: "Sources/CZbar"),
        .systemLibrary(name: "CQREncode", path: "Sources/CQREncode"),
        // Linux calls Swift cannot import (thread names through prctl).
        .target(name: "CPlatform"),
        // Threads the daemons own for blocking work (one primitive: a thread, an inbox, a
        // stop, an async join, and state bound to it), and system calls with typed errors.
        .target(name: "FleetSystem", dependencies: ["CPlatform"]),

        // Wire contract: generated from proto-docs/*.proto, no I/O.
        .target(
            name: "FleetProtocol",
            dependencies: [
                .product(name: "SwiftProtobuf", package: "swift-protobuf")
            ],
            // What the code was generated from (scripts/generate-protos.sh --check-recorded).
            exclude: ["Generated/generated-from.sha256"]),
        // Pure state machines and value types: no ZeroMQ, no SQLite, no ioctl.
        .target(name: "FleetCore", dependencies: ["FleetProtocol"]),
        // ZeroMQ sockets on threads they own, bridged to async code.
        .target(
            name: "FleetBus",
            dependencies: [
                "FleetSystem", "CZeroMQ", "FleetCore",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // SQLite through GRDB.
        .target(
            name: "FleetStore",
            dependencies: [
                "FleetSystem", "FleetCore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        // What strains the host: PSI, thermal zones, power, disks, read from a configurable root.
        .target(name: "FleetHost", dependencies: ["FleetCore", "FleetSystem", "CPlatform"]),
        // Camera sources: the synthetic test-pattern camera and V4L2.
        .target(
            name: "FleetCapture",
            dependencies: [
                "FleetSystem", "CV4L2", "CQREncode", "FleetCore",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Microphones: ALSA capture devices, found, probed and read with the driver's timestamps;
        // their processing (speexdsp's noise suppression).
        .target(name: "FleetAudio", dependencies: ["CAlsa", "CSpeexDSP", "FleetCore"]),
        // Industrial cameras: GigE Vision and USB3 Vision through Aravis, as camera sources.
        .target(name: "FleetGenICam", dependencies: ["CAravis", "FleetCapture", "FleetCore", "FleetSystem"]),
        // OpenCV's cascade face detector behind a C interface (OpenCV 4 is C++ only).
        .target(
            name: "CFaceDetect",
            cxxSettings: [.unsafeFlags(["-I/usr/include/opencv4"])],
            linkerSettings: [.linkedLibrary("opencv_objdetect"), .linkedLibrary("opencv_imgproc"), .linkedLibrary("opencv_core")]),
        // What the agent finds in its frames: codes (ZBar) and faces (OpenCV, behind a C shim).
        .target(name: "FleetDetection", dependencies: ["CZbar", "CFaceDetect", "FleetCore"]),
        // Pictures people look at: camera pixels to RGB, scaling, JPEG (TurboJPEG) and PNG
        // (zlib), a bitmap font and the contact sheet; for the agent's previews and the CLI.
        .target(name: "FleetImaging", dependencies: ["CTurboJPEG", "CZlib", "FleetCore"]),
        // What both daemons are built from: parts that stop at graceful shutdown, in reverse
        // order of their group, and work on a beat of an injected clock.
        .target(
            name: "FleetDaemon",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // Takes' encoders on the camera's host: FFV1, H.264 and HEVC through libavcodec, the
        // hardware encoders a host has (V4L2 memory-to-memory, VA-API) found and tried at start.
        .target(name: "FleetEncoding", dependencies: ["CAVCodec", "FleetCore"]),
        .target(
            name: "FleetAgent",
            dependencies: [
                "FleetDaemon", "FleetSystem", "FleetBus", "FleetCapture", "FleetCore", "FleetDetection", "FleetEncoding", "FleetHost", "FleetImaging",
                "FleetProtocol", "FleetRecording", "FleetAudio", "FleetGenICam", "FleetStorage",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The test bed's network: a TCP relay applying delay, jitter, loss stalls and spikes.
        .target(name: "FleetRelay", dependencies: ["FleetCore", "FleetSystem", "CPlatform"]),
        // Recordings on disk: Matroska segments written with libavformat (muxing only), their
        // checksums, verification and repair; indexed behind SegmentIndexing (the coordinator's
        // database, an agent's manifests), so the agent links no database.
        .target(name: "FleetRecording", dependencies: ["FleetSystem", "CAVFormat", "CCrypto", "FleetCore", "FleetProtocol"]),
        // Storage destinations takes are offloaded to: Debian's rclone run for one destination,
        // and one segment's copy proved by its SHA-256 (the decisions are FleetCore's).
        .target(name: "FleetStorage", dependencies: ["FleetCore"]),
        // HTTP: a Hummingbird server with a bound port, TLS and a graceful stop, and local-only
        // webhooks posted on a blocking socket with a deadline.
        .target(
            name: "FleetHTTP",
            dependencies: [
                "CCrypto", "FleetSystem",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        .target(
            name: "FleetCoordinator",
            dependencies: [
                "FleetDaemon", "FleetSystem", "FleetBus", "FleetStore", "FleetRecording", "FleetCore", "FleetHost", "FleetProtocol", "FleetHTTP",
                "FleetImaging", "FleetStorage",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The operator's side: requests to the coordinator's operator endpoint, and how
        // their answers are shown.
        .target(
            name: "FleetClient",
            dependencies: [
                "FleetBus", "FleetCore", "FleetProtocol", "FleetRecording",
            ]),
        // Both daemons' settings: file, CAPFLEET_* variables and flags read and checked in one
        // place, beside neither daemon's core, so that the CLI only hands them over.
        .target(
            name: "FleetSettings",
            dependencies: [
                "FleetAgent", "FleetClient", "FleetCoordinator", "FleetCore", "FleetHTTP", "FleetProtocol",
            ]),
        .executableTarget(
            name: "capfleet",
            dependencies: [
                "FleetAgent", "FleetCoordinator", "FleetClient", "FleetBus", "FleetCapture", "FleetCore", "FleetHost", "FleetImaging",
                "FleetProtocol", "FleetSettings", "FleetStore",
                "FleetSystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),

        .executableTarget(
            name: "capfleet-relay",
            dependencies: [
                "FleetRelay",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        // Fleets of `capfleet` child processes on this machine (coordinator, enrolled agents,
        // credentials, readiness, shutdown), shared by the integration tests and the benchmarks.
        .target(name: "FleetTestSupport", dependencies: ["FleetBus", "FleetClient", "FleetHost", "FleetProtocol", "FleetStorage", "FleetSystem"]),
        .executableTarget(
            name: "capfleet-bench",
            dependencies: [
                "FleetAgent", "FleetBus", "FleetCapture", "FleetClient", "FleetCoordinator", "FleetCore", "FleetEncoding", "FleetHost",
                "FleetProtocol",
                "FleetRecording", "FleetStorage", "FleetStore", "FleetSystem", "FleetTestSupport", "CPlatform",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        .testTarget(name: "FleetCoreTests", dependencies: ["FleetCore", "FleetProtocol"]),
        .testTarget(name: "FleetProtocolTests", dependencies: ["FleetProtocol"]),
        .testTarget(name: "FleetImagingTests", dependencies: ["FleetImaging", "FleetCore", "CZlib"]),
        .testTarget(name: "FleetCaptureTests", dependencies: ["FleetCapture", "FleetCore", "FleetDetection", "CV4L2"]),
        .testTarget(name: "FleetGenICamTests", dependencies: ["FleetGenICam"]),
        .testTarget(name: "FleetDetectionTests", dependencies: ["FleetDetection", "FleetCapture", "FleetCore", "FleetImaging"]),
        .testTarget(
            name: "FleetStoreTests",
            dependencies: [
                "FleetStore", "FleetCore", .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(name: "FleetBusTests", dependencies: ["FleetBus"]),
        .testTarget(name: "FleetHostTests", dependencies: ["FleetHost", "FleetCore"]),
        .testTarget(
            name: "FleetHTTPTests",
            dependencies: [
                "FleetHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(name: "FleetRelayTests", dependencies: ["FleetRelay", "FleetCore", "FleetSystem"]),
        .testTarget(name: "FleetSettingsTests", dependencies: ["FleetSettings", "FleetCoordinator", "FleetCore"]),
        .testTarget(name: "FleetRecordingTests", dependencies: ["FleetRecording", "FleetCoordinator", "FleetCore", "FleetStore"]),
        .testTarget(name: "FleetSystemTests", dependencies: ["FleetSystem"]),
        .testTarget(name: "FleetStorageTests", dependencies: ["FleetStorage", "FleetCore", "FleetTestSupport"]),
        .testTarget(name: "FleetEncodingTests", dependencies: ["FleetEncoding", "FleetRecording", "FleetCore", "FleetCapture"]),
        .testTarget(name: "FleetClientTests", dependencies: ["FleetClient", "FleetBus", "FleetCore", "FleetProtocol", "FleetRecording"]),
        .testTarget(
            name: "FleetDaemonTests",
            dependencies: [
                "FleetDaemon",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The coordinator's shells against an in-memory fleet database.
        .testTarget(
            name: "FleetCoordinatorTests",
            dependencies: [
                "FleetCoordinator", "FleetCore", "FleetStore", "FleetBus", "FleetProtocol", "FleetSystem", "FleetTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        .testTarget(
            name: "FleetAgentTests",
            dependencies: [
                "FleetAgent", "FleetAudio", "FleetBus", "FleetCapture", "FleetCore", "FleetHost", "FleetProtocol", "FleetTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The coordinator's decoders under a mutation fuzzer, for a bounded time.
        .target(name: "FleetFuzz", dependencies: ["FleetCore"]),
        .testTarget(
            name: "FuzzTests",
            dependencies: [
                "FleetBus", "FleetCoordinator", "FleetCore", "FleetFuzz", "FleetHTTP", "FleetProtocol", "FleetSystem",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Runs the built `capfleet` binary: `swift build` first.
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "FleetProtocol", "FleetCore", "FleetBus", "FleetCapture", "FleetDetection", "FleetFuzz", "FleetHTTP", "FleetHost",
                "FleetImaging", "FleetStorage", "FleetTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// The tests are compiled without optimisation, whatever the configuration: the code under test
// is the release build's (optimised, as shipped), and the optimiser's time on the tests' own
// code (Swift Testing's macros expanded) was most of CI's build.
for target in package.targets where target.type == .test {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-Onone"])]
}
