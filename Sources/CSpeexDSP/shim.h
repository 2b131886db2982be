// speexdsp's preprocessor (libspeexdsp-dev): the noise suppression of a microphone's processing.
#ifndef CAPFLEET_CSPEEXDSP_SHIM_H
#define CAPFLEET_CSPEEXDSP_SHIM_H
#include <speex/speex_preprocess.h>
#endif
