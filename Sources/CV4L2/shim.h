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
#include <linux/media.h>
#include <linux/v4l2-subdev.h>
#include <libv4l2.h>

static inline int capfleet_v4l2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int capfleet_v4l2_close(int fd) { return v4l2_close(fd); }
static inline int capfleet_v4l2_ioctl(int fd, unsigned long request, void *arg) { return v4l2_ioctl(fd, request, arg); }
static inline int capfleet_v4l2_errno(void) { return errno; }
// Media controllers and sub-devices: libv4l2's open refuses nodes that are not video nodes.
static inline int capfleet_kernel_open(const char *path, int flags) { return open(path, flags); }
static inline int capfleet_kernel_ioctl(int fd, unsigned long request, void *arg) { return ioctl(fd, request, arg); }

static const unsigned long CAPFLEET_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
static const unsigned long CAPFLEET_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
static const unsigned long CAPFLEET_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
static const unsigned long CAPFLEET_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;
static const unsigned long CAPFLEET_VIDIOC_G_FMT = VIDIOC_G_FMT;
static const unsigned long CAPFLEET_VIDIOC_S_FMT = VIDIOC_S_FMT;
static const unsigned long CAPFLEET_VIDIOC_TRY_FMT = VIDIOC_TRY_FMT;
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
static const unsigned long CAPFLEET_VIDIOC_G_EXT_CTRLS = VIDIOC_G_EXT_CTRLS;
static const unsigned long CAPFLEET_VIDIOC_S_EXT_CTRLS = VIDIOC_S_EXT_CTRLS;
static const unsigned long CAPFLEET_VIDIOC_G_INPUT = VIDIOC_G_INPUT;
static const unsigned long CAPFLEET_VIDIOC_ENUMINPUT = VIDIOC_ENUMINPUT;

static const unsigned int CAPFLEET_V4L2_CAP_META_CAPTURE = V4L2_CAP_META_CAPTURE;
static const unsigned int CAPFLEET_V4L2_CAP_VIDEO_CAPTURE_MPLANE = V4L2_CAP_VIDEO_CAPTURE_MPLANE;
static const unsigned int CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE = V4L2_BUF_TYPE_VIDEO_CAPTURE;
// Memory-to-memory codecs (hardware encoders): their capture queue carries the encoded stream.
static const unsigned int CAPFLEET_V4L2_CAP_VIDEO_M2M = V4L2_CAP_VIDEO_M2M;
static const unsigned int CAPFLEET_V4L2_CAP_VIDEO_M2M_MPLANE = V4L2_CAP_VIDEO_M2M_MPLANE;
static const unsigned int CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_H264 = V4L2_PIX_FMT_H264;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_HEVC = V4L2_PIX_FMT_HEVC;
static const unsigned int CAPFLEET_V4L2_MEMORY_MMAP = V4L2_MEMORY_MMAP;
static const unsigned int CAPFLEET_V4L2_FIELD_ANY = V4L2_FIELD_ANY;
static const unsigned int CAPFLEET_V4L2_FMT_FLAG_EMULATED = V4L2_FMT_FLAG_EMULATED;
static const unsigned int CAPFLEET_V4L2_FMT_FLAG_COMPRESSED = V4L2_FMT_FLAG_COMPRESSED;
static const unsigned int CAPFLEET_V4L2_FRMSIZE_TYPE_DISCRETE = V4L2_FRMSIZE_TYPE_DISCRETE;
static const unsigned int CAPFLEET_V4L2_FRMSIZE_TYPE_CONTINUOUS = V4L2_FRMSIZE_TYPE_CONTINUOUS;
static const unsigned int CAPFLEET_V4L2_FRMSIZE_TYPE_STEPWISE = V4L2_FRMSIZE_TYPE_STEPWISE;
static const unsigned int CAPFLEET_V4L2_FRMIVAL_TYPE_DISCRETE = V4L2_FRMIVAL_TYPE_DISCRETE;
static const unsigned int CAPFLEET_V4L2_FRMIVAL_TYPE_CONTINUOUS = V4L2_FRMIVAL_TYPE_CONTINUOUS;
static const unsigned int CAPFLEET_V4L2_FRMIVAL_TYPE_STEPWISE = V4L2_FRMIVAL_TYPE_STEPWISE;
static const unsigned int CAPFLEET_V4L2_CAP_TIMEPERFRAME = V4L2_CAP_TIMEPERFRAME;
static const unsigned int CAPFLEET_V4L2_BUF_FLAG_TIMESTAMP_MASK = V4L2_BUF_FLAG_TIMESTAMP_MASK;
static const unsigned int CAPFLEET_V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC = V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC;
static const unsigned int CAPFLEET_V4L2_BUF_FLAG_ERROR = V4L2_BUF_FLAG_ERROR;
static const unsigned int CAPFLEET_V4L2_SEL_TGT_CROP = V4L2_SEL_TGT_CROP;
static const unsigned int CAPFLEET_V4L2_SEL_TGT_CROP_DEFAULT = V4L2_SEL_TGT_CROP_DEFAULT;
static const unsigned int CAPFLEET_V4L2_SEL_TGT_CROP_BOUNDS = V4L2_SEL_TGT_CROP_BOUNDS;

