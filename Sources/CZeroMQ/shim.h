// Thin shim over Debian's libzmq (libzmq3-dev). Swift cannot import function-like
// macros, so the few we need are re-declared here.
#ifndef CAPFLEET_CZEROMQ_SHIM_H
#define CAPFLEET_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

static inline int capfleet_errno(void) { return errno; }

// The event fd lets another thread wake a socket loop blocked in zmq_poll.
static inline int capfleet_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

#endif
