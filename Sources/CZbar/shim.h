// Thin shim over Debian's ZBar (libzbar-dev): barcodes and QR codes found in grey images.
#ifndef CAPFLEET_CZBAR_SHIM_H
#define CAPFLEET_CZBAR_SHIM_H
#include <zbar.h>

// ZBar's grey format, 'Y800', as the FourCC its image API takes.
static const unsigned long capfleet_zbar_y800 = 0x30303859UL;

#endif
