import FleetCore
import Testing

/// A node whose clock runs `offset` ns ahead of fleet time at true time 0 and gains
/// `driftPPM`, probing a coordinator over a link whose delays the test chooses. True time
/// is in ns since the start.
struct SimulatedClock {
    var offset: Double
    var driftPPM: Double
    let fleetEpoch: UInt64 = 1_795_000_000_000_000_000
    let localBoot: UInt64 = 5_000_000_000_000

    func local(_ t: Double) -> UInt64 {
        UInt64(Int64(localBoot) + Int64((t + offset + driftPPM * 1e-6 * t).rounded()))
    }

    func fleet(_ t: Double) -> UInt64 { fleetEpoch + UInt64(t.rounded()) }

    func probe(at t: Double, outbound: Double, inbound: Double, turnaround: Double = 20_000) -> ClockProbe {
        ClockProbe(
            sent: local(t), serverReceived: fleet(t + outbound), serverSent: fleet(t + outbound + turnaround),
            received: local(t + outbound + turnaround + inbound))
    }

    /// How far the mapping's fleet time is off at true time t, ns.
    func error(of mapping: FleetClockMapping, at t: Double) -> Double {
        Double(Int64(bitPattern: mapping.fleetTime(atLocal: local(t)) &- fleet(t)))
    }
}

/// Deterministic noise for the link.
struct LinkNoise {
    var state: UInt64
    mutating func unit() -> Double {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Double(state >> 11) / Double(1 << 53)
    }
    /// Uniform in center ± spread.
    mutating func around(_ center: Double, _ spread: Double) -> Double { center + (unit() * 2 - 1) * spread }
}

@Suite struct ClockEstimatorTests {
    let ms = 1_000_000.0, us = 1_000.0, second = 1_000_000_000.0

    /// Probes every `interval` for `duration`; `delays` gives each probe's one-way delays or nil (lost).
    func run(
        _ clock: SimulatedClock, interval: Double = 500_000_000, duration: Double,
        delays: (Int, Double) -> (Double, Double)?, check: (ClockEstimator, Double) -> Void = { _, _ in }
    ) -> ClockEstimator {
        var estimator = ClockEstimator()
        var t = 0.0
        var index = 0
        while t < duration {
            if let (outbound, inbound) = delays(index, t) {
                estimator.add(clock.probe(at: t, outbound: outbound, inbound: inbound))
            }
            estimator.tick(now: clock.local(t + 2 * ms))
            check(estimator, t + 2 * ms)
            index += 1
            t += interval
        }
        return estimator
    }

    @Test func recoversOffsetAndDrift_overASymmetricJitteryLink() throws {
        let clock = SimulatedClock(offset: 3.2 * second, driftPPM: 40)
        var noise = LinkNoise(state: 7)
        let estimator = run(clock, duration: 120 * second) { _, _ in (noise.around(1 * ms, 200 * us), noise.around(1 * ms, 200 * us)) }
        let estimate = try #require(estimator.estimate)
        #expect(estimator.state == .locked)
        let now = 120 * second
        let error = clock.error(of: estimate.mapping, at: now)
        #expect(abs(error) < 50 * us, "error \(error) ns")
        #expect(abs(error) <= estimate.mapping.uncertainty(atLocal: clock.local(now)))
        #expect(abs(estimate.mapping.driftPPM - 40) < 1, "drift \(estimate.mapping.driftPPM) ppm")
        // The offset as an operator reads it: the node is 3.2 s ahead (plus the clocks' origins).
        let ahead = Double(estimate.mapping.offset(atLocal: clock.local(0))) - (Double(clock.localBoot) - Double(clock.fleetEpoch))
        #expect(abs(ahead - 3.2 * second) < 100 * us)
        #expect(estimate.bestDelay > Int64(1.5 * ms) && estimate.bestDelay < Int64(2.1 * ms))
    }

