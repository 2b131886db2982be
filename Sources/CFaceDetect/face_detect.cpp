// OpenCV's CascadeClassifier behind face_detect.h.
#include "face_detect.h"

#include <algorithm>
#include <exception>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/objdetect.hpp>

struct cf_face_detector {
    cv::CascadeClassifier cascade;
};

extern "C" cf_face_detector *cf_face_detector_create(const char *cascade_path) {
    try {
        auto *detector = new cf_face_detector();
        if (!detector->cascade.load(cascade_path) || detector->cascade.empty()) {
            delete detector;
            return nullptr;
        }
        return detector;
    } catch (const std::exception &) {
        return nullptr;
    }
}

extern "C" void cf_face_detector_destroy(cf_face_detector *detector) { delete detector; }

extern "C" int cf_face_detect(cf_face_detector *detector, const unsigned char *grey, int width, int height, int stride,
                              int min_size, cf_face_box *out, int max_faces) {
    if (detector == nullptr || grey == nullptr || width <= 0 || height <= 0 || stride < width || max_faces < 0) return -1;
    try {
        // The frame stays the caller's: wrapped, not copied; equalised into a copy (cascades
        // were trained on equalised faces).
        cv::Mat frame(height, width, CV_8UC1, const_cast<unsigned char *>(grey), static_cast<size_t>(stride));
        cv::Mat equalised;
        cv::equalizeHist(frame, equalised);
        std::vector<cv::Rect> faces;
        detector->cascade.detectMultiScale(equalised, faces, 1.1, 4, 0, cv::Size(min_size, min_size));
        std::sort(faces.begin(), faces.end(), [](const cv::Rect &a, const cv::Rect &b) { return a.area() > b.area(); });
        int count = std::min(static_cast<int>(faces.size()), max_faces);
        for (int i = 0; i < count; ++i) out[i] = cf_face_box{faces[i].x, faces[i].y, faces[i].width, faces[i].height};
        return count;
    } catch (const std::exception &) {
        return -1;
    }
}
