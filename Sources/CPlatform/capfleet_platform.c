#define _GNU_SOURCE
#include "capfleet_platform.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timex.h>
#include <sys/un.h>

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

int capfleet_notify_socket_send(const char *socket_path, const char *message) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    size_t length = strlen(socket_path);
    if (length == 0 || length >= sizeof address.sun_path || (socket_path[0] != '/' && socket_path[0] != '@')) {
        errno = EINVAL;
        return -1;
    }
    memcpy(address.sun_path, socket_path, length);
    if (address.sun_path[0] == '@') address.sun_path[0] = '\0';
    int descriptor = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (descriptor < 0) return -1;
    socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + length);
    ssize_t sent = sendto(descriptor, message, strlen(message), MSG_NOSIGNAL, (struct sockaddr *)&address, size);
    int saved = errno;
    close(descriptor);
    errno = saved;
    return sent < 0 ? -1 : 0;
}

long long capfleet_kernel_tai_offset_seconds(void) {
    struct timex state;
    memset(&state, 0, sizeof state);
    if (adjtimex(&state) < 0) return -1;
    return (long long)state.tai;
}
