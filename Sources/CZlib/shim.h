// Thin shim over Debian's zlib (zlib1g-dev): deflate and CRC-32 for writing PNG files.
#ifndef CAPFLEET_CZLIB_SHIM_H
#define CAPFLEET_CZLIB_SHIM_H
#include <zlib.h>
#endif