    /// The accuracy target on a simulated link (1 ms ± 200 µs uniform each way, the
    /// estimator choosing when to probe): over the 120 s after lock, the fleet time it gives
    /// is off by at most 10 µs at the median and 50 µs at p99, for skews of ±50 ppm.
    @Test(arguments: [(3.2, 50.0, UInt64(21)), (-1.5, -50.0, UInt64(22)), (0.7, 20.0, UInt64(23))])
    func accuracyAfterLock_onAJitteryLink(offsetSeconds: Double, ppm: Double, seed: UInt64) throws {
        let clock = SimulatedClock(offset: offsetSeconds * second, driftPPM: ppm)
        var noise = LinkNoise(state: seed)
        var estimator = ClockEstimator()
        var t = 0.0
        var nextProbe = 0.0
        var lockedAt: Double?
        var errors: [Double] = []
        while t < 130 * second {
            if t >= nextProbe {
                estimator.add(clock.probe(at: t, outbound: noise.around(1 * ms, 200 * us), inbound: noise.around(1 * ms, 200 * us)))
                nextProbe = t + 2.2 * ms + Double(estimator.probeInterval)
            }
            if let lockedAt, t - lockedAt <= 120 * second, let estimate = estimator.estimate {
                errors.append(abs(clock.error(of: estimate.mapping, at: t)))
            } else if lockedAt == nil, estimator.state == .locked {
                lockedAt = t
            }
            t += 33_333_333  // a frame at 30 fps
        }
        errors.sort()
        let median = errors[errors.count / 2], p99 = errors[errors.count * 99 / 100]
        print(
            "simulated link, \(ppm) ppm: locked at \(lockedAt.map { $0 / second } ?? -1) s; error median \(median / us) µs, p99 \(p99 / us) µs over \(errors.count) frames"
        )
        #expect(try #require(lockedAt) < 5 * second)
        #expect(median <= 10 * us && p99 <= 50 * us, "median \(median) ns, p99 \(p99) ns")
    }

    @Test(arguments: [-50.0, -3.5, 0, 12.25, 50])
    func recoversDriftOfEitherSign(ppm: Double) throws {
        let clock = SimulatedClock(offset: -0.75 * second, driftPPM: ppm)
        var noise = LinkNoise(state: UInt64(ppm.magnitude * 100) + 1)
        let estimator = run(clock, duration: 60 * second) { _, _ in (noise.around(300 * us, 50 * us), noise.around(300 * us, 50 * us)) }
        let estimate = try #require(estimator.estimate)
        #expect(abs(estimate.mapping.driftPPM - ppm) < 0.5, "drift \(estimate.mapping.driftPPM) for \(ppm) ppm")
        #expect(abs(clock.error(of: estimate.mapping, at: 60 * second)) < 20 * us)
    }

    /// A path slower one way shifts the estimate by half the difference, which no NTP-style
    /// exchange can see; the bound must still hold it.
    @Test func asymmetricDelay_staysWithinTheBound() throws {
        let clock = SimulatedClock(offset: 10 * ms, driftPPM: -20)
        var noise = LinkNoise(state: 3)
        let estimator = run(clock, duration: 30 * second) { _, _ in (noise.around(3 * ms, 50 * us), noise.around(1 * ms, 50 * us)) }
        let estimate = try #require(estimator.estimate)
        let error = clock.error(of: estimate.mapping, at: 30 * second)
        #expect(abs(abs(error) - 1 * ms) < 100 * us, "half the asymmetry: \(error)")
        let bound = estimate.mapping.uncertainty(atLocal: clock.local(30 * second))
        #expect(abs(error) <= bound && bound < 3 * ms, "error \(error) bound \(bound)")
    }

    /// One probe in ten meets a queue 20 ms deep in one direction: quickest-first selection
    /// leaves them out.
    @Test func delayedProbes_doNotMoveTheEstimate() throws {
        let clock = SimulatedClock(offset: 1 * second, driftPPM: 15)
        var noise = LinkNoise(state: 11)
        let estimator = run(clock, duration: 60 * second) { index, _ in
            let outbound = noise.around(1 * ms, 200 * us), inbound = noise.around(1 * ms, 200 * us)
            return index % 10 == 3 ? (outbound + 20 * ms, inbound) : (outbound, inbound)
        }
        let estimate = try #require(estimator.estimate)
        #expect(abs(clock.error(of: estimate.mapping, at: 60 * second)) < 50 * us)
        #expect(estimate.bestDelay < Int64(2.1 * ms))
    }