static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_NEXT_COMPOUND = V4L2_CTRL_FLAG_NEXT_COMPOUND;
static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_DISABLED = V4L2_CTRL_FLAG_DISABLED;
static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_READ_ONLY = V4L2_CTRL_FLAG_READ_ONLY;
static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_INACTIVE = V4L2_CTRL_FLAG_INACTIVE;
static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_WRITE_ONLY = V4L2_CTRL_FLAG_WRITE_ONLY;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_INTEGER = V4L2_CTRL_TYPE_INTEGER;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_BOOLEAN = V4L2_CTRL_TYPE_BOOLEAN;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_MENU = V4L2_CTRL_TYPE_MENU;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_BUTTON = V4L2_CTRL_TYPE_BUTTON;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_INTEGER64 = V4L2_CTRL_TYPE_INTEGER64;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_CTRL_CLASS = V4L2_CTRL_TYPE_CTRL_CLASS;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_STRING = V4L2_CTRL_TYPE_STRING;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_BITMASK = V4L2_CTRL_TYPE_BITMASK;
static const unsigned int CAPFLEET_V4L2_CTRL_TYPE_INTEGER_MENU = V4L2_CTRL_TYPE_INTEGER_MENU;

static const unsigned int CAPFLEET_V4L2_CID_ZOOM_CONTINUOUS = V4L2_CID_ZOOM_CONTINUOUS;
static const unsigned int CAPFLEET_V4L2_CID_FOCUS_RELATIVE = V4L2_CID_FOCUS_RELATIVE;
static const unsigned int CAPFLEET_V4L2_CID_AUTO_FOCUS_START = V4L2_CID_AUTO_FOCUS_START;
static const unsigned int CAPFLEET_V4L2_CID_AUTO_FOCUS_STOP = V4L2_CID_AUTO_FOCUS_STOP;
static const unsigned int CAPFLEET_V4L2_CID_AUTO_FOCUS_RANGE = V4L2_CID_AUTO_FOCUS_RANGE;
static const unsigned int CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY = V4L2_CID_EXPOSURE_AUTO_PRIORITY;
// Exposure: EXPOSURE_AUTO is a menu of these modes, EXPOSURE_ABSOLUTE the time in 100 µs units.
static const unsigned int CAPFLEET_V4L2_CID_EXPOSURE_AUTO = V4L2_CID_EXPOSURE_AUTO;
static const unsigned int CAPFLEET_V4L2_CID_EXPOSURE_ABSOLUTE = V4L2_CID_EXPOSURE_ABSOLUTE;
static const int CAPFLEET_V4L2_EXPOSURE_AUTO = V4L2_EXPOSURE_AUTO;
static const int CAPFLEET_V4L2_EXPOSURE_MANUAL = V4L2_EXPOSURE_MANUAL;
static const int CAPFLEET_V4L2_EXPOSURE_SHUTTER_PRIORITY = V4L2_EXPOSURE_SHUTTER_PRIORITY;
static const int CAPFLEET_V4L2_EXPOSURE_APERTURE_PRIORITY = V4L2_EXPOSURE_APERTURE_PRIORITY;
static const int CAPFLEET_V4L2_AUTO_FOCUS_RANGE_AUTO = V4L2_AUTO_FOCUS_RANGE_AUTO;
static const int CAPFLEET_V4L2_AUTO_FOCUS_RANGE_NORMAL = V4L2_AUTO_FOCUS_RANGE_NORMAL;
static const int CAPFLEET_V4L2_AUTO_FOCUS_RANGE_MACRO = V4L2_AUTO_FOCUS_RANGE_MACRO;
static const int CAPFLEET_V4L2_AUTO_FOCUS_RANGE_INFINITY = V4L2_AUTO_FOCUS_RANGE_INFINITY;

