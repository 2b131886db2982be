// Thin shim over libv4l2 (libv4l-dev). The VIDIOC_* request codes and V4L2_PIX_FMT_*
// fourccs are macros Swift cannot import, and v4l2_open/v4l2_ioctl are variadic, so
// they are re-declared as static consts and static inline wrappers.
#ifndef CAPFLEET_CV4L2_SHIM_H
#define CAPFLEET_CV4L2_SHIM_H
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/videodev2.h>
#include <libv4l2.h>

static inline int capfleet_v4l2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int capfleet_v4l2_close(int fd) { return v4l2_close(fd); }
static inline int capfleet_v4l2_ioctl(int fd, unsigned long request, void *arg) { return v4l2_ioctl(fd, request, arg); }
static inline int capfleet_v4l2_errno(void) { return errno; }

static const unsigned long CAPFLEET_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
static const unsigned long CAPFLEET_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
static const unsigned long CAPFLEET_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
static const unsigned long CAPFLEET_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;
static const unsigned long CAPFLEET_VIDIOC_G_FMT = VIDIOC_G_FMT;
static const unsigned long CAPFLEET_VIDIOC_S_FMT = VIDIOC_S_FMT;
static const unsigned long CAPFLEET_VIDIOC_G_PARM = VIDIOC_G_PARM;
static const unsigned long CAPFLEET_VIDIOC_S_PARM = VIDIOC_S_PARM;
static const unsigned long CAPFLEET_VIDIOC_REQBUFS = VIDIOC_REQBUFS;
static const unsigned long CAPFLEET_VIDIOC_QUERYBUF = VIDIOC_QUERYBUF;
static const unsigned long CAPFLEET_VIDIOC_QBUF = VIDIOC_QBUF;
static const unsigned long CAPFLEET_VIDIOC_DQBUF = VIDIOC_DQBUF;
static const unsigned long CAPFLEET_VIDIOC_STREAMON = VIDIOC_STREAMON;
static const unsigned long CAPFLEET_VIDIOC_STREAMOFF = VIDIOC_STREAMOFF;
static const unsigned long CAPFLEET_VIDIOC_QUERY_EXT_CTRL = VIDIOC_QUERY_EXT_CTRL;
static const unsigned long CAPFLEET_VIDIOC_QUERYMENU = VIDIOC_QUERYMENU;
static const unsigned long CAPFLEET_VIDIOC_G_CTRL = VIDIOC_G_CTRL;
static const unsigned long CAPFLEET_VIDIOC_S_CTRL = VIDIOC_S_CTRL;
static const unsigned long CAPFLEET_VIDIOC_G_SELECTION = VIDIOC_G_SELECTION;
static const unsigned long CAPFLEET_VIDIOC_S_SELECTION = VIDIOC_S_SELECTION;

static const unsigned int CAPFLEET_V4L2_CAP_VIDEO_CAPTURE = V4L2_CAP_VIDEO_CAPTURE;
static const unsigned int CAPFLEET_V4L2_CAP_STREAMING = V4L2_CAP_STREAMING;
static const unsigned int CAPFLEET_V4L2_CAP_DEVICE_CAPS = V4L2_CAP_DEVICE_CAPS;

static const unsigned int CAPFLEET_V4L2_PIX_FMT_YUYV = V4L2_PIX_FMT_YUYV;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_NV12 = V4L2_PIX_FMT_NV12;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_MJPEG = V4L2_PIX_FMT_MJPEG;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_GREY = V4L2_PIX_FMT_GREY;

static const unsigned int CAPFLEET_V4L2_CID_ZOOM_ABSOLUTE = V4L2_CID_ZOOM_ABSOLUTE;
static const unsigned int CAPFLEET_V4L2_CID_FOCUS_ABSOLUTE = V4L2_CID_FOCUS_ABSOLUTE;
static const unsigned int CAPFLEET_V4L2_CID_FOCUS_AUTO = V4L2_CID_FOCUS_AUTO;
static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_NEXT_CTRL = V4L2_CTRL_FLAG_NEXT_CTRL;

#endif
