// ALSA's PCM and control interfaces (libasound2-dev). The parameter structures are opaque and
// their *_alloca helpers are macros Swift cannot import, so the *_malloc forms are used; the
// few macros needed are re-declared as constants.
#ifndef CAPFLEET_CALSA_SHIM_H
#define CAPFLEET_CALSA_SHIM_H
#include <alsa/asoundlib.h>

static const int CAPFLEET_SND_PCM_NONBLOCK = SND_PCM_NONBLOCK;
static const int CAPFLEET_SND_PCM_NO_AUTO_RESAMPLE = SND_PCM_NO_AUTO_RESAMPLE;
static const int CAPFLEET_SND_PCM_NO_AUTO_CHANNELS = SND_PCM_NO_AUTO_CHANNELS;
static const int CAPFLEET_SND_PCM_NO_AUTO_FORMAT = SND_PCM_NO_AUTO_FORMAT;

// ALSA prints its own errors to stderr unless told otherwise; the agent says them in its log.
static inline void capfleet_alsa_silence(void) { snd_lib_error_set_handler(NULL); }
#endif
