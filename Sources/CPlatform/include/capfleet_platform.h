// Linux calls Swift cannot import directly (variadic or behind _GNU_SOURCE).
#ifndef CAPFLEET_PLATFORM_H
#define CAPFLEET_PLATFORM_H

// Names the calling thread as ps, top and /proc/PID/task/TID/comm show it. Linux keeps 15
// bytes; longer names are cut, not refused. Returns 0, or -1 with errno set.
int capfleet_name_this_thread(const char *name);

#endif
