import Testing

/// Every integration test, one after another: each starts real processes and drives the
/// CLI synchronously, and on a two-core machine running them side by side makes timing-
/// sensitive steps (a ramp caught mid-way, a lease that must outlive a restart) flaky.
@Suite(.serialized) struct IntegrationTests {}

/// The takes' tests, one after another too, but beside `IntegrationTests`: they mostly wait
/// for real-time recording (seconds of frames at the camera's rate) and check files after,
/// and nothing in them depends on a step being caught in a window, so the two lanes share
/// the machine's two cores instead of the suite taking the sum of both.
@Suite(.serialized) struct TakeIntegrationTests {}
