#include "capfleet_platform.h"
#include <string.h>
#include <sys/prctl.h>

int capfleet_name_this_thread(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = '\0';
    return prctl(PR_SET_NAME, (unsigned long)truncated, 0, 0, 0);
}
