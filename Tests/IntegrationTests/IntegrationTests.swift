import Testing

/// Every integration test, one after another: each starts real processes and drives the
/// CLI synchronously, and on a two-core machine running them side by side makes timing-
/// sensitive steps (a ramp caught mid-way, a lease that must outlive a restart) flaky.
@Suite(.serialized) struct IntegrationTests {}