    /// 5 % of probes lost and a 20 ms delay spike for two seconds: the error never leaves the
    /// reported bound once there is an estimate.
    @Test func lossAndADelaySpike_errorStaysWithinTheBound() {
        let clock = SimulatedClock(offset: -2 * second, driftPPM: -45)
        var noise = LinkNoise(state: 5)
        var worst = 0.0
        var checked = 0
        _ = run(
            clock, interval: 250_000_000, duration: 90 * second,
            delays: { _, t in
                guard noise.unit() >= 0.05 else { return nil }
                let spike = t >= 40 * second && t < 42 * second ? 20 * ms : 0
                return (noise.around(1 * ms, 200 * us) + spike, noise.around(1 * ms, 200 * us) + spike / 2)
            },
            check: { estimator, t in
                guard let estimate = estimator.estimate, estimator.state == .locked else { return }
                let error = abs(clock.error(of: estimate.mapping, at: t))
                let bound = estimate.mapping.uncertainty(atLocal: clock.local(t))
                worst = max(worst, error / bound)
                checked += 1
            })
        #expect(checked > 300)
        #expect(worst <= 1, "error reached \(worst) of the bound")
    }

    @Test func statesFollowTheProbes() {
        let clock = SimulatedClock(offset: 0, driftPPM: 5)
        var estimator = ClockEstimator()
        #expect(estimator.state == .unsynchronised)
        #expect(estimator.probeInterval == estimator.configuration.acquiringInterval)
        var t = 0.0
        var lockedAt: Double?
        while t < 5 * second, lockedAt == nil {
            estimator.add(clock.probe(at: t, outbound: 500 * us, inbound: 500 * us))
            if t == 0 { #expect(estimator.state == .synchronising) }
            if estimator.state == .locked { lockedAt = t }
            t += Double(estimator.probeInterval)
        }
        // Probing every 50 ms until locked: locked once 24 probes spanning a second are in;
        // the target is five seconds.
        #expect(lockedAt.map { $0 <= 2 * second } == true, "locked at \(String(describing: lockedAt))")
        // Still quickly until an eighth of the window is in, then at the locked pace.
        #expect(estimator.probeInterval == estimator.configuration.acquiringInterval)
        while estimator.estimate?.probesKept ?? 0 < estimator.configuration.window / 8 {
            estimator.add(clock.probe(at: t, outbound: 500 * us, inbound: 500 * us))
            t += Double(estimator.probeInterval)
        }
        #expect(estimator.state == .locked && estimator.probeInterval == estimator.configuration.lockedInterval)
        // Silence: no longer locked after the stale time, but the estimate is still there.
        #expect(estimator.tick(now: clock.local(t + 5 * second)) == nil)
        #expect(estimator.tick(now: clock.local(t + 11 * second)) == .synchronising)
        #expect(estimator.estimate?.state == .synchronising)
        estimator.reset()
        #expect(estimator.state == .unsynchronised && estimator.estimate == nil)
    }

    @Test func theCoordinatorsPace_holdsOnlyOnceTheWindowIsHalfFull_andNeverTooSlowOrFast() {
        let clock = SimulatedClock(offset: 0, driftPPM: 5)
        var estimator = ClockEstimator()
        let configuration = estimator.configuration
        let asked: UInt64 = 1_000_000_000
        #expect(estimator.probeInterval(coordinatorPace: asked) == configuration.acquiringInterval, "acquiring is not paced")
        var t = 0.0
        while estimator.estimate?.probesKept ?? 0 < configuration.window / 2 - 1 {
            estimator.add(clock.probe(at: t, outbound: 500 * us, inbound: 500 * us))
            t += Double(estimator.probeInterval)
        }
        #expect(estimator.state == .locked)
        #expect(
            estimator.probeInterval(coordinatorPace: asked) == configuration.fillingInterval,
            "while the window fills, a slower pace is taken only up to the filling pace")
        #expect(
            estimator.probeInterval(coordinatorPace: configuration.lockedInterval) == configuration.lockedInterval,
            "a small fleet's coordinator asks for the fastest: it fills at that")
        #expect(estimator.probeInterval(coordinatorPace: 0) == configuration.fillingInterval, "a coordinator that does not say")
        estimator.add(clock.probe(at: t, outbound: 500 * us, inbound: 500 * us))
        #expect(estimator.probeInterval(coordinatorPace: asked) == asked, "then the coordinator's")
        #expect(estimator.probeInterval(coordinatorPace: 0) == configuration.fillingInterval, "a coordinator that does not say")
        #expect(estimator.probeInterval(coordinatorPace: 10_000_000) == configuration.lockedInterval, "never faster than its own")
        #expect(
            estimator.probeInterval(coordinatorPace: 60_000_000_000) == configuration.staleAfterNanoseconds / 4,
            "never so slow that the estimate goes stale")
    }

    @Test func impossibleProbes_areIgnored() {
        var estimator = ClockEstimator()
        // Answered before it was asked; a coordinator that answered before it received.
        #expect(estimator.add(ClockProbe(sent: 100, serverReceived: 5_000, serverSent: 5_010, received: 50)) == nil)
        #expect(estimator.add(ClockProbe(sent: 100, serverReceived: 5_000, serverSent: 4_000, received: 200)) == nil)
        // A round trip of two seconds is no clock reading.
        #expect(estimator.add(ClockProbe(sent: 0, serverReceived: 1, serverSent: 2, received: 2_000_000_000)) == nil)
        #expect(estimator.state == .unsynchronised)
    }
}

