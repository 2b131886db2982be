import FleetBus
import FleetCore
import FleetFuzz
import FleetProtocol
import Foundation
import Testing

extension IntegrationTests {
    /// The running coordinator under the mutation fuzzer: mutated messages, sent with real
    /// keys (an enrolled node's and an admin's) so they pass the handshake and reach the
    /// handlers, on control, ingest and operator for CAPFLEET_FUZZ_SECONDS each. Afterwards the
    /// coordinator still runs, still answers, and still counts a good agent's frames.
    @Suite struct CoordinatorFuzzTests {
        @Test func mutatedMessagesOnEveryEndpoint_neverStopTheCoordinator() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            try fleet.startAgent("good")
            let fuzzAgent = try fleet.startAgent("fuzz")
            try await fleet.waitUntil("both agents stream", seconds: 20) {
                try fleet.deviceStats().values.filter { ($0["frames_captured"] as? Int ?? 0) > 2 }.count == 2
            }
            // Someone watches both cameras, so their frames come to the coordinator throughout.
            let viewerContext = ZMQContext()
            let viewer = try fleet.wantFrames(of: Array(try fleet.deviceStats().keys), context: viewerContext)
            defer { viewer.close() }
            let nodes = try fleet.nodes()
            let fuzzNode = try #require(nodes.first { $0["name"] as? String == "fuzz" }?["node_id"] as? String)
            let fuzzDevice = try #require(try fleet.json(["devices", "--node", fuzzNode]).first?["device_id"] as? String)
            let goodDevice = try #require(try fleet.json(["devices"]).first { $0["node_id"] as? String != fuzzNode }?["device_id"] as? String)
            // The fuzzer speaks as the fuzz node, with its key, once its own agent is gone.
            fuzzAgent.kill()
            let keys = try fleet.agentKeys("fuzz")
            let context = ZMQContext()
            let seconds = Fuzzer.secondsPerTarget

            let control = try fleet.socket(.dealer, port: fleet.controlPort, keys: keys, context: context)
            let controlSeeds: [[UInt8]] = try [
                Capfleet_V1_AgentMessage.with {
                    $0.hello = .with {
                        $0.protocolVersion = .current
                        $0.nodeID = fuzzNode
                        $0.devices = [
                            .with {
                                $0.deviceID = fuzzDevice;
                                $0.formats = [
                                    .with {
                                        $0.pixelFormat = "YUYV"; $0.width = 640; $0.height = 480
                                    }
                                ]
                            }
                        ]
                    }
                },
                .with {
                    $0.heartbeat = .with {
                        $0.nodeID = fuzzNode; $0.sequence = 1
                    }
                },
                .with {
                    $0.status = .with {
                        $0.nodeID = fuzzNode;
                        $0.devices = [
                            .with {
                                $0.deviceID = fuzzDevice; $0.framesCaptured = 5
                            }
                        ]
                    }
                },
                .with {
                    $0.deviceEvent = .with {
                        $0.deviceID = fuzzDevice; $0.kind = .interrupted
                    }
                },
                .with {
                    $0.pressureChange = .with {
                        $0.nodeID = fuzzNode; $0.level = .serious; $0.previousLevel = .nominal
                    }
                },
                .with {
                    $0.commandReply = .with {
                        $0.commandID = 1; $0.status = .ok
                    }
                },
            ].map { try $0.serializedBytes() }
            let sentControl = try Self.fuzz(control, seeds: controlSeeds, seconds: seconds) { [$0] }

            let push = try fleet.socket(.push, port: fleet.ingestPort, keys: keys, context: context)
            let headerSeed: [UInt8] = try Capfleet_V1_FrameHeader.with {
                $0.protocolVersion = .current
                $0.nodeID = fuzzNode
                $0.deviceID = fuzzDevice
                $0.layout = .with {
                    $0.pixelFormat = "YUYV"; $0.width = 64; $0.height = 48; $0.bytesPerLine = 128
                }
                $0.payloadSize = 64 * 48 * 2
            }.serializedBytes()
            var sizes = SplitMix(seed: 11)
            let sentFrames = try Self.fuzz(push, seeds: [headerSeed], seconds: seconds) { header in
                [header, [UInt8](repeating: 0x80, count: sizes.below(2) == 0 ? 64 * 48 * 2 : sizes.below(1 << 16))]
            }

