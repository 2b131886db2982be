// Thin shim over Debian's libqrencode (libqrencode-dev): QR codes the synthetic camera draws
// into its picture, so that code detection can be tested without a printed code.
#ifndef CAPFLEET_CQRENCODE_SHIM_H
#define CAPFLEET_CQRENCODE_SHIM_H
#include <qrencode.h>
#endif