@Suite struct FleetClockMappingTests {
    @Test func probeArithmetic_isExactForASymmetricExchange() {
        // Node 3 s ahead; 1 ms each way; 5 µs turnaround.
        let probe = ClockProbe(
            sent: 10_003_000_000_000, serverReceived: 1_795_000_010_001_000_000,
            serverSent: 1_795_000_010_001_005_000, received: 10_003_002_005_000)
        #expect(probe.delay == 2_000_000)
        #expect(probe.offset == 10_003_000_000_000 - 1_795_000_010_000_000_000)
        #expect(probe.localMidpoint == 10_003_001_002_500)
    }

    @Test func fleetAndLocalTime_areInverse_atEpochScale() {
        let mapping = FleetClockMapping(
            referenceLocal: 7_000_000_000_000, offset: -1_795_000_000_000_000_000 + 3_200_000_000,
            driftPPM: 40)
        for local: UInt64 in [0, 6_999_999_999_999, 7_000_000_000_000, 7_100_000_000_000, 9_000_000_000_000] {
            let fleet = mapping.fleetTime(atLocal: local)
            let back = mapping.localTime(atFleet: fleet)
            #expect(back == local || back &- local == 1 || local &- back == 1, "\(local) → \(fleet) → \(back)")
        }
        // 100 s after the reference a 40 ppm fast clock has gained 4 ms on fleet time.
        let later = mapping.fleetTime(atLocal: 7_100_000_000_000)
        #expect(later == 7_100_000_000_000 &- UInt64(bitPattern: -1_795_000_000_000_000_000 + 3_200_000_000 + 4_000_000))
    }

    @Test func timestampsMoveBetweenNodesViaFleetTime() {
        let a = FleetClockMapping(referenceLocal: 1_000, offset: 500, driftPPM: 0)
        let b = FleetClockMapping(referenceLocal: 1_000, offset: -250, driftPPM: 0)
        // a reads 10_500 when fleet time is 10_000; b reads 9_750 then.
        #expect(b.localTime(fromLocal: 10_500, of: a) == 9_750)
    }

    @Test func theBoundWidensAwayFromTheReference() {
        let mapping = FleetClockMapping(
            referenceLocal: 10_000_000_000, offset: 0, driftPPM: 0,
            uncertaintyAtReference: 2_000, uncertaintyGrowthPerSecond: 100)
        #expect(mapping.uncertainty(atLocal: 10_000_000_000) == 2_000)
        #expect(mapping.uncertainty(atLocal: 15_000_000_000) == 2_500)
        #expect(mapping.uncertainty(atLocal: 5_000_000_000) == 2_500)
    }
}
