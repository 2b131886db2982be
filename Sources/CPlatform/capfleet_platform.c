#define _GNU_SOURCE
#include "capfleet_platform.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <sys/prctl.h>

int capfleet_name_this_thread(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = '\0';
    return prctl(PR_SET_NAME, (unsigned long)truncated, 0, 0, 0);
}

int capfleet_set_timer_slack(unsigned long nanoseconds) {
    return prctl(PR_SET_TIMERSLACK, nanoseconds == 0 ? 1UL : nanoseconds, 0, 0, 0);
}

int capfleet_enter_network_namespace(const char *name) {
    if (strchr(name, '/') != NULL || name[0] == '\0' || name[0] == '.') {
        errno = EINVAL;
        return -1;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/run/netns/%s", name);
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return -1;
    int result = setns(descriptor, CLONE_NEWNET);
    int saved = errno;
    close(descriptor);
    errno = saved;
    return result;
}
