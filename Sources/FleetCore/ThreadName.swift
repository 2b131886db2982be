import CPlatform

/// Names the calling thread for ps, top and /proc, so an operator (or a benchmark reading
/// /proc/PID/task) can tell the capture, socket and sampler threads apart. Foundation's
/// `Thread.name` does not reliably reach the OS thread on Linux, and Linux keeps only 15
/// bytes, so names here are short: "cf-" and what the thread does.
public enum ThreadName {
    public static func set(_ name: String) {
        _ = capfleet_name_this_thread(name)
    }
}