// A control's menu item name or value: struct v4l2_querymenu is packed, which Swift
// cannot import field by field.
static inline const char *capfleet_querymenu_name(const struct v4l2_querymenu *menu) { return (const char *)menu->name; }
static inline long long capfleet_querymenu_value(const struct v4l2_querymenu *menu) { return menu->value; }

static const unsigned int CAPFLEET_V4L2_CAP_VIDEO_CAPTURE = V4L2_CAP_VIDEO_CAPTURE;
static const unsigned int CAPFLEET_V4L2_CAP_STREAMING = V4L2_CAP_STREAMING;
static const unsigned int CAPFLEET_V4L2_CAP_DEVICE_CAPS = V4L2_CAP_DEVICE_CAPS;

static const unsigned int CAPFLEET_V4L2_PIX_FMT_YUYV = V4L2_PIX_FMT_YUYV;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_NV12 = V4L2_PIX_FMT_NV12;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_MJPEG = V4L2_PIX_FMT_MJPEG;
static const unsigned int CAPFLEET_V4L2_PIX_FMT_GREY = V4L2_PIX_FMT_GREY;

static const unsigned int CAPFLEET_V4L2_CID_ZOOM_ABSOLUTE = V4L2_CID_ZOOM_ABSOLUTE;
static const unsigned int CAPFLEET_V4L2_CID_PAN_ABSOLUTE = V4L2_CID_PAN_ABSOLUTE;
static const unsigned int CAPFLEET_V4L2_CID_TILT_ABSOLUTE = V4L2_CID_TILT_ABSOLUTE;
static const unsigned int CAPFLEET_V4L2_CID_FOCUS_ABSOLUTE = V4L2_CID_FOCUS_ABSOLUTE;
static const unsigned int CAPFLEET_V4L2_CID_FOCUS_AUTO = V4L2_CID_FOCUS_AUTO;
static const unsigned int CAPFLEET_V4L2_CTRL_FLAG_NEXT_CTRL = V4L2_CTRL_FLAG_NEXT_CTRL;


// The media controller and sensor sub-devices (V4L2SensorTiming): which sensor feeds a video
// node, and the controls that time its frames line by line.
static const unsigned long CAPFLEET_MEDIA_IOC_G_TOPOLOGY = MEDIA_IOC_G_TOPOLOGY;
static const unsigned long CAPFLEET_VIDIOC_SUBDEV_G_FMT = VIDIOC_SUBDEV_G_FMT;
static const unsigned int CAPFLEET_MEDIA_ENT_F_CAM_SENSOR = MEDIA_ENT_F_CAM_SENSOR;
static const unsigned int CAPFLEET_MEDIA_INTF_T_V4L_VIDEO = MEDIA_INTF_T_V4L_VIDEO;
static const unsigned int CAPFLEET_MEDIA_INTF_T_V4L_SUBDEV = MEDIA_INTF_T_V4L_SUBDEV;
static const unsigned int CAPFLEET_MEDIA_LNK_FL_ENABLED = MEDIA_LNK_FL_ENABLED;
static const unsigned int CAPFLEET_MEDIA_LNK_FL_LINK_TYPE = MEDIA_LNK_FL_LINK_TYPE;
static const unsigned int CAPFLEET_MEDIA_LNK_FL_DATA_LINK = MEDIA_LNK_FL_DATA_LINK;
static const unsigned int CAPFLEET_MEDIA_LNK_FL_INTERFACE_LINK = MEDIA_LNK_FL_INTERFACE_LINK;
static const unsigned int CAPFLEET_MEDIA_PAD_FL_SINK = MEDIA_PAD_FL_SINK;
static const unsigned int CAPFLEET_MEDIA_PAD_FL_SOURCE = MEDIA_PAD_FL_SOURCE;
static const unsigned int CAPFLEET_V4L2_SUBDEV_FORMAT_ACTIVE = V4L2_SUBDEV_FORMAT_ACTIVE;
static const unsigned int CAPFLEET_V4L2_CID_VBLANK = V4L2_CID_VBLANK;
static const unsigned int CAPFLEET_V4L2_CID_HBLANK = V4L2_CID_HBLANK;
static const unsigned int CAPFLEET_V4L2_CID_PIXEL_RATE = V4L2_CID_PIXEL_RATE;

#endif
