// Thin shim over FFmpeg's libavcodec/libavutil/libavfilter (libavcodec-dev, libavfilter-dev) for the agent's encoders:
// what Swift cannot import (AVERROR(), option setters taking macros), and the repacking of a
// camera's packed or semi-planar pixels into the planes an encoder takes. The repacking is
// exact where the target keeps every sample (FFV1's bit-exact promise rests on it).
#ifndef CAPFLEET_CAVCODEC_SHIM_H
#define CAPFLEET_CAVCODEC_SHIM_H
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/hwcontext.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>

static const int CAPFLEET_CODEC_AVERROR_EOF = AVERROR_EOF;
static const int64_t CAPFLEET_CODEC_NOPTS_VALUE = AV_NOPTS_VALUE;
static const int CAPFLEET_CODEC_FLAG_GLOBAL_HEADER = AV_CODEC_FLAG_GLOBAL_HEADER;
static const int CAPFLEET_THREAD_SLICE = FF_THREAD_SLICE;
static const int CAPFLEET_THREAD_FRAME = FF_THREAD_FRAME;
static inline int capfleet_codec_averror(int posix) { return AVERROR(posix); }
// A take's stabilisation filter (libavfilter) takes a reference to the picture, which the
// encoder goes on filling.
static const int CAPFLEET_BUFFERSRC_KEEP_REF = AV_BUFFERSRC_FLAG_KEEP_REF;

// FFmpeg's own messages go to stderr; the agent says what matters in its log and events.
static inline void capfleet_codec_quiet(void) { av_log_set_level(AV_LOG_ERROR); }

static inline const char *capfleet_codec_strerror(int code, char *buffer, size_t size) {
    if (av_strerror(code, buffer, size) < 0) snprintf(buffer, size, "FFmpeg error %d", code);
    return buffer;
}

// The camera layouts the agent encodes from.
typedef enum {
    CAPFLEET_SOURCE_YUYV = 0,  // packed 4:2:2, Y0 U Y1 V
    CAPFLEET_SOURCE_UYVY = 1,  // packed 4:2:2, U Y0 V Y1
    CAPFLEET_SOURCE_NV12 = 2,  // Y plane, then interleaved U V at half height
    CAPFLEET_SOURCE_GREY = 3,  // Y only
    CAPFLEET_SOURCE_GREY_WORDS = 4,  // Y only, 16-bit little-endian words (Y10, Y12, Y16, Z16)
    CAPFLEET_SOURCE_P0XX = 5,  // NV12 in 16-bit little-endian words, samples in the top bits (P010, P016)
} capfleet_source_layout;

