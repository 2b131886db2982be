// OpenSSL (libssl-dev, Debian's libssl3 at run time).
// - libcrypto's SHA-256: its implementation uses the CPU's SHA instructions where there are any
//   (about 1.5 GB/s on this project's machines, against some 0.4 GB/s for libavutil's portable
//   one), and every segment of every take is checksummed.
// - libssl's TLS for the coordinator's HTTPS port (FleetHTTP/TLSServerHandler.swift): Debian
//   patches it for security, and the build compiles no TLS library of its own (BoringSSL,
//   through swift-nio-ssl, was about a seventh of a fresh build's CPU time).
#ifndef CAPFLEET_CCRYPTO_SHIM_H
#define CAPFLEET_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#endif
