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
// per-call cost. Every 8 MiB written, the kernel is asked to start writing them back
// (sync_file_range, which does not wait): a recording streams to the disk as it goes instead of
// piling up gigabytes of dirty pages that a flush, or the kernel's own thresholds, then write
// out in one stall.
typedef struct {
    int descriptor;
    int64_t position;      // where the next write lands
    int64_t written_back;  // bytes before this have been handed to writeback
} capfleet_avio_file;

static const int64_t CAPFLEET_WRITEBACK_STRIDE = 8 << 20;

// Linux's sync_file_range(2), declared here: fcntl.h shows it only under _GNU_SOURCE, which a
// module header cannot count on. SYNC_FILE_RANGE_WRITE starts writeback without waiting.
extern int sync_file_range(int descriptor, int64_t offset, int64_t count, unsigned int flags);
#define CAPFLEET_SYNC_FILE_RANGE_WRITE 2u

static int capfleet_avio_file_write(void *opaque, uint8_t *buffer, int size) {
    capfleet_avio_file *file = opaque;
    int done = 0;
    while (done < size) {
        ssize_t written = write(file->descriptor, buffer + done, (size_t)(size - done));
        if (written < 0) {
            if (errno == EINTR) continue;
            return AVERROR(errno);
        }
        done += (int)written;
    }
    file->position += size;
    if (file->position - file->written_back >= CAPFLEET_WRITEBACK_STRIDE) {
        // Best effort: a file system without it still gets its data at the flush.
        sync_file_range(file->descriptor, file->written_back, file->position - file->written_back, CAPFLEET_SYNC_FILE_RANGE_WRITE);
        file->written_back = file->position;
    }
    return size;
}

static int64_t capfleet_avio_file_seek(void *opaque, int64_t offset, int whence) {
    capfleet_avio_file *file = opaque;
    if (whence & AVSEEK_SIZE) {
        struct stat status;
        return fstat(file->descriptor, &status) == 0 ? (int64_t)status.st_size : AVERROR(errno);
    }
    off_t position = lseek(file->descriptor, (off_t)offset, whence & ~AVSEEK_FORCE);
    if (position < 0) return AVERROR(errno);
    file->position = position;
    if (file->written_back > position) file->written_back = position;
    return (int64_t)position;
}

/// Creates (truncates) `path` for writing through an AVIOContext with a `buffer_size` buffer.
static inline int capfleet_avio_open_file(AVIOContext **context, const char *path, int buffer_size) {
    capfleet_avio_file *file = av_mallocz(sizeof *file);
    if (!file) return AVERROR(ENOMEM);
    file->descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file->descriptor < 0) {
        int error = AVERROR(errno);
        av_free(file);
        return error;
    }
    unsigned char *buffer = av_malloc((size_t)buffer_size);
    AVIOContext *opened = buffer ? avio_alloc_context(buffer, buffer_size, 1, file, NULL, capfleet_avio_file_write, capfleet_avio_file_seek) : NULL;
    if (!opened) {
        av_free(buffer);
        close(file->descriptor);
        av_free(file);
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
    capfleet_avio_file *file = (*context)->opaque;
    av_freep(&(*context)->buffer);
    avio_context_free(context);
    if (close(file->descriptor) != 0 && error >= 0) error = AVERROR(errno);
    av_free(file);
    return error < 0 ? error : 0;
}
#endif