// Fills `frame` (already allocated in its format: YUV422P, YUV420P, NV12 or GRAY8) from a
// camera frame of `width`x`height` whose first plane's rows are `stride` bytes apart.
// 4:2:2 to 4:2:0 averages each pair of rows' chroma (rounding up at .5); every other
// conversion moves samples without changing them. Returns 0, or AVERROR(EINVAL) for a
// combination it does not make.
static inline int capfleet_fill_frame(AVFrame *frame, const uint8_t *source, capfleet_source_layout layout,
                                      int width, int height, int stride) {
    const int target = frame->format;
    uint8_t *Y = frame->data[0], *U = frame->data[1], *V = frame->data[2];
    const int ys = frame->linesize[0], us = frame->linesize[1], vs = frame->linesize[2];
    if (layout == CAPFLEET_SOURCE_YUYV || layout == CAPFLEET_SOURCE_UYVY) {
        const int y0 = layout == CAPFLEET_SOURCE_YUYV ? 0 : 1, u0 = layout == CAPFLEET_SOURCE_YUYV ? 1 : 0;
        const int pairs = width / 2;
        for (int row = 0; row < height; row++) {
            const uint8_t *line = source + (size_t)row * stride;
            uint8_t *yrow = Y + (size_t)row * ys;
            for (int x = 0; x < pairs; x++) {
                yrow[2 * x] = line[4 * x + y0];
                yrow[2 * x + 1] = line[4 * x + y0 + 2];
            }
            if (target == AV_PIX_FMT_YUV422P) {
                uint8_t *urow = U + (size_t)row * us, *vrow = V + (size_t)row * vs;
                for (int x = 0; x < pairs; x++) {
                    urow[x] = line[4 * x + u0];
                    vrow[x] = line[4 * x + u0 + 2];
                }
            } else if ((row & 1) == 0) {
                const uint8_t *next = row + 1 < height ? line + stride : line;
                if (target == AV_PIX_FMT_YUV420P) {
                    uint8_t *urow = U + (size_t)(row / 2) * us, *vrow = V + (size_t)(row / 2) * vs;
                    for (int x = 0; x < pairs; x++) {
                        urow[x] = (uint8_t)((line[4 * x + u0] + next[4 * x + u0] + 1) >> 1);
                        vrow[x] = (uint8_t)((line[4 * x + u0 + 2] + next[4 * x + u0 + 2] + 1) >> 1);
                    }
                } else if (target == AV_PIX_FMT_NV12) {
                    uint8_t *uv = U + (size_t)(row / 2) * us;
                    for (int x = 0; x < pairs; x++) {
                        uv[2 * x] = (uint8_t)((line[4 * x + u0] + next[4 * x + u0] + 1) >> 1);
                        uv[2 * x + 1] = (uint8_t)((line[4 * x + u0 + 2] + next[4 * x + u0 + 2] + 1) >> 1);
                    }
                } else {
                    return AVERROR(EINVAL);
                }
            }
        }
        return 0;
    }
    if (layout == CAPFLEET_SOURCE_NV12) {
        for (int row = 0; row < height; row++) memcpy(Y + (size_t)row * ys, source + (size_t)row * stride, (size_t)width);
        const uint8_t *chroma = source + (size_t)stride * height;
        for (int row = 0; row < height / 2; row++) {
            const uint8_t *line = chroma + (size_t)row * stride;
            if (target == AV_PIX_FMT_NV12) {
                memcpy(U + (size_t)row * us, line, (size_t)width);
            } else if (target == AV_PIX_FMT_YUV420P) {
                uint8_t *urow = U + (size_t)row * us, *vrow = V + (size_t)row * vs;
                for (int x = 0; x < width / 2; x++) {
                    urow[x] = line[2 * x];
                    vrow[x] = line[2 * x + 1];
                }
            } else {
                return AVERROR(EINVAL);
            }
        }
        return 0;
    }
    if (layout == CAPFLEET_SOURCE_GREY) {
        for (int row = 0; row < height; row++) memcpy(Y + (size_t)row * ys, source + (size_t)row * stride, (size_t)width);
        if (target == AV_PIX_FMT_GRAY8) return 0;
        // Colour encoders get neutral chroma.
        if (target == AV_PIX_FMT_YUV420P) {
            for (int row = 0; row < height / 2; row++) {
                memset(U + (size_t)row * us, 128, (size_t)width / 2);
                memset(V + (size_t)row * vs, 128, (size_t)width / 2);
            }
            return 0;
        }
        if (target == AV_PIX_FMT_NV12) {
            for (int row = 0; row < height / 2; row++) memset(U + (size_t)row * us, 128, (size_t)width);
            return 0;
        }
    }
    return AVERROR(EINVAL);
}

