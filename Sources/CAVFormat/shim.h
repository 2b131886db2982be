// Thin shim over FFmpeg's libavformat/libavcodec/libavutil (libavformat-dev): muxing only,
// never encoding. AV_NOPTS_VALUE, AVERROR() and AVERROR_EOF are macros Swift cannot import,
// and av_err2str uses a compound literal, so they are re-declared here.
#ifndef CAPFLEET_CAVFORMAT_SHIM_H
#define CAPFLEET_CAVFORMAT_SHIM_H
#include <errno.h>
#include <stdio.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/error.h>
#include <libavutil/sha.h>
#include <libavutil/imgutils.h>

static const int64_t CAPFLEET_AV_NOPTS_VALUE = AV_NOPTS_VALUE;
static const int CAPFLEET_AVERROR_EOF = AVERROR_EOF;
static inline int capfleet_averror(int posix) { return AVERROR(posix); }

/// The message for an FFmpeg error code, into `buffer` (AV_ERROR_MAX_STRING_SIZE bytes).
static inline const char *capfleet_av_strerror(int code, char *buffer, size_t size) {
    if (av_strerror(code, buffer, size) < 0) snprintf(buffer, size, "FFmpeg error %d", code);
    return buffer;
}
#endif
