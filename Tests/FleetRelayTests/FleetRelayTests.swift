import FleetCore
import FleetSystem
import Foundation
import Testing

@testable import FleetRelay

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct LinkImpairmentTests {
    @Test func specification_readsEveryKey_andSpellsItBack() throws {
        let impairment = try LinkImpairment(
            specification: "up=1.5ms down=500us,jitter=200us loss=5% stall=150ms spike=20ms spike-every=10s spike-for=1s spike-dir=up seed=7")
        #expect(impairment.upDelay == 1_500_000 && impairment.downDelay == 500_000 && impairment.jitter == 200_000)
        #expect(impairment.loss == 0.05 && impairment.stall == 150_000_000 && impairment.seed == 7)
        #expect(impairment.spike == 20_000_000 && impairment.spikePeriod == 10_000_000_000 && impairment.spikeLength == 1_000_000_000)
        #expect(impairment.spikeDirections == [.up])
        #expect(try LinkImpairment(specification: impairment.description).description == impairment.description)
        #expect(try LinkImpairment(specification: "").isNone)
        #expect(try LinkImpairment(specification: "delay=1ms").description == "delay=1ms")
    }

    @Test func specification_refusesWhatItCannotRead_sayingWhy() {
        for (text, words) in [
            ("delay=fast", "duration"), ("loss=100%", "below"), ("wobble=1ms", "unknown impairment"),
            ("delay", "key=value"), ("spike-for=2s spike-every=1s", "must not exceed"), ("delay=2min", "duration"),
            ("delay=-1ms", "duration"), ("spike-dir=left", "up, down or both"),
        ] {
            #expect(throws: LinkImpairmentError.self) { try LinkImpairment(specification: text) }
            do { _ = try LinkImpairment(specification: text) } catch { #expect(error.description.contains(words), "\(text): \(error)") }
        }
    }

    @Test func schedule_delaysByTheDirectionsDelay_withJitterInsideItsBounds() throws {
        let impairment = try LinkImpairment(specification: "up=1ms down=3ms jitter=200us")
        var up = DeliverySchedule(direction: .up, origin: 0, seed: 1)
        var down = DeliverySchedule(direction: .down, origin: 0, seed: 1)
        var ups: [Int64] = []
        for step in 0..<2_000 {
            let arrival = UInt64(step) * 10_000_000
            ups.append(Int64(up.due(arrival: arrival, impairment: impairment) - arrival))
            let downDelay = Int64(down.due(arrival: arrival, impairment: impairment) - arrival)
            #expect(downDelay >= 2_800_000 && downDelay <= 3_200_000)
        }
        #expect(ups.min()! >= 800_000 && ups.max()! <= 1_200_000)
        // Uniform: both ends of the range are reached, the mean sits in the middle.
        #expect(ups.min()! < 820_000 && ups.max()! > 1_180_000)
        #expect(abs(Double(ups.reduce(0, +)) / Double(ups.count) - 1_000_000) < 10_000)
    }

    @Test func schedule_keepsOrder_asTCPDoes() throws {
        let impairment = try LinkImpairment(specification: "delay=1ms jitter=900us")
        var schedule = DeliverySchedule(direction: .up, origin: 0, seed: 3)
        var last: UInt64 = 0
        for step in 0..<5_000 {
            let due = schedule.due(arrival: UInt64(step) * 100_000, impairment: impairment)
            #expect(due >= last)
            last = due
        }
    }

    @Test func schedule_lossStallsTheChunkAndThoseBehindIt() throws {
        let impairment = try LinkImpairment(specification: "delay=1ms loss=5% stall=200ms seed=11")
        var schedule = DeliverySchedule(direction: .up, origin: 0, seed: 11)
        var stalled = 0
        for step in 0..<20_000 {
            // Chunks a second apart, so a stall never holds the next one back.
            let arrival = UInt64(step) * 1_000_000_000
            if schedule.due(arrival: arrival, impairment: impairment) - arrival >= 200_000_000 { stalled += 1 }
        }
        // 5 % of 20 000 is 1 000; the binomial's sd is about 31.
        #expect(stalled > 850 && stalled < 1_150, "\(stalled) stalled")
        // Chunks 50 ms apart: one that follows a stalled chunk waits for it.
        var follow = DeliverySchedule(direction: .up, origin: 0, seed: 0)
        let always = try LinkImpairment(specification: "delay=1ms loss=0.999999 stall=200ms")
        let first = follow.due(arrival: 0, impairment: always)
        let second = follow.due(arrival: 50_000_000, impairment: try LinkImpairment(specification: "delay=1ms"))
        #expect(first == 201_000_000 && second == first)
    }

    @Test func schedule_spikesComeEveryPeriod_forTheirLength_inTheirDirections() throws {
        let impairment = try LinkImpairment(specification: "delay=1ms spike=20ms spike-every=10s spike-for=1s spike-dir=down")
        #expect(!impairment.inSpike(elapsed: 500_000_000, direction: .down))
        #expect(impairment.inSpike(elapsed: 10_200_000_000, direction: .down))
        #expect(!impairment.inSpike(elapsed: 10_200_000_000, direction: .up))
        #expect(!impairment.inSpike(elapsed: 11_200_000_000, direction: .down))
        #expect(impairment.inSpike(elapsed: 20_999_000_000, direction: .down))
        var down = DeliverySchedule(direction: .down, origin: 1_000, seed: 1)
        #expect(down.due(arrival: 1_000 + 10_000_000_000, impairment: impairment) == 1_000 + 10_021_000_000)
    }
}

/// A real relay on loopback: bytes arrive intact, in order, and late by the link's delay.
@Suite struct TCPRelayTests {
    @Test func relay_passesBytesBothWays_delayedByTheImpairment() throws {
        let (listener, port) = try Self.listen()
        defer { close(listener) }
        let relayPort = try Self.freePort()
        let setting = ImpairmentSetting(try LinkImpairment(specification: "up=3ms down=1ms"))
        let route = try #require(RelayRoute("127.0.0.1:\(relayPort)=127.0.0.1:\(port)"))
        let relay = try TCPRelay(routes: [route], setting: setting)
        relay.start { print($0) }

        let client = try Self.connect(relayPort)
        defer { close(client) }
        let server = accept(listener, nil, nil)
        #expect(server >= 0)
        defer { close(server) }
        var upDelays: [UInt64] = []
        var roundTrips: [UInt64] = []
        for round in 0..<20 {
            let message = [UInt8](repeating: UInt8(round), count: 100 + round)
            let sent = MonotonicTime.now()
            #expect(send(client, message, message.count, 0) == message.count)
            let received = try Self.read(server, count: message.count)
            upDelays.append(MonotonicTime.now() - sent)
            #expect(received == message)
            #expect(send(server, message, message.count, 0) == message.count)
            #expect(try Self.read(client, count: message.count) == message)
            roundTrips.append(MonotonicTime.now() - sent)
        }
        let medianUp = upDelays.sorted()[upDelays.count / 2]
        let medianRoundTrip = roundTrips.sorted()[roundTrips.count / 2]
        print("relay: median up \(medianUp) ns, round trip \(medianRoundTrip) ns (asked 3 ms + 1 ms)")
        #expect(upDelays.min()! >= 3_000_000 && medianUp < 3_000_000 + 2_000_000)
        #expect(roundTrips.min()! >= 4_000_000 && medianRoundTrip < 4_000_000 + 4_000_000)
        #expect(relay.connections == 1)

        // A changed impairment applies to the next chunk: a second's delay holds it that long
        // at least, and none lets the next through well inside that second (a bound far from
        // the machine's speed: 9 ms was seen on a busy CI machine for a 3 ms one).
        func sendAndTime(_ bytes: [UInt8]) throws -> UInt64 {
            let sent = MonotonicTime.now()
            #expect(send(client, bytes, bytes.count, 0) == bytes.count)
            #expect(try Self.read(server, count: bytes.count) == bytes)
            return MonotonicTime.now() - sent
        }
        setting.set(try LinkImpairment(specification: "delay=1s"))
        #expect(try sendAndTime([4, 5, 6]) >= 1_000_000_000)
        setting.set(try LinkImpairment(specification: "delay=0"))
        #expect(try sendAndTime([1, 2, 3]) < 500_000_000)

        // The target closing ends the client's side too.
        shutdown(server, Int32(SHUT_RDWR))
        var byte: UInt8 = 0
        #expect(recv(client, &byte, 1, 0) == 0)
    }

    @Test func relay_refusesAPortThatIsTaken() throws {
        let (listener, port) = try Self.listen()
        defer { close(listener) }
        let route = try #require(RelayRoute("127.0.0.1:\(port)=127.0.0.1:1"))
        let error = #expect(throws: RelayError.self) { try TCPRelay(routes: [route], setting: ImpairmentSetting(.none)) }
        #expect(error?.errno == EADDRINUSE)
        #expect(error?.description.contains("the port is in use") == true, "\(String(describing: error))")
        #expect(RelayRoute("localhost:1=127.0.0.1:2") == nil && RelayRoute("127.0.0.1:1") == nil)
    }

    static func listen() throws -> (Int32, UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                guard bind(descriptor, $0, length) == 0, Glibc.listen(descriptor, 4) == 0, getsockname(descriptor, $0, &length) == 0 else {
                    throw SystemCallError(call: "bind/listen", target: "127.0.0.1:0", errno: errno)
                }
            }
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    static func freePort() throws -> UInt16 {
        let (descriptor, port) = try listen()
        close(descriptor)
        return port
    }

    static func connect(_ port: UInt16) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw SystemCallError(call: "connect", target: "127.0.0.1:\(port)", errno: errno) }
        var yes: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        return descriptor
    }

    static func read(_ descriptor: Int32, count: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: count)
        while bytes.count < count {
            let got = recv(descriptor, &buffer, count - bytes.count, 0)
            guard got > 0 else {
                throw SystemCallError(call: "recv (ended after \(bytes.count) of \(count) bytes)", target: "the relayed connection", errno: errno)
            }
            bytes += buffer[..<got]
        }
        return bytes
    }
}
