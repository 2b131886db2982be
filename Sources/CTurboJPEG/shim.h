// Thin shim over Debian's TurboJPEG API (libturbojpeg0-dev): JPEG encoding and decoding,
// with decoding scaled down by the library (1/2, 1/4, 1/8) for previews of MJPEG cameras.
#ifndef CAPFLEET_CTURBOJPEG_SHIM_H
#define CAPFLEET_CTURBOJPEG_SHIM_H
#include <turbojpeg.h>

// The scaled size macro, which Swift cannot import.
static inline int capfleet_tj_scaled(int dimension, tjscalingfactor factor) { return TJSCALED(dimension, factor); }

#endif
