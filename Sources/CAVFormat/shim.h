// Thin shim over FFmpeg's libavformat/libavcodec/libavutil (libavformat-dev): muxing only,
// never encoding. AV_NOPTS_VALUE, AVERROR() and AVERROR_EOF are macros Swift cannot import,
// and av_err2str uses a compound literal, so they are re-declared here.
#ifndef CAPFLEET_CAVFORMAT_SHIM_H
#define CAPFLEET_CAVFORMAT_SHIM_H
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
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

// A file to write a muxer's output to, with a buffer of the caller's size: avio_open's 32 KiB
// buffer made some 60 000 write(2) calls per GB of raw video, each with the file system's
// per-call cost. The descriptor travels as the context's opaque pointer.
static int capfleet_avio_file_write(void *opaque, uint8_t *buffer, int size) {
    int descriptor = (int)(intptr_t)opaque;
    int done = 0;
    while (done < size) {
        ssize_t written = write(descriptor, buffer + done, (size_t)(size - done));
        if (written < 0) {
            if (errno == EINTR) continue;
            return AVERROR(errno);
        }
        done += (int)written;
    }
    return size;
}

static int64_t capfleet_avio_file_seek(void *opaque, int64_t offset, int whence) {
    int descriptor = (int)(intptr_t)opaque;
    if (whence & AVSEEK_SIZE) {
        struct stat status;
        return fstat(descriptor, &status) == 0 ? (int64_t)status.st_size : AVERROR(errno);
    }
    off_t position = lseek(descriptor, (off_t)offset, whence & ~AVSEEK_FORCE);
    return position < 0 ? AVERROR(errno) : (int64_t)position;
}

/// Creates (truncates) `path` for writing through an AVIOContext with a `buffer_size` buffer.
static inline int capfleet_avio_open_file(AVIOContext **context, const char *path, int buffer_size) {
    int descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (descriptor < 0) return AVERROR(errno);
    unsigned char *buffer = av_malloc((size_t)buffer_size);
    if (!buffer) {
        close(descriptor);
        return AVERROR(ENOMEM);
    }
    AVIOContext *opened = avio_alloc_context(buffer, buffer_size, 1, (void *)(intptr_t)descriptor, NULL,
                                             capfleet_avio_file_write, capfleet_avio_file_seek);
    if (!opened) {
        av_free(buffer);
        close(descriptor);
        return AVERROR(ENOMEM);
    }
    // Matroska goes back to fill in the header's duration and the cues' position at the end.
    opened->seekable = AVIO_SEEKABLE_NORMAL;
    *context = opened;
    return 0;
}

/// Flushes and closes what capfleet_avio_open_file opened; the first error seen, or 0.
static inline int capfleet_avio_close_file(AVIOContext **context) {
    if (!context || !*context) return 0;
    avio_flush(*context);
    int error = (*context)->error;
    int descriptor = (int)(intptr_t)(*context)->opaque;
    av_freep(&(*context)->buffer);
    avio_context_free(context);
    if (close(descriptor) != 0 && error >= 0) error = AVERROR(errno);
    return error < 0 ? error : 0;
}
#endif
