// Linux calls Swift cannot import directly (variadic or behind _GNU_SOURCE).
#ifndef CAPFLEET_PLATFORM_H
#define CAPFLEET_PLATFORM_H

// Names the calling thread as ps, top and /proc/PID/task/TID/comm show it. Linux keeps 15
// bytes; longer names are cut, not refused. Returns 0, or -1 with errno set.
int capfleet_name_this_thread(const char *name);

// Asks the kernel to wake the calling thread within `nanoseconds` of the time it asked for
// (the default slack is 50 us, too coarse for a delay line timing packets). 0 or -1.
int capfleet_set_timer_slack(unsigned long nanoseconds);

// Moves the calling thread (only it: network namespaces are per thread) into the network
// namespace `ip netns` made under /run/netns/NAME. Threads it starts afterwards, and sockets
// it opens, live there. Returns 0, or -1 with errno set (needs CAP_SYS_ADMIN).
int capfleet_enter_network_namespace(const char *name);

// Sends one datagram to systemd's notification socket (sd_notify(3), without linking
// libsystemd): `socket_path` as $NOTIFY_SOCKET gives it, a leading '@' meaning Linux's
// abstract namespace. Returns 0, or -1 with errno set.
int capfleet_notify_socket_send(const char *socket_path, const char *message);

// The kernel's TAI - UTC offset in seconds (adjtimex(2), read only): 0 unless ptp4l, chrony
// or ntpd set it. -1 with errno set when the call fails.
long long capfleet_kernel_tai_offset_seconds(void);

#endif
