import CPlatform

/// Names the calling thread for ps, top and /proc, for threads this module does not start
/// (libzmq's, a test's). Foundation's `Thread.name` does not reliably reach the OS thread on
/// Linux, and Linux keeps only 15 bytes, so names are short: "cf-" and what the thread does.
public enum ThreadName {
    public static func set(_ name: String) {
        _ = capfleet_name_this_thread(name)
    }
}
