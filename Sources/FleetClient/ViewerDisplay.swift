/// Whether `capfleet view` can show a player here: a player needs an X or Wayland display,
/// and without one ffplay waits for it forever. Pure: the caller passes its environment.
public enum ViewerDisplay {
    /// Nil when a player can open a window (or frames go to a file); else what to do instead.
    public static func refusal(environment: [String: String], writesToFile: Bool, device: String) -> String? {
        guard !writesToFile else { return nil }
        let hasDisplay = ["DISPLAY", "WAYLAND_DISPLAY"].contains { !(environment[$0] ?? "").isEmpty }
        guard !hasDisplay else { return nil }
        return """
            there is no display for a player here (neither DISPLAY nor WAYLAND_DISPLAY is set, as over ssh without -X): \
            write the frames with -o FILE (or -o - | ffplay … where there is a display), take one picture with \
            `capfleet snapshot \(device) -o frame.jpg`, or watch the previews in the web dashboard (`capfleet dashboard login`)
            """
    }
}
