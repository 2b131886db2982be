// A C interface over OpenCV's cascade face detector (libopencv-objdetect-dev), so that Swift
// calls plain C: OpenCV 4 has only a C++ API. Every C++ exception stops at this boundary.
#ifndef CAPFLEET_FACE_DETECT_H
#define CAPFLEET_FACE_DETECT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cf_face_detector cf_face_detector;

typedef struct {
    int x;
    int y;
    int width;
    int height;
} cf_face_box;

/// A detector with the Haar or LBP cascade at `cascade_path`; NULL if it cannot be loaded.
cf_face_detector *cf_face_detector_create(const char *cascade_path);
void cf_face_detector_destroy(cf_face_detector *detector);

/// Faces in a grey picture (`stride` bytes a row), largest first, at least `min_size` pixels
/// wide: writes at most `max_faces` boxes to `out` and returns how many, or -1 if OpenCV failed.
int cf_face_detect(cf_face_detector *detector, const unsigned char *grey, int width, int height, int stride,
                   int min_size, cf_face_box *out, int max_faces);

#ifdef __cplusplus
}
#endif
#endif