            let operatorSocket = try fleet.socket(.dealer, port: fleet.operatorPort, keys: try fleet.operatorKeys("ana"), context: context)
            let operatorSeeds: [[UInt8]] = try [
                Capfleet_V1_OperatorRequest.with { $0.body = .listDevices(.init()) },
                .with { $0.body = .getDevice(.with { $0.deviceID = fuzzDevice }) },
                .with {
                    $0.body = .changeZoom(
                        .with {
                            $0.deviceID = fuzzDevice; $0.factor = 2
                        })
                },
                .with {
                    $0.body = .changeConsent(
                        .with {
                            $0.deviceID = fuzzDevice; $0.action = .deny; $0.reason = "fuzz"
                        })
                },
                .with { $0.body = .getConsentHistory(.with { $0.deviceID = fuzzDevice }) },
                .with { $0.body = .getEvents(.with { $0.limit = 5 }) },
                .with {
                    $0.body = .changeFormat(
                        .with {
                            $0.deviceID = fuzzDevice; $0.preset = "low"
                        })
                },
            ].map { try $0.serializedBytes() }
            let sentRequests = try Self.fuzz(operatorSocket, seeds: operatorSeeds, seconds: seconds) { [$0] }
            print("coordinator fuzz: \(sentControl) control messages, \(sentFrames) frames, \(sentRequests) operator requests")
            // What the fuzzer once found: a NaN in a HELLO, stored as NULL, crashed the next listing.
            try control.send(
                try Capfleet_V1_AgentMessage.with {
                    $0.hello = .with {
                        $0.protocolVersion = .current
                        $0.nodeID = fuzzNode
                        $0.devices = [
                            .with {
                                $0.deviceID = fuzzDevice
                                $0.activeFrameRate = .nan
                                $0.formats = [
                                    .with {
                                        $0.pixelFormat = "YUYV"; $0.width = 640; $0.height = 480; $0.fieldOfViewDegrees = .infinity
                                    }
                                ]
                            }
                        ]
                    }
                }.serializedBytes() as [UInt8])
            // The coordinator may still be working through what the fuzzer queued: give it time.
            var listing = try fleet.cli(["device", fuzzDevice], timeout: 10)
            for _ in 0..<3 where listing.status != 0 && coordinator.isRunning { listing = try fleet.cli(["device", fuzzDevice], timeout: 10) }
            #expect(listing.status == 0, "listings survive a non-finite number in a HELLO: \(listing.error)")

            // A crash report starts with the crashed thread and ends in registers and images.
            #expect(coordinator.isRunning, "the coordinator survived: \(Self.crashReport(coordinator.log))")
            let before = try #require(try fleet.deviceStats()[goodDevice]?["frames_received"] as? Int)
            try await fleet.waitUntil("the good agent's frames are still counted", seconds: 10) {
                (try fleet.deviceStats()[goodDevice]?["frames_received"] as? Int ?? 0) > before + 10
            }
            let rejected = try fleet.json(["rejections"]).reduce(0) { $0 + ($1["count"] as? Int ?? 0) }
            #expect(rejected > 0, "mutated input was refused and counted")
        }

        /// What matters in a Swift crash report: the fatal error, and the crashed thread's stack.
        static func crashReport(_ log: String) -> String {
            let reason = log.components(separatedBy: "\n").filter { $0.contains("Fatal error") || $0.contains("Program crashed") }
            guard let crashed = log.range(of: #"\nThread [0-9]+[^\n]* crashed:"#, options: .regularExpression) else {
                return (reason + [String(log.suffix(4000))]).joined(separator: "\n")
            }
            let stack = log[crashed.lowerBound...].dropFirst().components(separatedBy: "\n\nThread ").first ?? ""
            return (reason + [String(stack.prefix(8000))]).joined(separator: "\n")
        }

        /// Sends mutated seeds as fast as the socket takes them for `seconds`, reading and
        /// dropping replies; returns how many were sent.
        static func fuzz(_ socket: ZMQSocket, seeds: [[UInt8]], seconds: Double, parts: ([UInt8]) -> [[UInt8]]) throws -> Int {
            var fuzzer = Fuzzer(seeds: seeds)
            var sent = 0
            let start = Date()
            while Date().timeIntervalSince(start) < seconds {
                if try socket.send(parts: parts(fuzzer.next()), dontWait: true) { sent += 1 } else { usleep(1000) }
                while socket.hasInput, (try? socket.receiveMultipart(dontWait: true)) != nil {}
                // Leave the two cores some room for the good agent and the coordinator's other work.
                if sent % 200 == 0 { usleep(20_000) }
            }
            return sent
        }
    }
}