// Fills `frame` from a camera frame of 16-bit little-endian words (CAPFLEET_SOURCE_GREY_WORDS
// or CAPFLEET_SOURCE_P0XX) whose rows are `stride` bytes apart, each word shifted right by
// `shift` bits first: 0 keeps every bit (FFV1 at full depth), more drops the low bits a
// shallower target has no room for (HEVC Main 10, 8-bit H.264). The target is planar 4:2:0
// or grey, of 16-bit samples (its depth above 8) or of bytes, or NV12; grey sources give
// it neutral chroma. Returns 0, or AVERROR(EINVAL) for a combination it does not make.
static inline int capfleet_fill_frame_words(AVFrame *frame, const uint8_t *source, capfleet_source_layout layout,
                                            int width, int height, int stride, int shift) {
    const AVPixFmtDescriptor *described = av_pix_fmt_desc_get((enum AVPixelFormat)frame->format);
    if (!described || (layout != CAPFLEET_SOURCE_GREY_WORDS && layout != CAPFLEET_SOURCE_P0XX)) return AVERROR(EINVAL);
    const int depth = described->comp[0].depth;
    const int wide = depth > 8;
    const int grey = described->nb_components == 1;
    const int nv12 = frame->format == AV_PIX_FMT_NV12;
    const int neutral = 1 << (depth - 1);
    if (grey && layout == CAPFLEET_SOURCE_P0XX) return AVERROR(EINVAL);
    for (int row = 0; row < height; row++) {
        const uint8_t *line = source + (size_t)row * stride;
        uint8_t *out = frame->data[0] + (size_t)row * frame->linesize[0];
        for (int x = 0; x < width; x++) {
            const unsigned word = (unsigned)line[2 * x] | (unsigned)line[2 * x + 1] << 8;
            if (wide) ((uint16_t *)out)[x] = (uint16_t)(word >> shift);
            else out[x] = (uint8_t)(word >> shift);
        }
    }
    if (grey) return 0;
    const int chromaWidth = width / 2, chromaHeight = height / 2;
    for (int row = 0; row < chromaHeight; row++) {
        const uint8_t *line = source + (size_t)stride * height + (size_t)row * stride;
        uint8_t *u = frame->data[1] + (size_t)row * frame->linesize[1];
        uint8_t *v = nv12 ? NULL : frame->data[2] + (size_t)row * frame->linesize[2];
        for (int x = 0; x < chromaWidth; x++) {
            unsigned cb = neutral, cr = neutral;
            if (layout == CAPFLEET_SOURCE_P0XX) {
                cb = ((unsigned)line[4 * x] | (unsigned)line[4 * x + 1] << 8) >> shift;
                cr = ((unsigned)line[4 * x + 2] | (unsigned)line[4 * x + 3] << 8) >> shift;
            }
            if (nv12) {
                u[2 * x] = (uint8_t)cb;
                u[2 * x + 1] = (uint8_t)cr;
            } else if (wide) {
                ((uint16_t *)u)[x] = (uint16_t)cb;
                ((uint16_t *)v)[x] = (uint16_t)cr;
            } else {
                u[x] = (uint8_t)cb;
                v[x] = (uint8_t)cr;
            }
        }
    }
    return 0;
}

// Sets up VA-API surfaces for `context` on `device` (a render node, /dev/dri/renderD128):
// frames are uploaded as NV12. Returns 0 or an FFmpeg error; `device_out` is the device to
// keep (and unref) alongside the encoder.
static inline int capfleet_vaapi_prepare(AVCodecContext *context, const char *device, AVBufferRef **device_out) {
    AVBufferRef *hardware = NULL;
    int code = av_hwdevice_ctx_create(&hardware, AV_HWDEVICE_TYPE_VAAPI, device, NULL, 0);
    if (code < 0) return code;
    AVBufferRef *frames = av_hwframe_ctx_alloc(hardware);
    if (!frames) {
        av_buffer_unref(&hardware);
        return AVERROR(ENOMEM);
    }
    AVHWFramesContext *described = (AVHWFramesContext *)frames->data;
    described->format = AV_PIX_FMT_VAAPI;
    described->sw_format = AV_PIX_FMT_NV12;
    described->width = context->width;
    described->height = context->height;
    described->initial_pool_size = 8;
    code = av_hwframe_ctx_init(frames);
    if (code < 0) {
        av_buffer_unref(&frames);
        av_buffer_unref(&hardware);
        return code;
    }
    context->hw_frames_ctx = frames;  // the context owns this reference now
    *device_out = hardware;
    return 0;
}

// Uploads `software` (NV12) into a new hardware frame from `context`'s pool.
static inline int capfleet_hw_upload(AVCodecContext *context, const AVFrame *software, AVFrame *hardware) {
    int code = av_hwframe_get_buffer(context->hw_frames_ctx, hardware, 0);
    if (code < 0) return code;
    code = av_hwframe_transfer_data(hardware, software, 0);
    if (code < 0) return code;
    return av_frame_copy_props(hardware, software);
}
#endif
