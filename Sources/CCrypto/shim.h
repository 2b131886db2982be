// OpenSSL's libcrypto (libssl-dev), for SHA-256 only: its implementation uses the CPU's SHA
// instructions where there are any (about 1.5 GB/s on this project's machines, against some
// 0.4 GB/s for libavutil's portable one), and every segment of every take is checksummed.
#ifndef CAPFLEET_CCRYPTO_SHIM_H
#define CAPFLEET_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#endif
